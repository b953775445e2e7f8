package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Volume states.
const (
	// VolumeCreating: the driver is making it; not usable yet.
	VolumeCreating = "creating"
	// VolumeReady: usable.
	VolumeReady = "ready"
	// VolumeDeleting: the driver is removing it; no sandbox may mount it.
	VolumeDeleting = "deleting"
)

// ErrNameTaken says a key already has a volume of that name.
var ErrNameTaken = errors.New("name taken")

// ErrVolumeGone says a volume a create names is no longer ready (deleted
// meanwhile).
var ErrVolumeGone = errors.New("volume not ready")

// Volume is the durable record of one volume.
type Volume struct {
	ID    string
	KeyID string
	// Name is the key's name for it, unique among the key's volumes.
	Name string
	// SizeMiB is its size in MiB: what its files may take at most.
	SizeMiB   int64
	State     string
	CreatedAt time.Time
	// Driver is the driver that keeps it ("gvisor").
	Driver string
}

// SandboxVolume is one volume a sandbox mounts.
type SandboxVolume struct {
	SandboxID string
	VolumeID  string
	// Name is the volume's name (filled in by the reads, not written).
	Name     string
	Path     string
	ReadOnly bool
}

const volumeCols = `id, key_id, name, size_mib, state, created_at, driver`

func scanVolume(r scanner) (Volume, error) {
	var v Volume
	var created int64
	if err := r.Scan(&v.ID, &v.KeyID, &v.Name, &v.SizeMiB, &v.State, &created, &v.Driver); err != nil {
		return Volume{}, err
	}
	v.CreatedAt = fromMillis(created)
	return v, nil
}

// InsertVolume records a new volume (in state VolumeCreating).
// ErrNameTaken (wrapped) when its key has a volume of that name.
func (s *Store) InsertVolume(ctx context.Context, v Volume) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO volumes (`+volumeCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		v.ID, v.KeyID, v.Name, v.SizeMiB, v.State, millis(v.CreatedAt), v.Driver)
	if err != nil && s.db.d.isUniqueViolation(err) {
		return fmt.Errorf("volume %q: %w", v.Name, ErrNameTaken)
	}
	if err != nil {
		return fmt.Errorf("store: insert volume %s: %w", v.ID, err)
	}
	return nil
}

// MarkVolumeReady records that the driver made volume id.
func (s *Store) MarkVolumeReady(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE volumes SET state = ? WHERE id = ? AND state = ?`, VolumeReady, id, VolumeCreating)
	if err != nil {
		return fmt.Errorf("store: volume %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("volume %s: %w", id, ErrNotFound)
	}
	return nil
}

// GetVolume returns one volume by id, or ErrNotFound.
func (s *Store) GetVolume(ctx context.Context, id string) (Volume, error) {
	v, err := scanVolume(s.db.QueryRowContext(ctx, `SELECT `+volumeCols+` FROM volumes WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Volume{}, fmt.Errorf("volume %s: %w", id, ErrNotFound)
	}
	return v, err
}

// GetVolumeByName returns key keyID's volume called name, or ErrNotFound.
func (s *Store) GetVolumeByName(ctx context.Context, keyID, name string) (Volume, error) {
	v, err := scanVolume(s.db.QueryRowContext(ctx, `SELECT `+volumeCols+` FROM volumes WHERE key_id = ? AND name = ?`, keyID, name))
	if errors.Is(err, sql.ErrNoRows) {
		return Volume{}, fmt.Errorf("volume %q: %w", name, ErrNotFound)
	}
	return v, err
}

// ListVolumes returns key keyID's volumes ("": every key's), by name.
func (s *Store) ListVolumes(ctx context.Context, keyID string) ([]Volume, error) {
	q, args := `SELECT `+volumeCols+` FROM volumes`, []any{}
	if keyID != "" {
		q, args = q+` WHERE key_id = ?`, append(args, keyID)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY name, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list volumes: %w", err)
	}
	defer rows.Close()
	var out []Volume
	for rows.Next() {
		v, err := scanVolume(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list volumes: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// activeStates are the sandbox states in which a sandbox holds its volumes.
var activeStates = []any{StateStarting, StateRunning, StatePaused}

// mountersTx lists the sandboxes that are not stopped and mount volume id.
func mountersTx(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, id string) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT sv.sandbox_id FROM sandbox_volumes sv JOIN sandboxes sb ON sb.id = sv.sandbox_id
		WHERE sv.volume_id = ? AND sb.state IN (?, ?, ?) ORDER BY sv.sandbox_id`, append([]any{id}, activeStates...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var sid string
		if err := rows.Scan(&sid); err != nil {
			return nil, err
		}
		ids = append(ids, sid)
	}
	return ids, rows.Err()
}

// VolumeMounters returns the sandboxes that are not stopped and mount
// volume id, by id.
func (s *Store) VolumeMounters(ctx context.Context, id string) ([]string, error) {
	ids, err := mountersTx(ctx, s.db, id)
	if err != nil {
		return nil, fmt.Errorf("store: volume %s: %w", id, err)
	}
	return ids, nil
}

// StartDeleteVolume moves ready volume id to VolumeDeleting unless a
// sandbox that is not stopped mounts it: then nothing changes and mounters
// names those sandboxes. ErrNotFound when it is not ready. One transaction
// that writes first (SQLite: takes the writer's lock; PostgreSQL: the
// volume's row lock, which a create mounting it takes too), so a create
// that mounts the volume either commits before (and is named) or finds it
// deleting.
func (s *Store) StartDeleteVolume(ctx context.Context, id string) (mounters []string, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: delete volume %s: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	res, err := tx.ExecContext(ctx, `UPDATE volumes SET state = ? WHERE id = ? AND state = ?`, VolumeDeleting, id, VolumeReady)
	if err != nil {
		return nil, fmt.Errorf("store: delete volume %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, fmt.Errorf("volume %s: %w", id, ErrNotFound)
	}
	if mounters, err = mountersTx(ctx, tx, id); err != nil {
		return nil, fmt.Errorf("store: delete volume %s: %w", id, err)
	}
	if len(mounters) > 0 {
		return mounters, nil // rolled back: still ready
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: delete volume %s: %w", id, err)
	}
	return nil, nil
}

// DeleteVolumeRecord removes volume id's record and its sandboxes' mount
// rows (the driver removed its files).
func (s *Store) DeleteVolumeRecord(ctx context.Context, id string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: delete volume %s: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.ExecContext(ctx, `DELETE FROM volumes WHERE id = ?`, id); err != nil {
		return fmt.Errorf("store: delete volume %s: %w", id, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM sandbox_volumes WHERE volume_id = ?`, id); err != nil {
		return fmt.Errorf("store: delete volume %s: %w", id, err)
	}
	return tx.Commit()
}

// insertSandboxVolumes locks each of sb's volumes (it must be ready and
// its key's) and records the mounts, inside tx.
func insertSandboxVolumes(ctx context.Context, tx *tx, sb Sandbox) error {
	for _, v := range sb.Volumes {
		res, err := tx.ExecContext(ctx, `UPDATE volumes SET state = state WHERE id = ? AND key_id = ? AND state = ?`,
			v.VolumeID, sb.KeyID, VolumeReady)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("volume %q: %w", v.Name, ErrVolumeGone)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sandbox_volumes (sandbox_id, volume_id, path, read_only) VALUES (?, ?, ?, ?)`,
			sb.ID, v.VolumeID, v.Path, v.ReadOnly); err != nil {
			return err
		}
	}
	return nil
}

// SandboxVolumes returns the volumes each of the sandboxes ids mounts, by
// sandbox id, each list by path.
func (s *Store) SandboxVolumes(ctx context.Context, ids []string) (map[string][]SandboxVolume, error) {
	out := map[string][]SandboxVolume{}
	err := s.queryIDs(ctx, `SELECT sv.sandbox_id, sv.volume_id, COALESCE(v.name, ''), sv.path, sv.read_only
		FROM sandbox_volumes sv LEFT JOIN volumes v ON v.id = sv.volume_id WHERE sv.sandbox_id IN `, ids, func(rows *sql.Rows) error {
		var m SandboxVolume
		if err := rows.Scan(&m.SandboxID, &m.VolumeID, &m.Name, &m.Path, &m.ReadOnly); err != nil {
			return err
		}
		out[m.SandboxID] = append(out[m.SandboxID], m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: sandbox volumes: %w", err)
	}
	for _, l := range out {
		slices.SortFunc(l, func(a, b SandboxVolume) int { return strings.Compare(a.Path, b.Path) })
	}
	return out, nil
}

// KeyVolumesMiB sums the sizes of key keyID's volumes (every state: one
// being made or removed still holds its disk), in MiB.
func (s *Store) KeyVolumesMiB(ctx context.Context, keyID string) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT CAST(COALESCE(SUM(size_mib), 0) AS BIGINT) FROM volumes WHERE key_id = ?`, keyID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: key volumes: %w", err)
	}
	return n, nil
}
