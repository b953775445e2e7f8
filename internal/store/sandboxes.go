package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"time"
)

// Sandbox states.
const (
	StateStarting = "starting"
	StateRunning  = "running"
	// StatePaused is a sandbox saved whole to the host's disk: nothing of
	// it runs until it is resumed (back to StateRunning).
	StatePaused  = "paused"
	StateStopped = "stopped"
)

// What a lease end does (Sandbox.OnLeaseEnd).
const (
	OnLeaseEndStop  = "stop"
	OnLeaseEndPause = "pause"
)

// What a pause saves (Sandbox.PauseMode, Sandbox.LeasePauseMode).
const (
	// PauseFull saves memory, processes and files; the resume continues
	// where the sandbox was.
	PauseFull = "full"
	// PauseFilesystem saves the writable root layer alone; the resume boots
	// the sandbox fresh with those files (no process comes back).
	PauseFilesystem = "filesystem"
)

// Sandbox is the durable record of one sandbox.
type Sandbox struct {
	ID          string
	KeyID       string
	Template    string
	State       string
	CPU         float64
	MemoryMiB   int64
	DiskMiB     int64
	Env         map[string]string
	Metadata    map[string]string
	CreatedAt   time.Time
	LeaseEndsAt time.Time
	EndedAt     *time.Time
	// EndReason says why a stopped sandbox stopped: "deleted",
	// "lease_ended", "failed", "out_of_memory" (see sandbox.End*).
	EndReason   string
	Driver      string
	DriverState []byte
	// OnLeaseEnd is what the lease end does: OnLeaseEndStop or
	// OnLeaseEndPause.
	OnLeaseEnd string
	// AutoResume says a request to the sandbox while it is paused resumes
	// it first.
	AutoResume bool
	// TimeoutSeconds is the lease the sandbox was last given (at create or
	// set-timeout), which a resume gives again; 0 for records from before
	// pauses (the server's default then).
	TimeoutSeconds int64
	// PausedAt is when the sandbox was paused (set only while paused).
	PausedAt *time.Time
	// ImageBytes is the size of a paused sandbox's image on the host.
	ImageBytes int64
	// PauseMode is what the sandbox's pause saved (PauseFull or
	// PauseFilesystem); meaningful while it is paused.
	PauseMode string
	// LeasePauseMode is the mode of the pause its lease end does when
	// OnLeaseEnd is OnLeaseEndPause (PauseFull or PauseFilesystem).
	LeasePauseMode string
	// Volumes are the volumes it mounts: written by InsertSandbox (with
	// Name for messages), not read back by GetSandbox (SandboxVolumes).
	Volumes []SandboxVolume
}

// SandboxFilter selects sandboxes; zero fields match everything.
type SandboxFilter struct {
	State    string
	KeyID    string
	Metadata map[string]string
}

const sandboxCols = `id, key_id, template, state, cpu, memory_mib, disk_mib, env, metadata,
	created_at, lease_ends_at, ended_at, end_reason, driver, driver_state,
	on_lease_end, auto_resume, timeout_seconds, paused_at, image_bytes, pause_mode, lease_pause_mode`

// InsertSandbox records a new sandbox, and the volumes it mounts in the
// same transaction: each must be ready and of the sandbox's key, else
// nothing is written and the error wraps ErrVolumeGone.
func (s *Store) InsertSandbox(ctx context.Context, sb Sandbox) error {
	if len(sb.Volumes) == 0 {
		return insertSandbox(ctx, s.db, sb)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: insert sandbox %s: %w", sb.ID, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	// The volumes first: their rows' locks are what a volume's delete
	// waits for (StartDeleteVolume).
	if err := insertSandboxVolumes(ctx, tx, sb); err != nil {
		return fmt.Errorf("store: insert sandbox %s: %w", sb.ID, err)
	}
	if err := insertSandbox(ctx, tx, sb); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: insert sandbox %s: %w", sb.ID, err)
	}
	return nil
}

func insertSandbox(ctx context.Context, db execer, sb Sandbox) error {
	env, _ := json.Marshal(orEmpty(sb.Env))
	meta, _ := json.Marshal(orEmpty(sb.Metadata))
	_, err := db.ExecContext(ctx, `INSERT INTO sandboxes (`+sandboxCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sb.ID, sb.KeyID, sb.Template, sb.State, sb.CPU, sb.MemoryMiB, sb.DiskMiB, string(env), string(meta),
		millis(sb.CreatedAt), millis(sb.LeaseEndsAt), nullMillis(sb.EndedAt), sb.EndReason, sb.Driver, sb.DriverState,
		onLeaseEnd(sb.OnLeaseEnd), sb.AutoResume, sb.TimeoutSeconds, nullMillis(sb.PausedAt), sb.ImageBytes,
		pauseMode(sb.PauseMode), pauseMode(sb.LeasePauseMode))
	if err != nil {
		return fmt.Errorf("store: insert sandbox %s: %w", sb.ID, err)
	}
	return nil
}

// MarkRunning records that a sandbox booted, with the driver's state.
func (s *Store) MarkRunning(ctx context.Context, id string, driverState []byte) error {
	return s.exec(ctx, id, `UPDATE sandboxes SET state = ?, driver_state = ? WHERE id = ? AND state = ?`,
		StateRunning, driverState, id, StateStarting)
}

// MarkStopped records that a sandbox ended, and why. Stopping a stopped
// sandbox keeps its first reason.
func (s *Store) MarkStopped(ctx context.Context, id, reason string, at time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE sandboxes SET state = ?, end_reason = ?, ended_at = ?
		WHERE id = ? AND state != ?`, StateStopped, reason, millis(at), id, StateStopped)
	if err != nil {
		return fmt.Errorf("store: stop sandbox %s: %w", id, err)
	}
	return nil
}

// MarkPaused records that a running sandbox was saved and stopped, at at,
// with an image of imageBytes saved in mode (PauseFull or PauseFilesystem;
// "" is PauseFull). ErrNotFound when it is not running (stopped meanwhile).
func (s *Store) MarkPaused(ctx context.Context, id string, at time.Time, imageBytes int64, mode string) error {
	return s.exec(ctx, id, `UPDATE sandboxes SET state = ?, paused_at = ?, image_bytes = ?, pause_mode = ? WHERE id = ? AND state = ?`,
		StatePaused, millis(at), imageBytes, pauseMode(mode), id, StateRunning)
}

// SetLeasePauseMode records the mode of the pause a sandbox's lease end
// does (PauseFull or PauseFilesystem; "" is PauseFull).
func (s *Store) SetLeasePauseMode(ctx context.Context, id, mode string) error {
	return s.exec(ctx, id, `UPDATE sandboxes SET lease_pause_mode = ? WHERE id = ? AND state != ?`,
		pauseMode(mode), id, StateStopped)
}

func pauseMode(s string) string {
	if s == "" {
		return PauseFull
	}
	return s
}

// MarkResumed records that a paused sandbox runs again, with a new lease
// end and driver state, and moves its usage cursor's CPU figures to mark
// (the new sandbox process's counters), in one transaction. ErrNotFound
// when it is not paused.
func (s *Store) MarkResumed(ctx context.Context, id string, leaseEnd time.Time, driverState []byte, mark CPUMark) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: resume %s: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	res, err := tx.ExecContext(ctx, `UPDATE sandboxes SET state = ?, lease_ends_at = ?, driver_state = ?, paused_at = NULL, image_bytes = 0
		WHERE id = ? AND state = ?`, StateRunning, millis(leaseEnd), driverState, id, StatePaused)
	if err != nil {
		return fmt.Errorf("store: resume %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sandbox %s: %w", id, ErrNotFound)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE usage_cursor SET last_cpu = ?, last_overhead_cpu = ? WHERE sandbox_id = ? AND closed = 0`,
		mark.Host, mark.overhead(), id); err != nil {
		return fmt.Errorf("store: resume %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: resume %s: %w", id, err)
	}
	return nil
}

// SetLeasePolicy records what a sandbox's lease end does, whether requests
// resume it while paused, and the lease it was last given (seconds; 0 keeps
// the one recorded).
func (s *Store) SetLeasePolicy(ctx context.Context, id, onEnd string, autoResume bool, timeoutSeconds int64) error {
	return s.exec(ctx, id, `UPDATE sandboxes SET on_lease_end = ?, auto_resume = ?,
		timeout_seconds = CASE WHEN ? > 0 THEN ? ELSE timeout_seconds END WHERE id = ? AND state != ?`,
		onLeaseEnd(onEnd), autoResume, timeoutSeconds, timeoutSeconds, id, StateStopped)
}

func onLeaseEnd(s string) string {
	if s == "" {
		return OnLeaseEndStop
	}
	return s
}

// SetLeaseEnd moves a running sandbox's lease end.
func (s *Store) SetLeaseEnd(ctx context.Context, id string, end time.Time) error {
	return s.exec(ctx, id, `UPDATE sandboxes SET lease_ends_at = ? WHERE id = ? AND state != ?`,
		millis(end), id, StateStopped)
}

// GetSandbox returns one sandbox or ErrNotFound.
func (s *Store) GetSandbox(ctx context.Context, id string) (Sandbox, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+sandboxCols+` FROM sandboxes WHERE id = ?`, id)
	sb, err := scanSandbox(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Sandbox{}, fmt.Errorf("sandbox %s: %w", id, ErrNotFound)
	}
	return sb, err
}

// GetSandboxes returns the records of those of ids that exist, by id, in
// one query per 500 ids.
func (s *Store) GetSandboxes(ctx context.Context, ids []string) (map[string]Sandbox, error) {
	out := make(map[string]Sandbox, len(ids))
	err := s.queryIDs(ctx, `SELECT `+sandboxCols+` FROM sandboxes WHERE id IN `, ids, func(rows *sql.Rows) error {
		sb, err := scanSandbox(rows)
		if err == nil {
			out[sb.ID] = sb
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: get sandboxes: %w", err)
	}
	return out, nil
}

// ListSandboxes returns the sandboxes that match f, newest first.
func (s *Store) ListSandboxes(ctx context.Context, f SandboxFilter) ([]Sandbox, error) {
	q := `SELECT ` + sandboxCols + ` FROM sandboxes WHERE 1=1`
	var args []any
	if f.State != "" {
		q += ` AND state = ?`
		args = append(args, f.State)
	}
	if f.KeyID != "" {
		q += ` AND key_id = ?`
		args = append(args, f.KeyID)
	}
	keys := make([]string, 0, len(f.Metadata))
	for k := range f.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		expr, arg := s.db.d.jsonField("metadata", k)
		q += ` AND ` + expr + ` = ?`
		args = append(args, arg, f.Metadata[k])
	}
	q += ` ORDER BY created_at DESC, id`
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list sandboxes: %w", err)
	}
	defer rows.Close()
	var out []Sandbox
	for rows.Next() {
		sb, err := scanSandbox(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sb)
	}
	return out, rows.Err()
}

type scanner interface{ Scan(dest ...any) error }

func scanSandbox(r scanner) (Sandbox, error) {
	var sb Sandbox
	var env, meta string
	var created, lease int64
	var ended, paused sql.NullInt64
	err := r.Scan(&sb.ID, &sb.KeyID, &sb.Template, &sb.State, &sb.CPU, &sb.MemoryMiB, &sb.DiskMiB, &env, &meta,
		&created, &lease, &ended, &sb.EndReason, &sb.Driver, &sb.DriverState,
		&sb.OnLeaseEnd, &sb.AutoResume, &sb.TimeoutSeconds, &paused, &sb.ImageBytes, &sb.PauseMode, &sb.LeasePauseMode)
	if err != nil {
		return Sandbox{}, err
	}
	_ = json.Unmarshal([]byte(env), &sb.Env)
	_ = json.Unmarshal([]byte(meta), &sb.Metadata)
	sb.CreatedAt, sb.LeaseEndsAt, sb.EndedAt = fromMillis(created), fromMillis(lease), timePtr(ended)
	sb.PausedAt = timePtr(paused)
	return sb, nil
}

// exec runs an update that must touch exactly the row id.
func (s *Store) exec(ctx context.Context, id, q string, args ...any) error {
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("store: sandbox %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sandbox %s: %w", id, ErrNotFound)
	}
	return nil
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // the embedded directory is fixed at build time
	}
	return sub
}
