package models

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// The channel's keys (docs/DESIGN.md §14, "The channel"): every notice
// the instances send each other on PostgreSQL's NOTIFY channel is sealed
// with a key only herd's role can read. Any role that can connect may
// LISTEN and NOTIFY on any channel, so the key, not the channel, is what
// keeps other logins from reading users' streamed text and from forging
// notices. The table is herd's alone: the migration revokes it from
// PUBLIC, and nothing grants it (docs/OPERATIONS.md, PostgreSQL).

// ChannelKeyLen is the length of a channel key: AES-256.
const ChannelKeyLen = 32

// ChannelKey is one key of the channel. Instances seal with the newest
// key old enough for every instance to have read it, and open with any
// key in the table, so a new key can be added and the old one removed
// while they run.
type ChannelKey struct {
	ID  int
	Key []byte
	// Age is how long the key has been in the table, by the database's
	// clock.
	Age time.Duration
}

// ChannelKeys are the channel's keys and the database's clock when they
// were read.
type ChannelKeys struct {
	Keys []ChannelKey
	Now  time.Time
}

// createChannelKey creates the key table and its first key unless it has
// one. It runs in the migration's transaction, under its lock, so herds
// starting together agree on one key.
func createChannelKey(tx *gorm.DB) error {
	key := make([]byte, ChannelKeyLen)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("channel key: %w", err)
	}
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS channel_keys (
			id integer PRIMARY KEY CHECK (id BETWEEN 1 AND 65535),
			key bytea NOT NULL CHECK (octet_length(key) = 32),
			created_at timestamptz NOT NULL DEFAULT clock_timestamp())`,
		// Default privileges an administrator set for new tables would
		// otherwise reach it.
		`REVOKE ALL ON channel_keys FROM PUBLIC`,
	} {
		if err := tx.Exec(q).Error; err != nil {
			return fmt.Errorf("channel key: %w", err)
		}
	}
	if err := tx.Exec("INSERT INTO channel_keys (id, key) SELECT 1, ? WHERE NOT EXISTS (SELECT FROM channel_keys)", key).Error; err != nil {
		return fmt.Errorf("channel key: %w", err)
	}
	return nil
}

// ChannelKeys reads the channel's keys, oldest first.
func (s *Store) ChannelKeys(ctx context.Context) (ChannelKeys, error) {
	if !s.pg {
		return ChannelKeys{}, errInstancesSQLite
	}
	rows, err := s.direct(ctx).Raw("SELECT id, key, extract(epoch FROM clock_timestamp() - created_at)::float8, clock_timestamp() FROM channel_keys ORDER BY id").Rows()
	if err != nil {
		return ChannelKeys{}, fmt.Errorf("store: read the channel keys: %w", err)
	}
	defer rows.Close()
	var out ChannelKeys
	for rows.Next() {
		var (
			k   ChannelKey
			age float64
		)
		if err := rows.Scan(&k.ID, &k.Key, &age, &out.Now); err != nil {
			return ChannelKeys{}, fmt.Errorf("store: read the channel keys: %w", err)
		}
		k.Age = time.Duration(age * float64(time.Second))
		out.Keys = append(out.Keys, k)
	}
	if err := rows.Err(); err != nil {
		return ChannelKeys{}, fmt.Errorf("store: read the channel keys: %w", err)
	}
	if len(out.Keys) == 0 {
		return ChannelKeys{}, fmt.Errorf("store: the channel_keys table is empty: restart one herd to create a key, or add one (docs/OPERATIONS.md, Several instances): %w", ErrNotFound)
	}
	return out, nil
}

// ChannelKeyReaders names the roles other than this one and superusers
// that can log in and read the channel's keys: each could read and forge
// the instances' notices.
func (s *Store) ChannelKeyReaders(ctx context.Context) ([]string, error) {
	if !s.pg {
		return nil, errInstancesSQLite
	}
	var names []string
	err := s.direct(ctx).Raw(`SELECT rolname FROM pg_roles
		WHERE rolcanlogin AND NOT rolsuper AND rolname <> current_user
		AND has_table_privilege(oid, 'channel_keys', 'SELECT') ORDER BY rolname`).Scan(&names).Error
	if err != nil {
		return nil, fmt.Errorf("store: who can read the channel keys: %w", err)
	}
	return names, nil
}
