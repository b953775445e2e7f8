package store

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// usageDay1 is 21:00 UTC of the day before the midnight the compaction
// tests' intervals cross; they run until 02:30.
var (
	usageDay1 = time.Date(2024, 3, 1, 21, 0, 0, 0, time.UTC)
	midnight2 = time.Date(2024, 3, 2, 0, 0, 0, 0, time.UTC)
	usageEnd  = time.Date(2024, 3, 2, 2, 30, 0, 0, time.UTC)
)

// fillUsage meters three sandboxes of two keys from 21:00 to 02:30 as the
// sampler would, each on its own grid: sbx_a every 5 s from 21:00 (so
// intervals end exactly on each hour and at midnight), sbx_b every 7 s from
// 21:10:03 (intervals straddle the hours), sbx_c every 13.25 s from
// 22:47:01.5, paused (storage only) now and then. Figures are random.
func fillUsage(t *testing.T, st *Store) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	grids := []struct {
		id, key string
		start   time.Time
		step    time.Duration
	}{
		{"sbx_a", "key_1", usageDay1, 5 * time.Second},
		{"sbx_b", "key_1", usageDay1.Add(10*time.Minute + 3*time.Second), 7 * time.Second},
		{"sbx_c", "key_2", usageDay1.Add(107*time.Minute + 1500*time.Millisecond), 13250 * time.Millisecond},
	}
	for _, g := range grids {
		if err := st.StartUsage(ctx, g.id, g.start, CPUMark{}); err != nil {
			t.Fatal(err)
		}
		var recs []UsageRecord
		for at := g.start; !at.Add(g.step).After(usageEnd); at = at.Add(g.step) {
			wall := g.step.Seconds()
			iv := UsageInterval{SandboxID: g.id, KeyID: g.key, Start: at, End: at.Add(g.step),
				CPUSeconds: rng.Float64() * wall, OverheadCPUSeconds: rng.Float64() / 10, WallSeconds: wall, GiBSeconds: wall * 0.5}
			if g.id == "sbx_c" && rng.IntN(5) == 0 {
				iv.CPUSeconds, iv.OverheadCPUSeconds, iv.WallSeconds, iv.GiBSeconds = 0, 0, 0, 0
				iv.StorageGiBSeconds = wall * 1.5
			}
			recs = append(recs, UsageRecord{Interval: iv})
		}
		for len(recs) > 0 {
			part := recs[:min(len(recs), 1000)]
			recs = recs[len(part):]
			written, err := st.RecordUsageBatch(ctx, part)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range written {
				if !w {
					t.Fatalf("%s: interval %+v not written", g.id, part[i].Interval)
				}
			}
		}
	}
}

// usageRow is one usage_intervals row as stored.
type usageRow struct {
	Sandbox, Key                         string
	Start, End                           int64
	CPU, Overhead, Wall, GiB, StorageGiB float64
}

// usageRows returns the rows whose end is after after (all with the zero
// time), by sandbox and start.
func usageRows(t *testing.T, st *Store, after time.Time) []usageRow {
	t.Helper()
	rows, err := st.db.QueryContext(context.Background(), `SELECT sandbox_id, key_id, start_at, end_at, cpu_seconds,
		overhead_cpu_seconds, wall_seconds, gib_seconds, storage_gib_seconds FROM usage_intervals
		WHERE end_at > ? ORDER BY sandbox_id, start_at`, millis(after))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []usageRow
	for rows.Next() {
		var r usageRow
		if err := rows.Scan(&r.Sandbox, &r.Key, &r.Start, &r.End, &r.CPU, &r.Overhead, &r.Wall, &r.GiB, &r.StorageGiB); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// compactAll calls CompactUsage until it has nothing left to merge and
// returns the rows it removed in all.
func compactAll(t *testing.T, st *Store, before time.Time) int64 {
	t.Helper()
	var total int64
	for i := 0; ; i++ {
		n, err := st.CompactUsage(context.Background(), before)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return total
		}
		if i > 1000 {
			t.Fatal("CompactUsage never reports that it is done")
		}
		total += n
	}
}

// usageFilters are windows on whole hours, keys and sandboxes, including
// the hour that ends at midnight and the hour of 22:00, which sbx_a's
// intervals end exactly on.
func usageFilters() []UsageFilter {
	h := func(n int) time.Time { return usageDay1.Add(time.Duration(n) * time.Hour) }
	return []UsageFilter{
		{},
		{To: h(1)},
		{From: h(1), To: h(2)},
		{From: h(1), To: h(4)},
		{To: midnight2},
		{From: midnight2},
		{From: midnight2, To: h(4)},
		{KeyID: "key_1"},
		{KeyID: "key_2", From: h(2)},
		{KeyID: "key_1", To: h(3)},
		{SandboxIDs: []string{"sbx_a", "sbx_c"}},
		{SandboxIDs: []string{"sbx_b"}, From: h(2), To: h(5)},
	}
}

// usageTotals are SumUsage's answers to usageFilters by day and not, and
// KeyWallSeconds of both keys, keyed by a description.
func usageTotals(t *testing.T, st *Store) map[string]UsageSum {
	t.Helper()
	ctx := context.Background()
	out := map[string]UsageSum{}
	for i, f := range usageFilters() {
		for _, byDay := range []bool{false, true} {
			sums, err := st.SumUsage(ctx, f, byDay)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range sums {
				k := s.SandboxID + "/" + s.KeyID + "/" + s.Day
				out[string(rune('A'+i))+"/"+k] = s
			}
		}
	}
	for _, key := range []string{"key_1", "key_2"} {
		w, err := st.KeyWallSeconds(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		out["wall/"+key] = UsageSum{WallSeconds: w}
	}
	return out
}

func near(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

func sameTotals(t *testing.T, when string, want, got map[string]UsageSum) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d sums, want %d", when, len(got), len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: %s missing", when, k)
			continue
		}
		if !near(g.CPUSeconds, w.CPUSeconds) || !near(g.OverheadCPUSeconds, w.OverheadCPUSeconds) || !near(g.WallSeconds, w.WallSeconds) ||
			!near(g.GiBSeconds, w.GiBSeconds) || !near(g.StorageGiBSeconds, w.StorageGiBSeconds) {
			t.Errorf("%s: %s = %+v, want %+v", when, k, g, w)
		}
	}
}

// Compaction leaves one row per sandbox and UTC hour and every sum on whole
// hours (by day or not, by key, by sandbox, the total per key) as it was:
// after compacting up to the middle of an hour, and again after
// compacting the rest of it.
func TestCompactUsageKeepsSums(t *testing.T) { eachBackend(t, testCompactUsageKeepsSums) }

func testCompactUsageKeepsSums(t *testing.T, dsn string) {
	st, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fillUsage(t, st)
	want := usageTotals(t, st)
	rows := len(usageRows(t, st, time.Time{}))

	mid := midnight2.Add(30 * time.Minute)
	n1 := compactAll(t, st, mid)
	sameTotals(t, "compacted to 00:30", want, usageTotals(t, st))
	n2 := compactAll(t, st, usageEnd)
	sameTotals(t, "compacted to 02:30", want, usageTotals(t, st))

	after := usageRows(t, st, time.Time{})
	if int64(rows-len(after)) != n1+n2 || n1 == 0 || n2 == 0 {
		t.Errorf("%d rows became %d; merged %d and %d", rows, len(after), n1, n2)
	}
	// One row per sandbox per hour: sbx_a and sbx_b from the hour of 21:00
	// to that of 02:00 (6; sbx_b's first starts at 21:10), sbx_c from 22:00 (5).
	perHour := map[string]int{}
	type hour struct {
		sandbox string
		n       int64
	}
	seen := map[hour]bool{}
	for _, r := range after {
		bucket := hour{r.Sandbox, (r.End - 1) / hourMillis}
		if seen[bucket] {
			t.Errorf("two rows of %s in the hour of %v", r.Sandbox, time.UnixMilli(r.End-1).UTC())
		}
		seen[bucket] = true
		perHour[r.Sandbox]++
	}
	if perHour["sbx_a"] != 6 || perHour["sbx_b"] != 6 || perHour["sbx_c"] != 5 || len(after) != 17 {
		t.Errorf("rows per sandbox %v (%d in all), want 6, 6, 5", perHour, len(after))
	}
	// sbx_a's row of 21:00 ends on 22:00 exactly and starts at 21:00.
	if r := after[0]; r.Sandbox != "sbx_a" || r.Start != millis(usageDay1) || r.End != millis(usageDay1.Add(time.Hour)) {
		t.Errorf("sbx_a's first hour: %+v", r)
	}
}

// Rows that end after before are left exactly as they were.
func TestCompactUsageLeavesNewer(t *testing.T) { eachBackend(t, testCompactUsageLeavesNewer) }

func testCompactUsageLeavesNewer(t *testing.T, dsn string) {
	st, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fillUsage(t, st)
	before := midnight2.Add(90*time.Minute + 2*time.Second)
	newer := usageRows(t, st, before)
	older := len(usageRows(t, st, time.Time{})) - len(newer)
	if n := compactAll(t, st, before); n == 0 {
		t.Fatal("nothing merged")
	}
	got := usageRows(t, st, before)
	if len(got) != len(newer) {
		t.Fatalf("%d rows after %v, want %d", len(got), before, len(newer))
	}
	for i := range got {
		if got[i] != newer[i] {
			t.Fatalf("row %d: %+v, want %+v", i, got[i], newer[i])
		}
	}
	if left := len(usageRows(t, st, time.Time{})) - len(got); left >= older || left > 17 {
		t.Errorf("%d rows up to %v after compaction, from %d", left, before, older)
	}
}

// A second compaction up to the same time merges nothing and changes no
// row.
func TestCompactUsageTwice(t *testing.T) { eachBackend(t, testCompactUsageTwice) }

func testCompactUsageTwice(t *testing.T, dsn string) {
	ctx := context.Background()
	st, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fillUsage(t, st)
	before := midnight2.Add(time.Hour)
	if n := compactAll(t, st, before); n == 0 {
		t.Fatal("nothing merged")
	}
	rows := usageRows(t, st, time.Time{})
	if n, err := st.CompactUsage(ctx, before); n != 0 || err != nil {
		t.Fatalf("second compaction: merged %d, %v", n, err)
	}
	if n, err := st.CompactUsage(ctx, before.Add(-2*time.Hour)); n != 0 || err != nil {
		t.Fatalf("compaction to an earlier time: merged %d, %v", n, err)
	}
	again := usageRows(t, st, time.Time{})
	if len(again) != len(rows) {
		t.Fatalf("%d rows, then %d", len(rows), len(again))
	}
	for i := range rows {
		if rows[i] != again[i] {
			t.Fatalf("row %d: %+v, then %+v", i, rows[i], again[i])
		}
	}
}

// Metering goes on from an open cursor after the compaction merged the
// sandbox's latest interval (the merged row keeps the earliest start of its
// hour): the next interval is written, and merged in turn.
func TestCompactUsageThenRecord(t *testing.T) { eachBackend(t, testCompactUsageThenRecord) }

func testCompactUsageThenRecord(t *testing.T, dsn string) {
	ctx := context.Background()
	st, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fillUsage(t, st)
	compactAll(t, st, usageEnd)
	cur, err := st.GetUsageCursor(ctx, "sbx_a")
	if err != nil || !cur.LastAt.Equal(usageEnd) || cur.Closed {
		t.Fatalf("cursor: %+v %v", cur, err)
	}
	wall := usageTotals(t, st)["wall/key_1"].WallSeconds
	for i := range 2 {
		at := usageEnd.Add(time.Duration(i) * 5 * time.Second)
		iv := UsageInterval{SandboxID: "sbx_a", KeyID: "key_1", Start: at, End: at.Add(5 * time.Second), CPUSeconds: 1, WallSeconds: 5, GiBSeconds: 2.5}
		if ok, err := st.RecordUsage(ctx, iv, CPUMark{Host: float64(i)}, false); !ok || err != nil {
			t.Fatalf("record after compaction: %v %v", ok, err)
		}
	}
	if n := compactAll(t, st, usageEnd.Add(10*time.Second)); n != 2 {
		t.Errorf("merged %d rows of the new intervals into the hour's, want 2", n)
	}
	if got := usageTotals(t, st)["wall/key_1"].WallSeconds; !near(got, wall+10) {
		t.Errorf("key_1's wall seconds %v, want %v", got, wall+10)
	}
}

// Two compactions at once (two servers on one store) run one after the
// other: neither counts a merged row twice nor leaves an hour in two rows.
func TestCompactUsageConcurrent(t *testing.T) { eachBackend(t, testCompactUsageConcurrent) }

func testCompactUsageConcurrent(t *testing.T, dsn string) {
	st, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fillUsage(t, st)
	want := usageTotals(t, st)
	rows := len(usageRows(t, st, time.Time{}))
	merged := make(chan int64, 2)
	for range 2 {
		go func() {
			var total int64
			for {
				n, err := st.CompactUsage(context.Background(), usageEnd)
				if err != nil {
					t.Error(err)
				}
				if n == 0 || err != nil {
					merged <- total
					return
				}
				total += n
			}
		}()
	}
	n := <-merged + <-merged
	sameTotals(t, "compacted twice at once", want, usageTotals(t, st))
	if after := len(usageRows(t, st, time.Time{})); after != 17 || int64(rows-after) != n {
		t.Errorf("%d rows became %d, %d merged; want 17", rows, after, n)
	}
}
