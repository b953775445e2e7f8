package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"
)

// Sandbox states.
const (
	StateStarting = "starting"
	StateRunning  = "running"
	StateStopped  = "stopped"
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
}

// SandboxFilter selects sandboxes; zero fields match everything.
type SandboxFilter struct {
	State    string
	KeyID    string
	Metadata map[string]string
}

const sandboxCols = `id, key_id, template, state, cpu, memory_mib, disk_mib, env, metadata,
	created_at, lease_ends_at, ended_at, end_reason, driver, driver_state`

// InsertSandbox records a new sandbox.
func (s *Store) InsertSandbox(ctx context.Context, sb Sandbox) error {
	env, _ := json.Marshal(orEmpty(sb.Env))
	meta, _ := json.Marshal(orEmpty(sb.Metadata))
	_, err := s.db.ExecContext(ctx, `INSERT INTO sandboxes (`+sandboxCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sb.ID, sb.KeyID, sb.Template, sb.State, sb.CPU, sb.MemoryMiB, sb.DiskMiB, string(env), string(meta),
		millis(sb.CreatedAt), millis(sb.LeaseEndsAt), nullMillis(sb.EndedAt), sb.EndReason, sb.Driver, sb.DriverState)
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
		q += ` AND json_extract(metadata, ?) = ?`
		args = append(args, `$."`+strings.ReplaceAll(k, `"`, `\"`)+`"`, f.Metadata[k])
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
	var ended sql.NullInt64
	err := r.Scan(&sb.ID, &sb.KeyID, &sb.Template, &sb.State, &sb.CPU, &sb.MemoryMiB, &sb.DiskMiB, &env, &meta,
		&created, &lease, &ended, &sb.EndReason, &sb.Driver, &sb.DriverState)
	if err != nil {
		return Sandbox{}, err
	}
	_ = json.Unmarshal([]byte(env), &sb.Env)
	_ = json.Unmarshal([]byte(meta), &sb.Metadata)
	sb.CreatedAt, sb.LeaseEndsAt, sb.EndedAt = fromMillis(created), fromMillis(lease), timePtr(ended)
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
