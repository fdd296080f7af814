package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Instance is one herd process serving a PostgreSQL database beside
// others (docs/DESIGN.md §14). It holds a lease it renews; once the lease
// has expired the instance counts as dead, and a live one closes its runs
// (TakeOrphanRuns). Lease times are the database's clock, so instances on
// machines whose clocks differ still agree on who is dead.
type Instance struct {
	ID        string `gorm:"primaryKey;size:36"`
	Addr      string `gorm:"not null;default:''"`
	StartedAt time.Time
	ExpiresAt time.Time `gorm:"index"`
	// Epoch is the lease's fencing token: each registration of the
	// instance takes a new one, and a run it claims or takes over carries
	// it (Run.LeaseEpoch). 0 in rows of a herd from before fencing, whose
	// runs carry 0 too.
	Epoch int64 `gorm:"not null;default:0"`
}

// ErrLeaseLost is returned by RenewLease when the instance's lease is no
// longer there: another instance found it expired and took over its runs.
var ErrLeaseLost = errors.New("store: this instance's lease expired and another instance took over its runs")

// ErrFenced refuses a write of a run that this instance no longer owns
// (its lease was taken over), or a run claimed while this instance holds
// no lease (docs/DESIGN.md §14): the write is refused inside its
// transaction, so an instance that lost its lease never writes.
var ErrFenced = errors.New("store: this instance no longer holds the lease of the run")

// Fence is the lease an instance writes under: its id and epoch. The
// Writer checks it for every record of a run (WriterOptions.Fence), a
// claim carries it (Run.InstanceID, Run.LeaseEpoch). A zero Epoch (a
// lease lost, a new one not yet registered) refuses every write of a
// run. Only PostgreSQL's instances fence; SQLite has one owner (its data
// directory's lock).
type Fence struct {
	Instance string
	Epoch    int64
}

// fenceRunsSQL returns, of the runs listed, those that are the fence's:
// owned by its instance under its epoch while its lease row holds that
// epoch. FOR SHARE holds them until the transaction ends, so a takeover
// (TakeOrphanRuns, an UPDATE) waits for the commit it would otherwise
// race, and a later commit sees the new owner.
const fenceRunsSQL = `SELECT r.id FROM runs r WHERE r.id = ANY($1) AND r.instance_id = $2 AND r.lease_epoch = $3
	AND EXISTS (SELECT 1 FROM instances i WHERE i.id = $2 AND i.epoch = $3) FOR SHARE OF r`

// errInstancesSQLite: one herd serves a SQLite database; instances and
// leases are PostgreSQL's.
var errInstancesSQLite = errors.New("store: instances need PostgreSQL")

// direct is the pool for a short write made outside the Writer: the
// writer connection on SQLite (the readers are query-only), the readers'
// pool on PostgreSQL, so that a lease renewal or a run's claim never
// queues behind a batch (or a storage fault) on the writer's connection.
func (s *Store) direct(ctx context.Context) *gorm.DB {
	if s.pg {
		return s.r.WithContext(ctx)
	}
	return s.w.WithContext(ctx)
}

// RegisterInstance records instance id, listening at addr, with a lease
// that ends after lease unless renewed, and returns the lease's new
// epoch. Registering again (a rejoin after a lost lease) replaces the
// row with a new epoch: the runs of the old one are no longer this
// instance's to write. An epoch is the database's clock in microseconds,
// so a later registration of an id always has a greater one.
func (s *Store) RegisterInstance(ctx context.Context, id, addr string, lease time.Duration) (int64, error) {
	if !s.pg {
		return 0, errInstancesSQLite
	}
	var epoch int64
	err := s.direct(ctx).Raw(`INSERT INTO instances (id, addr, started_at, expires_at, epoch)
		VALUES (?, ?, clock_timestamp(), clock_timestamp() + ? * interval '1 millisecond', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)
		ON CONFLICT (id) DO UPDATE SET addr = excluded.addr, expires_at = excluded.expires_at, epoch = GREATEST(excluded.epoch, instances.epoch + 1)
		RETURNING epoch`,
		id, addr, lease.Milliseconds()).Scan(&epoch).Error
	if err != nil {
		return 0, fmt.Errorf("store: register instance: %w", err)
	}
	return epoch, nil
}

// RenewLease extends the lease of instance id, registered with epoch, to
// lease from now. ErrLeaseLost means another instance has taken it over
// (TakeOrphanRuns deleted the row in the transaction that moved its
// runs). A lease that has expired but that no instance has taken over is
// renewed: the database is the judge of who owns a run, not the clock,
// and every write of a run checks its owner (SetFence), so the two can
// never both write.
func (s *Store) RenewLease(ctx context.Context, id string, epoch int64, lease time.Duration) error {
	if !s.pg {
		return errInstancesSQLite
	}
	res := s.direct(ctx).Exec("UPDATE instances SET expires_at = clock_timestamp() + ? * interval '1 millisecond' WHERE id = ? AND epoch = ?", lease.Milliseconds(), id, epoch)
	switch {
	case res.Error != nil:
		return fmt.Errorf("store: renew lease: %w", res.Error)
	case res.RowsAffected == 0:
		return ErrLeaseLost
	}
	return nil
}

// RetireInstance removes instance id at a clean shutdown, once its runs
// have ended: another instance need not wait for its lease to expire.
func (s *Store) RetireInstance(ctx context.Context, id string) error {
	if err := s.direct(ctx).Exec("DELETE FROM instances WHERE id = ?", id).Error; err != nil {
		return fmt.Errorf("store: retire instance: %w", err)
	}
	return nil
}

// LiveInstances lists the instances whose lease has not run out: the
// herds serving the database now.
func (s *Store) LiveInstances(ctx context.Context) ([]Instance, error) {
	if !s.pg {
		return nil, errInstancesSQLite
	}
	return list[Instance](s.r.WithContext(ctx).Where("expires_at > clock_timestamp()").Order("started_at, id"), "live instances")
}

// Instances lists the registered instances, oldest first.
func (s *Store) Instances(ctx context.Context) ([]Instance, error) {
	return list[Instance](s.r.WithContext(ctx).Order("started_at, id"), "instances")
}

// TakeOrphanRuns makes instance me, under epoch, the owner of every
// running run whose lease is gone, and returns them for closing
// (agent.Runtime.Failover). Gone are the leases that expired (their rows
// are deleted here) and those with no row at all, or a row of another
// epoch (retired or rejoined with a run left open, runs from before
// instances). An expired lease is judged only once the database itself
// has been up for settle: after a restart of PostgreSQL every instance
// gets that long to renew, so an outage of the database is not taken for
// the death of its instances. Two survivors sweeping at once never take
// the same run: the UPDATE locks each row, and the loser, re-reading it,
// finds it owned by the winner, a live instance; a run a writer holds
// (fenceRunsSQL) is waited for at most lockWait, then left for the next
// sweep. A survivor that dies while closing them leaves them in its own
// name, for the next sweep.
func (s *Store) TakeOrphanRuns(ctx context.Context, me string, epoch int64, settle time.Duration) ([]Run, error) {
	if !s.pg {
		return nil, errInstancesSQLite
	}
	var runs []Run
	err := s.direct(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(fmt.Sprintf("SET LOCAL lock_timeout = %d", lockWait.Milliseconds())).Error; err != nil {
			return err
		}
		if err := tx.Exec("DELETE FROM instances WHERE expires_at < clock_timestamp() AND pg_postmaster_start_time() < clock_timestamp() - ? * interval '1 millisecond'",
			settle.Milliseconds()).Error; err != nil {
			return err
		}
		return tx.Raw(`UPDATE runs SET instance_id = ?, lease_epoch = ? WHERE status = ?
			AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = runs.instance_id AND i.epoch = runs.lease_epoch) RETURNING *`, me, epoch, RunRunning).
			Scan(&runs).Error
	})
	if err != nil {
		return nil, fmt.Errorf("store: take orphan runs: %w", err)
	}
	return runs, nil
}

// lockWait bounds how long a sweep waits for a run a writer's
// transaction holds.
const lockWait = 2 * time.Second

// ErrTooManyRuns is ClaimRun's error when the user already has as many
// running runs as they may, on every instance together.
var ErrTooManyRuns = errors.New("too many running runs")

// ClaimRun inserts r, a run starting (under the lease r.InstanceID and
// r.LeaseEpoch name, which must still be that instance's, else
// ErrFenced): the database's partial unique index
// on running runs refuses a second one in the thread with ErrConflict,
// whichever instance holds the first. With perUser > 0 it refuses a run
// beyond the user's perUser running ones with ErrTooManyRuns; the count
// and the insert are one transaction under a per-user advisory lock on
// PostgreSQL (SQLite's writer is one connection), so instances claiming
// at once cannot both slip under the limit. The Writer later writes the
// same run with the log (an upsert), so the run row exists before its
// first record.
func (s *Store) ClaimRun(ctx context.Context, r *Run, perUser int) error {
	err := s.direct(ctx).Transaction(func(tx *gorm.DB) error {
		if r.LeaseEpoch != 0 && s.pg {
			// A claim under a lease that is gone would be an orphan at
			// once: refused, and the lease row is held until the run is in.
			var n int64
			if err := tx.Raw("SELECT count(*) FROM (SELECT 1 FROM instances WHERE id = ? AND epoch = ? FOR SHARE) held", r.InstanceID, r.LeaseEpoch).Scan(&n).Error; err != nil {
				return err
			}
			if n == 0 {
				return ErrFenced
			}
		}
		if perUser > 0 && s.pg {
			if err := tx.Exec("SELECT pg_advisory_xact_lock(hashtext(? || current_schema()))", "herd user "+r.UserID).Error; err != nil {
				return err
			}
		}
		// The insert first: a thread's running run is a conflict (409)
		// before it counts against the user (429).
		if err := tx.Create(r).Error; err != nil {
			return err
		}
		if perUser > 0 {
			return s.userRuns(tx, r.UserID, perUser)
		}
		return nil
	})
	switch {
	case errors.Is(err, gorm.ErrDuplicatedKey):
		return fmt.Errorf("store: claim run: %w", ErrConflict)
	case errors.Is(err, ErrFenced):
		return fmt.Errorf("store: claim run: %w", ErrFenced)
	case err != nil:
		return fmt.Errorf("store: claim run: %w", err)
	}
	return nil
}

// userRuns fails with ErrTooManyRuns when userID has more than perUser
// running runs, the one being claimed included.
func (s *Store) userRuns(tx *gorm.DB, userID string, perUser int) error {
	var n int64
	if err := tx.Model(&Run{}).Where("status = ? AND user_id = ?", RunRunning, userID).Count(&n).Error; err != nil {
		return err
	}
	if n > int64(perUser) {
		return ErrTooManyRuns
	}
	return nil
}

// AbandonRun removes a claimed run that never started (its first write
// failed), so its thread is free again and nothing of it is left half
// written; not once another instance has taken it over (its owner is no
// longer f's).
func (s *Store) AbandonRun(ctx context.Context, id string, f Fence) error {
	q := s.direct(ctx).Where("id = ? AND status = ?", id, RunRunning)
	if f.Epoch != 0 {
		q = q.Where("instance_id = ? AND lease_epoch = ?", f.Instance, f.Epoch)
	}
	if err := q.Delete(&Run{}).Error; err != nil {
		return fmt.Errorf("store: abandon run: %w", err)
	}
	return nil
}

// Notify sends payload on channel to every instance LISTENing on it, at
// once, from the read pool: for a notice that must have left when its
// request answers (a delete whose instance may die the next moment).
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	if !s.pg {
		return errInstancesSQLite
	}
	if err := s.direct(ctx).Exec("SELECT pg_notify(?, ?)", channel, payload).Error; err != nil {
		return fmt.Errorf("store: notify: %w", err)
	}
	return nil
}
