package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Usage compaction. Metering writes one usage_intervals row per sandbox
// every few seconds (720 an hour each); once an interval is old enough that
// nobody needs it at that detail, CompactUsage merges it with the others of
// its sandbox, key and UTC hour. Every reader filters and groups by the end
// time (From < end_at <= To, the UTC day of end_at - 1) and sums the
// *_seconds columns, so a merged row that keeps its group's latest end and
// the sums of its figures answers every question asked on whole UTC hours
// exactly as the rows it replaced did.

// hourMillis is the compaction bucket: an interval belongs to the UTC hour
// that holds end_at - 1 ms, the hour of (From, To] windows with whole-hour
// bounds (an interval ending at 13:00:00.000 is 12:00's, as SumUsage puts
// one ending at midnight on the day before).
const hourMillis = int64(time.Hour / time.Millisecond)

// compactSpan bounds one CompactUsage call: it merges the intervals ending
// in at most this much time (the oldest not yet compacted), so a database
// whose compaction was neglected for weeks is worked through in many short
// transactions instead of one that holds SQLite's single write lock (and
// delays metering's writes, which wait up to the 10 s busy timeout) for
// minutes. 5 minutes of a 5-second sampler is 60 rows per sandbox: 60,000
// with 1,000 sandboxes, about 2 s of SQLite on a busy 2-core machine
// (54,000 rows took 1.8-2.2 s). A caller catching up calls again until
// merged is 0.
const compactSpan = 5 * time.Minute

// usageBucket is the SQL expression of an interval's compaction bucket
// (integer division in both SQLite and PostgreSQL: end_at is an integer).
const usageBucket = `(end_at - 1) / 3600000` // hourMillis

// CompactUsage merges the usage intervals that end at or before before:
// those of one sandbox and key whose ends fall in the same UTC hour (end_at
// - 1 ms; see hourMillis) become one row that starts at the earliest start,
// ends at the latest end and holds the sum of each *_seconds figure. The
// merged row keeps the earliest row's primary key (sandbox_id, start_at),
// so the metering that goes on writing later intervals never collides with
// it. Sums by SumUsage (per sandbox, key and UTC day) and KeyWallSeconds
// over windows with whole-hour bounds are unchanged, up to floating-point
// rounding; a window bounded inside an hour older than before may count
// that hour's merged usage on one side only.
//
// One call is one transaction that merges the intervals of at most
// compactSpan, the oldest not yet compacted (a watermark in
// usage_compaction, so history already compacted is not read again);
// merged is the number of rows it removed, and 0 means nothing is left to
// merge up to before. Intervals written later with an end at or before a
// compaction's before stay as they are, still counted (metering writes an
// interval's end at the time it samples, so with before an hour ago that
// does not happen). Two calls at once (two servers on one PostgreSQL) run
// one after the other. An error is the database's, wrapped; the
// transaction is then rolled back and nothing has changed.
func (s *Store) CompactUsage(ctx context.Context, before time.Time) (merged int64, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: compact usage: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	// A write first: it takes SQLite's write lock before anything is read
	// (a read first would make the later writes fail with SQLITE_BUSY if
	// metering committed in between) and PostgreSQL's row lock that makes
	// a second compaction wait for this one.
	var through int64
	if err := tx.QueryRowContext(ctx, `UPDATE usage_compaction SET through_at = through_at WHERE id = 1 RETURNING through_at`).
		Scan(&through); err != nil {
		return 0, fmt.Errorf("store: compact usage: watermark: %w", err)
	}
	end := millis(before)
	// A window with nothing to merge (every group one row already) is
	// cheap: go on to the next, so that 0 means nothing is left.
	for merged == 0 {
		var first sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT MIN(end_at) FROM usage_intervals WHERE end_at > ? AND end_at <= ?`, through, end).
			Scan(&first); err != nil {
			return 0, fmt.Errorf("store: compact usage: %w", err)
		}
		if !first.Valid {
			break
		}
		hi := min(end, first.Int64+compactSpan.Milliseconds()-1)
		if merged, err = mergeUsageTx(ctx, tx, through/hourMillis*hourMillis, hi); err != nil {
			return 0, err
		}
		through = hi
	}
	if _, err := tx.ExecContext(ctx, `UPDATE usage_compaction SET through_at = ? WHERE id = 1`, through); err != nil {
		return 0, fmt.Errorf("store: compact usage: watermark: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store: compact usage: %w", err)
	}
	return merged, nil
}

// mergeUsageTx merges the intervals ending in (lo, hi] by sandbox, key and
// UTC hour of end_at - 1 ms, and returns how many rows it removed. lo is a
// whole hour, so every group is whole up to hi: an hour compacted in part
// (up to an earlier before) has its new rows merged into the row it
// already has.
func mergeUsageTx(ctx context.Context, tx *tx, lo, hi int64) (merged int64, err error) {
	if _, err := tx.ExecContext(ctx, `UPDATE usage_intervals SET end_at = g.end_at, cpu_seconds = g.cpu,
		overhead_cpu_seconds = g.overhead, wall_seconds = g.wall, gib_seconds = g.gib, storage_gib_seconds = g.storage
		FROM (SELECT sandbox_id, MIN(start_at) AS start_at, MAX(end_at) AS end_at, SUM(cpu_seconds) AS cpu,
				SUM(overhead_cpu_seconds) AS overhead, SUM(wall_seconds) AS wall, SUM(gib_seconds) AS gib,
				SUM(storage_gib_seconds) AS storage
			FROM usage_intervals WHERE end_at > ? AND end_at <= ?
			GROUP BY sandbox_id, key_id, `+usageBucket+` HAVING COUNT(*) > 1) AS g
		WHERE usage_intervals.sandbox_id = g.sandbox_id AND usage_intervals.start_at = g.start_at`, lo, hi); err != nil {
		return 0, fmt.Errorf("store: compact usage: merge: %w", err)
	}
	// The merged rows still start their groups (their ends moved within
	// the hour), so every other row of the window is one merged into them.
	res, err := tx.ExecContext(ctx, `DELETE FROM usage_intervals WHERE end_at > ? AND end_at <= ?
		AND (sandbox_id, start_at) NOT IN (SELECT sandbox_id, MIN(start_at) FROM usage_intervals
			WHERE end_at > ? AND end_at <= ? GROUP BY sandbox_id, key_id, `+usageBucket+`)`, lo, hi, lo, hi)
	if err != nil {
		return 0, fmt.Errorf("store: compact usage: delete merged: %w", err)
	}
	if merged, err = res.RowsAffected(); err != nil {
		return 0, fmt.Errorf("store: compact usage: %w", err)
	}
	return merged, nil
}
