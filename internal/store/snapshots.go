package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Snapshot states.
const (
	// SnapshotCreating is a snapshot whose image is being written: it
	// cannot be used yet, and a server that died meanwhile removes it.
	SnapshotCreating = "creating"
	// SnapshotReady is a snapshot sandboxes can start from.
	SnapshotReady = "ready"
)

// Snapshot is the durable record of one snapshot: a sandbox saved while it
// ran on, from which new sandboxes start (sandbox/snapshot.go).
type Snapshot struct {
	ID string
	// KeyID is the key that made it; no other key sees it.
	KeyID string
	// Name is "" or unique among the key's snapshots.
	Name string
	// SourceID is the sandbox it was taken of, Template that sandbox's.
	SourceID string
	Template string
	// Mode is what it holds: "full" (memory, processes and files).
	Mode  string
	State string
	// Bytes is the image's size on the host's disk, in bytes (0 while
	// creating).
	Bytes int64
	// CPU, MemoryMiB and DiskMiB are the source's sizes.
	CPU       float64
	MemoryMiB int64
	DiskMiB   int64
	// Driver is the driver that holds the image.
	Driver    string
	CreatedAt time.Time
	// ExpiresAt, when set, is when the server's snapshot retention ends
	// it: the leader's sweep deletes it then. Nil: kept until deleted.
	ExpiresAt *time.Time
}

// SnapshotFilter selects snapshots; zero fields match everything.
type SnapshotFilter struct {
	KeyID    string
	SourceID string
	State    string
}

const snapshotCols = `id, key_id, name, source_id, template, mode, state, bytes, cpu, memory_mib, disk_mib, driver, created_at, expires_at`

// InsertSnapshot records a new snapshot. ErrDuplicate when its key has a
// snapshot of that name (or the id is taken).
func (s *Store) InsertSnapshot(ctx context.Context, sn Snapshot) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO snapshots (`+snapshotCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sn.ID, sn.KeyID, sn.Name, sn.SourceID, sn.Template, sn.Mode, sn.State, sn.Bytes, sn.CPU, sn.MemoryMiB, sn.DiskMiB,
		sn.Driver, millis(sn.CreatedAt), nullMillis(sn.ExpiresAt))
	if err != nil && s.db.d.isUniqueViolation(err) {
		return fmt.Errorf("snapshot %s: %w", sn.ID, ErrDuplicate)
	}
	if err != nil {
		return fmt.Errorf("store: insert snapshot %s: %w", sn.ID, err)
	}
	return nil
}

// MarkSnapshotReady records that snapshot id's image of bytes is complete.
// ErrNotFound when it is not creating (deleted meanwhile).
func (s *Store) MarkSnapshotReady(ctx context.Context, id string, bytes int64) error {
	res, err := s.db.ExecContext(ctx, `UPDATE snapshots SET state = ?, bytes = ? WHERE id = ? AND state = ?`,
		SnapshotReady, bytes, id, SnapshotCreating)
	if err != nil {
		return fmt.Errorf("store: snapshot %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	}
	return nil
}

// GetSnapshot returns one snapshot, or ErrNotFound.
func (s *Store) GetSnapshot(ctx context.Context, id string) (Snapshot, error) {
	return scanSnapshot(s.db.QueryRowContext(ctx, `SELECT `+snapshotCols+` FROM snapshots WHERE id = ?`, id))
}

// SnapshotByName returns key keyID's snapshot called name, or ErrNotFound.
func (s *Store) SnapshotByName(ctx context.Context, keyID, name string) (Snapshot, error) {
	if name == "" {
		return Snapshot{}, fmt.Errorf("snapshot without a name: %w", ErrNotFound)
	}
	return scanSnapshot(s.db.QueryRowContext(ctx, `SELECT `+snapshotCols+` FROM snapshots WHERE key_id = ? AND name = ?`, keyID, name))
}

// ListSnapshots returns the snapshots that match f, newest first.
func (s *Store) ListSnapshots(ctx context.Context, f SnapshotFilter) ([]Snapshot, error) {
	q := `SELECT ` + snapshotCols + ` FROM snapshots WHERE 1 = 1`
	var args []any
	if f.KeyID != "" {
		q += ` AND key_id = ?`
		args = append(args, f.KeyID)
	}
	if f.SourceID != "" {
		q += ` AND source_id = ?`
		args = append(args, f.SourceID)
	}
	if f.State != "" {
		q += ` AND state = ?`
		args = append(args, f.State)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY created_at DESC, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list snapshots: %w", err)
	}
	defer rows.Close()
	var out []Snapshot
	for rows.Next() {
		sn, err := scanSnapshot(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list snapshots: %w", err)
		}
		out = append(out, sn)
	}
	return out, rows.Err()
}

// ExpiredSnapshots returns the ready snapshots whose ExpiresAt is at or
// before now, oldest expiry first.
func (s *Store) ExpiredSnapshots(ctx context.Context, now time.Time) ([]Snapshot, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+snapshotCols+` FROM snapshots
		WHERE expires_at IS NOT NULL AND expires_at <= ? AND state = ? ORDER BY expires_at, id`, millis(now), SnapshotReady)
	if err != nil {
		return nil, fmt.Errorf("store: expired snapshots: %w", err)
	}
	defer rows.Close()
	var out []Snapshot
	for rows.Next() {
		sn, err := scanSnapshot(rows)
		if err != nil {
			return nil, fmt.Errorf("store: expired snapshots: %w", err)
		}
		out = append(out, sn)
	}
	return out, rows.Err()
}

// DeleteSnapshot removes snapshot id's record; ErrNotFound when it has none.
func (s *Store) DeleteSnapshot(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM snapshots WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("store: delete snapshot %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	}
	return nil
}

// snapshotBytes is what key keyID's snapshots take on the host's disk, in
// bytes (creating ones count 0: their admission holds their estimate).
func (s *Store) snapshotBytes(ctx context.Context, keyID string) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM snapshots WHERE key_id = ?`, keyID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: snapshot bytes: %w", err)
	}
	return n, nil
}

func scanSnapshot(r scanner) (Snapshot, error) {
	var sn Snapshot
	var created int64
	var expires sql.NullInt64
	err := r.Scan(&sn.ID, &sn.KeyID, &sn.Name, &sn.SourceID, &sn.Template, &sn.Mode, &sn.State, &sn.Bytes,
		&sn.CPU, &sn.MemoryMiB, &sn.DiskMiB, &sn.Driver, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return Snapshot{}, fmt.Errorf("snapshot: %w", ErrNotFound)
	}
	if err != nil {
		return Snapshot{}, err
	}
	sn.CreatedAt = fromMillis(created)
	sn.ExpiresAt = timePtr(expires)
	return sn, nil
}
