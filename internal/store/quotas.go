package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// KeyQuotas are the quotas a key was given on what its sandboxes hold on
// the host (key_quotas). A field at 0 means the server's default for a
// tenant key and no per-key bound for an administrator's key (the manager
// decides: sandbox/quota.go).
type KeyQuotas struct {
	// DiskMiB bounds, in MiB, the sum of the key's running and paused
	// sandboxes' DiskMiB plus its paused images' bytes plus its volumes'
	// sizes.
	DiskMiB int64
	// PausedSandboxes bounds the number of the key's paused sandboxes.
	PausedSandboxes int64
	// Sandboxes bounds the number of the key's starting, running and
	// paused sandboxes together.
	Sandboxes int64
}

// IsZero says no quota is set.
func (q KeyQuotas) IsZero() bool { return q == KeyQuotas{} }

// KeyLimits are what a key is created with besides its name.
type KeyLimits struct {
	// DailyLimitMicros is its spending limit in micro-dollars per UTC day
	// (0: none, an administrator's key).
	DailyLimitMicros int64
	// Quotas are its own quotas (zero fields: the server's defaults).
	Quotas KeyQuotas
}

// InsertKeyWithLimits records a new key with its daily limit and quotas in
// one transaction: a key is never created without what it was asked with.
func (s *Store) InsertKeyWithLimits(ctx context.Context, k Key, l KeyLimits) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: insert key: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO api_keys (`+keyCols+`) VALUES (?, ?, ?, ?, ?, ?)`,
		k.ID, k.Name, k.Prefix, k.Hash, millis(k.CreatedAt), nullMillis(k.RevokedAt)); err != nil {
		return fmt.Errorf("store: insert key: %w", err)
	}
	if l.DailyLimitMicros > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO key_limits (key_id, daily_limit_micros) VALUES (?, ?)`,
			k.ID, l.DailyLimitMicros); err != nil {
			return fmt.Errorf("store: insert key limit: %w", err)
		}
	}
	if !l.Quotas.IsZero() {
		if err := setKeyQuotas(ctx, tx, k.ID, l.Quotas); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: insert key: %w", err)
	}
	return nil
}

type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

func setKeyQuotas(ctx context.Context, db execer, keyID string, q KeyQuotas) error {
	var err error
	if q.IsZero() {
		_, err = db.ExecContext(ctx, `DELETE FROM key_quotas WHERE key_id = ?`, keyID)
	} else {
		_, err = db.ExecContext(ctx, `INSERT INTO key_quotas (key_id, disk_mib, paused_sandboxes, sandboxes) VALUES (?, ?, ?, ?)
			ON CONFLICT (key_id) DO UPDATE SET disk_mib = excluded.disk_mib, paused_sandboxes = excluded.paused_sandboxes, sandboxes = excluded.sandboxes`,
			keyID, q.DiskMiB, q.PausedSandboxes, q.Sandboxes)
	}
	if err != nil {
		return fmt.Errorf("store: set key quotas: %w", err)
	}
	return nil
}

// SetKeyQuotas sets a key's quotas (all zero: back to the server's defaults).
func (s *Store) SetKeyQuotas(ctx context.Context, keyID string, q KeyQuotas) error {
	return setKeyQuotas(ctx, s.db, keyID, q)
}

// GetKeyQuotas returns one key's quotas (zero when it has none of its own).
func (s *Store) GetKeyQuotas(ctx context.Context, keyID string) (KeyQuotas, error) {
	var q KeyQuotas
	err := s.db.QueryRowContext(ctx, `SELECT disk_mib, paused_sandboxes, sandboxes FROM key_quotas WHERE key_id = ?`, keyID).
		Scan(&q.DiskMiB, &q.PausedSandboxes, &q.Sandboxes)
	if errors.Is(err, sql.ErrNoRows) {
		return KeyQuotas{}, nil
	}
	if err != nil {
		return KeyQuotas{}, fmt.Errorf("store: key quotas: %w", err)
	}
	return q, nil
}

// AllKeyQuotas returns every key's own quotas (keys without any are absent).
func (s *Store) AllKeyQuotas(ctx context.Context) (map[string]KeyQuotas, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT key_id, disk_mib, paused_sandboxes, sandboxes FROM key_quotas`)
	if err != nil {
		return nil, fmt.Errorf("store: key quotas: %w", err)
	}
	defer rows.Close()
	out := map[string]KeyQuotas{}
	for rows.Next() {
		var id string
		var q KeyQuotas
		if err := rows.Scan(&id, &q.DiskMiB, &q.PausedSandboxes, &q.Sandboxes); err != nil {
			return nil, fmt.Errorf("store: key quotas: %w", err)
		}
		out[id] = q
	}
	return out, rows.Err()
}

// KeyUse is what a key's sandboxes that are not stopped hold.
type KeyUse struct {
	// Sandboxes counts its starting, running and paused sandboxes.
	Sandboxes int64
	// Paused counts its paused sandboxes.
	Paused int64
	// DiskMiB is the sum of those sandboxes' DiskMiB, in MiB.
	DiskMiB int64
	// ImageBytes is the sum of its paused sandboxes' images, in bytes.
	ImageBytes int64
	// VolumesMiB is the sum of its volumes' sizes, in MiB.
	VolumesMiB int64
	// SnapshotBytes is the sum of its snapshots' images, in bytes.
	SnapshotBytes int64
}

// QuotaDiskMiB is the use that the disk quota counts, in MiB: DiskMiB
// plus the pause images' and snapshots' bytes rounded up to whole MiB plus
// VolumesMiB.
func (u KeyUse) QuotaDiskMiB() int64 {
	return u.DiskMiB + (u.ImageBytes+u.SnapshotBytes+(1<<20)-1)>>20 + u.VolumesMiB
}

// KeyUse sums what keyID's sandboxes that are not stopped, and its
// snapshots, hold.
func (s *Store) KeyUse(ctx context.Context, keyID string) (KeyUse, error) {
	snap, err := s.snapshotBytes(ctx, keyID)
	if err != nil {
		return KeyUse{}, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT state, COUNT(*), CAST(COALESCE(SUM(disk_mib), 0) AS BIGINT), CAST(COALESCE(SUM(image_bytes), 0) AS BIGINT)
		FROM sandboxes WHERE key_id = ? AND state IN (?, ?, ?) GROUP BY state`, keyID, StateStarting, StateRunning, StatePaused)
	if err != nil {
		return KeyUse{}, fmt.Errorf("store: key use: %w", err)
	}
	defer rows.Close()
	u := KeyUse{SnapshotBytes: snap}
	for rows.Next() {
		var state string
		var n, disk, image int64
		if err := rows.Scan(&state, &n, &disk, &image); err != nil {
			return KeyUse{}, fmt.Errorf("store: key use: %w", err)
		}
		u.Sandboxes += n
		u.DiskMiB += disk
		u.ImageBytes += image
		if state == StatePaused {
			u.Paused += n
		}
	}
	if err := rows.Err(); err != nil {
		return KeyUse{}, fmt.Errorf("store: key use: %w", err)
	}
	rows.Close()
	if u.VolumesMiB, err = s.KeyVolumesMiB(ctx, keyID); err != nil {
		return KeyUse{}, err
	}
	return u, nil
}
