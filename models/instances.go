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
}

// ErrLeaseLost is returned by RenewLease when the instance's row is gone:
// its lease expired and another instance closed its runs.
var ErrLeaseLost = errors.New("store: this instance's lease expired and another instance took over its runs")

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
// that ends after lease unless renewed.
func (s *Store) RegisterInstance(ctx context.Context, id, addr string, lease time.Duration) error {
	if !s.pg {
		return errInstancesSQLite
	}
	err := s.direct(ctx).Exec("INSERT INTO instances (id, addr, started_at, expires_at) VALUES (?, ?, clock_timestamp(), clock_timestamp() + ? * interval '1 millisecond')",
		id, addr, lease.Milliseconds()).Error
	if err != nil {
		return fmt.Errorf("store: register instance: %w", err)
	}
	return nil
}

// RenewLease extends instance id's lease to lease from now. ErrLeaseLost
// means it had expired and another instance has taken over.
func (s *Store) RenewLease(ctx context.Context, id string, lease time.Duration) error {
	if !s.pg {
		return errInstancesSQLite
	}
	res := s.direct(ctx).Exec("UPDATE instances SET expires_at = clock_timestamp() + ? * interval '1 millisecond' WHERE id = ?", lease.Milliseconds(), id)
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

// TakeOrphanRuns makes instance me the owner of every running run whose
// instance is dead, and returns them for closing (agent.Runtime.Failover).
// Dead are the instances whose lease has expired (their rows are deleted
// here) and those with no row at all (retired with a run left open, or
// runs from before instances). Two survivors sweeping at once never take
// the same run: the UPDATE locks each row, and the loser, re-reading it,
// finds it owned by the winner, a live instance. A survivor that dies
// while closing them leaves them in its own name, for the next sweep.
func (s *Store) TakeOrphanRuns(ctx context.Context, me string) ([]Run, error) {
	if !s.pg {
		return nil, errInstancesSQLite
	}
	var runs []Run
	err := s.direct(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("DELETE FROM instances WHERE expires_at < clock_timestamp()").Error; err != nil {
			return err
		}
		return tx.Raw("UPDATE runs SET instance_id = ? WHERE status = ? AND instance_id NOT IN (SELECT id FROM instances) RETURNING *", me, RunRunning).
			Scan(&runs).Error
	})
	if err != nil {
		return nil, fmt.Errorf("store: take orphan runs: %w", err)
	}
	return runs, nil
}

// ErrTooManyRuns is ClaimRun's error when the user already has as many
// running runs as they may, on every instance together.
var ErrTooManyRuns = errors.New("too many running runs")

// ClaimRun inserts r, a run starting: the database's partial unique index
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
// written.
func (s *Store) AbandonRun(ctx context.Context, id string) error {
	if err := s.direct(ctx).Where("id = ? AND status = ?", id, RunRunning).Delete(&Run{}).Error; err != nil {
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
