package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// UsageCursor is where a sandbox's next metered interval starts: the time
// of the last sample and the sandbox's cumulative CPU figures then.
type UsageCursor struct {
	SandboxID string
	LastAt    time.Time
	// LastCPU is the sandbox's cumulative host CPU seconds at LastAt.
	LastCPU float64
	// LastOverheadCPU is the part of LastCPU its isolation layer spent;
	// meaningful only when OverheadKnown.
	LastOverheadCPU float64
	OverheadKnown   bool
	// Closed is set by the final sample (at destroy): nothing more is billed.
	Closed bool
}

// CPUMark is one sample of a sandbox's cumulative CPU seconds: the host's
// total, and the part its isolation layer spent (when OverheadKnown).
type CPUMark struct {
	Host          float64
	Overhead      float64
	OverheadKnown bool
}

func (c CPUMark) overhead() sql.NullFloat64 {
	return sql.NullFloat64{Float64: c.Overhead, Valid: c.OverheadKnown}
}

// UsageInterval is one metered interval of one sandbox.
type UsageInterval struct {
	SandboxID  string
	KeyID      string
	Start, End time.Time
	// CPUSeconds is the CPU the sandbox's own processes used during the
	// interval (billed).
	CPUSeconds float64
	// OverheadCPUSeconds is the host CPU its isolation layer spent during
	// the interval (not billed; CPUSeconds + OverheadCPUSeconds is the host
	// CPU of the interval).
	OverheadCPUSeconds float64
	WallSeconds        float64 // End - Start (0 for a paused interval)
	GiBSeconds         float64 // memory size × WallSeconds
	// StorageGiBSeconds is a paused sandbox's image size × the interval,
	// in GiB-seconds (0 while it runs).
	StorageGiBSeconds float64
}

// StartUsage creates a sandbox's cursor at at with cumulative CPU mark,
// unless it has one.
func (s *Store) StartUsage(ctx context.Context, id string, at time.Time, mark CPUMark) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO usage_cursor (sandbox_id, last_at, last_cpu, last_overhead_cpu) VALUES (?, ?, ?, ?)
		ON CONFLICT (sandbox_id) DO NOTHING`,
		id, millis(at), mark.Host, mark.overhead())
	if err != nil {
		return fmt.Errorf("store: start usage %s: %w", id, err)
	}
	return nil
}

// GetUsageCursor returns a sandbox's cursor, or ErrNotFound.
func (s *Store) GetUsageCursor(ctx context.Context, id string) (UsageCursor, error) {
	var c UsageCursor
	var at int64
	var closed int
	var overhead sql.NullFloat64
	err := s.db.QueryRowContext(ctx, `SELECT sandbox_id, last_at, last_cpu, last_overhead_cpu, closed FROM usage_cursor WHERE sandbox_id = ?`, id).
		Scan(&c.SandboxID, &at, &c.LastCPU, &overhead, &closed)
	if errors.Is(err, sql.ErrNoRows) {
		return UsageCursor{}, fmt.Errorf("usage cursor %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return UsageCursor{}, fmt.Errorf("store: usage cursor %s: %w", id, err)
	}
	c.LastAt, c.Closed = fromMillis(at), closed != 0
	c.LastOverheadCPU, c.OverheadKnown = overhead.Float64, overhead.Valid
	return c, nil
}

// RecordUsage writes iv and, in the same transaction, moves the sandbox's
// cursor from iv.Start to iv.End with cumulative CPU mark (closing it if
// final). If the cursor is no longer at iv.Start (another sampler got there
// first) or is closed, nothing is written and ok is false: an interval is
// never counted twice. The check is the UPDATE's WHERE clause: on
// PostgreSQL a second writer waits for the first's row lock, re-reads the
// committed row and matches nothing, so no SELECT ... FOR UPDATE is needed.
func (s *Store) RecordUsage(ctx context.Context, iv UsageInterval, mark CPUMark, final bool) (ok bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("store: record usage: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	ok, err = recordUsageTx(ctx, tx, iv, mark, final)
	if err != nil || !ok {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("store: record usage %s: %w", iv.SandboxID, err)
	}
	return true, nil
}

// UsageRecord is one sandbox's interval for RecordUsageBatch: what
// RecordUsage takes.
type UsageRecord struct {
	Interval UsageInterval
	Mark     CPUMark
	Final    bool
}

// RecordUsageBatch writes every record as RecordUsage would, in one
// transaction (metering samples every running sandbox every few seconds:
// one transaction per sandbox cost the server most of its idle CPU with
// hundreds held). written[i] says record i was written; a record whose
// cursor moved or closed is skipped (written false) and the others are
// still written. On an error nothing is written.
func (s *Store) RecordUsageBatch(ctx context.Context, recs []UsageRecord) (written []bool, err error) {
	written = make([]bool, len(recs))
	if len(recs) == 0 {
		return written, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: record usage: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	for i, r := range recs {
		if written[i], err = recordUsageTx(ctx, tx, r.Interval, r.Mark, r.Final); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: record usage of %d sandboxes: %w", len(recs), err)
	}
	return written, nil
}

// recordUsageTx is RecordUsage's work in transaction tx; ok false when the
// cursor was not at iv.Start or is closed (nothing written).
func recordUsageTx(ctx context.Context, tx *tx, iv UsageInterval, mark CPUMark, final bool) (ok bool, err error) {
	closed := 0
	if final {
		closed = 1
	}
	res, err := tx.ExecContext(ctx, `UPDATE usage_cursor SET last_at = ?, last_cpu = ?, last_overhead_cpu = ?, closed = ?
		WHERE sandbox_id = ? AND last_at = ? AND closed = 0`,
		millis(iv.End), mark.Host, mark.overhead(), closed, iv.SandboxID, millis(iv.Start))
	if err != nil {
		return false, fmt.Errorf("store: record usage %s: %w", iv.SandboxID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	if iv.End.After(iv.Start) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO usage_intervals
			(sandbox_id, key_id, start_at, end_at, cpu_seconds, overhead_cpu_seconds, wall_seconds, gib_seconds, storage_gib_seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			iv.SandboxID, iv.KeyID, millis(iv.Start), millis(iv.End), iv.CPUSeconds, iv.OverheadCPUSeconds, iv.WallSeconds, iv.GiBSeconds, iv.StorageGiBSeconds); err != nil {
			return false, fmt.Errorf("store: record usage %s: %w", iv.SandboxID, err)
		}
	}
	return true, nil
}

// maxIDsPerQuery bounds the ids of one IN (...) list (SQLite allows 32,766
// parameters, PostgreSQL 65,535).
const maxIDsPerQuery = 500

// inList returns "?, ?, ..." for n parameters.
func inList(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// GetUsageCursors returns the cursors of those of ids that have one, by
// sandbox id, in one query per 500 ids.
func (s *Store) GetUsageCursors(ctx context.Context, ids []string) (map[string]UsageCursor, error) {
	out := make(map[string]UsageCursor, len(ids))
	err := s.queryIDs(ctx, `SELECT sandbox_id, last_at, last_cpu, last_overhead_cpu, closed FROM usage_cursor WHERE sandbox_id IN `, ids,
		func(rows *sql.Rows) error {
			var c UsageCursor
			var at int64
			var closed int
			var overhead sql.NullFloat64
			if err := rows.Scan(&c.SandboxID, &at, &c.LastCPU, &overhead, &closed); err != nil {
				return err
			}
			c.LastAt, c.Closed = fromMillis(at), closed != 0
			c.LastOverheadCPU, c.OverheadKnown = overhead.Float64, overhead.Valid
			out[c.SandboxID] = c
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("store: usage cursors: %w", err)
	}
	return out, nil
}

// queryIDs runs query, which ends in "IN ", with the list of ids appended,
// in one query per maxIDsPerQuery ids, and calls scan for every row.
func (s *Store) queryIDs(ctx context.Context, query string, ids []string, scan func(*sql.Rows) error) error {
	for len(ids) > 0 {
		part := ids[:min(len(ids), maxIDsPerQuery)]
		ids = ids[len(part):]
		args := make([]any, len(part))
		for i, id := range part {
			args[i] = id
		}
		rows, err := s.db.QueryContext(ctx, query+"("+inList(len(part))+")", args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			if err := scan(rows); err != nil {
				rows.Close()
				return err
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// UsageFilter selects metered intervals by their end time: From < end <= To.
// Zero fields match everything.
type UsageFilter struct {
	From, To   time.Time
	KeyID      string
	SandboxIDs []string
}

// UsageSum is the usage of one sandbox (on one UTC day when asked by day).
type UsageSum struct {
	SandboxID  string
	KeyID      string
	Day        string  // YYYY-MM-DD (UTC) of the intervals' ends; empty unless byDay
	CPUSeconds float64 // the sandboxes' own processes (billed)
	// OverheadCPUSeconds is the host CPU their isolation layer spent.
	OverheadCPUSeconds float64
	WallSeconds        float64
	GiBSeconds         float64
	// StorageGiBSeconds is paused sandboxes' image size × time paused.
	StorageGiBSeconds float64
}

// SumUsage adds up the intervals that f selects per sandbox (and per UTC
// day of their end, if byDay).
func (s *Store) SumUsage(ctx context.Context, f UsageFilter, byDay bool) ([]UsageSum, error) {
	day := `''`
	if byDay {
		day = s.db.d.utcDay(`end_at - 1`) // (from, to]: an end at midnight is the day before
	}
	q := `SELECT sandbox_id, key_id, ` + day + ` AS day, SUM(cpu_seconds), SUM(overhead_cpu_seconds), SUM(wall_seconds), SUM(gib_seconds), SUM(storage_gib_seconds)
		FROM usage_intervals WHERE 1=1`
	var args []any
	if !f.From.IsZero() {
		q += ` AND end_at > ?`
		args = append(args, millis(f.From))
	}
	if !f.To.IsZero() {
		q += ` AND end_at <= ?`
		args = append(args, millis(f.To))
	}
	if f.KeyID != "" {
		q += ` AND key_id = ?`
		args = append(args, f.KeyID)
	}
	if len(f.SandboxIDs) > 0 {
		q += ` AND sandbox_id IN (?` + strings.Repeat(`, ?`, len(f.SandboxIDs)-1) + `)`
		for _, id := range f.SandboxIDs {
			args = append(args, id)
		}
	}
	q += ` GROUP BY sandbox_id, key_id, day ORDER BY day, sandbox_id`
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: sum usage: %w", err)
	}
	defer rows.Close()
	var out []UsageSum
	for rows.Next() {
		var u UsageSum
		if err := rows.Scan(&u.SandboxID, &u.KeyID, &u.Day, &u.CPUSeconds, &u.OverheadCPUSeconds, &u.WallSeconds, &u.GiBSeconds, &u.StorageGiBSeconds); err != nil {
			return nil, fmt.Errorf("store: sum usage: %w", err)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// SetKeyDailyLimit sets a key's spending limit in micro-dollars per UTC
// day; 0 removes it.
func (s *Store) SetKeyDailyLimit(ctx context.Context, keyID string, micros int64) error {
	var err error
	if micros <= 0 {
		_, err = s.db.ExecContext(ctx, `DELETE FROM key_limits WHERE key_id = ?`, keyID)
	} else {
		_, err = s.db.ExecContext(ctx, `INSERT INTO key_limits (key_id, daily_limit_micros) VALUES (?, ?)
			ON CONFLICT (key_id) DO UPDATE SET daily_limit_micros = excluded.daily_limit_micros`, keyID, micros)
	}
	if err != nil {
		return fmt.Errorf("store: key %s daily limit: %w", keyID, err)
	}
	return nil
}

// KeyDailyLimit returns one key's daily limit in micro-dollars (0: none).
func (s *Store) KeyDailyLimit(ctx context.Context, keyID string) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT daily_limit_micros FROM key_limits WHERE key_id = ?`, keyID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: key %s daily limit: %w", keyID, err)
	}
	return n, nil
}

// KeyDailyLimits returns every key's daily limit (keys without one are absent).
func (s *Store) KeyDailyLimits(ctx context.Context) (map[string]int64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT key_id, daily_limit_micros FROM key_limits`)
	if err != nil {
		return nil, fmt.Errorf("store: key limits: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("store: key limits: %w", err)
		}
		out[id] = n
	}
	return out, rows.Err()
}
