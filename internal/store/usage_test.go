package store

import (
	"context"
	"testing"
	"time"
)

// An interval is written with the cursor's move in one transaction: a
// second writer from the same cursor (a restarted server racing an old one,
// a retried sample) writes nothing, and a closed ledger takes no more.
func TestRecordUsageOnce(t *testing.T) { eachBackend(t, testRecordUsageOnce) }

func testRecordUsageOnce(t *testing.T, dsn string) {
	ctx := context.Background()
	st, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	if err := st.StartUsage(ctx, "sbx_a", t0, CPUMark{Host: 0.5}); err != nil {
		t.Fatal(err)
	}
	if err := st.StartUsage(ctx, "sbx_a", t0.Add(time.Hour), CPUMark{Host: 9}); err != nil { // keeps the first
		t.Fatal(err)
	}
	iv := UsageInterval{SandboxID: "sbx_a", KeyID: "key_1", Start: t0, End: t0.Add(2 * time.Second),
		CPUSeconds: 1, OverheadCPUSeconds: 0.25, WallSeconds: 2, GiBSeconds: 1}
	for i, want := range []bool{true, false} {
		ok, err := st.RecordUsage(ctx, iv, CPUMark{Host: 1.75, Overhead: 0.25, OverheadKnown: true}, false)
		if err != nil || ok != want {
			t.Fatalf("write %d: ok=%v err=%v, want ok=%v", i, ok, err, want)
		}
	}
	next := UsageInterval{SandboxID: "sbx_a", KeyID: "key_1", Start: iv.End, End: iv.End.Add(time.Second),
		CPUSeconds: 0, WallSeconds: 1, GiBSeconds: 0.5}
	if ok, err := st.RecordUsage(ctx, next, CPUMark{Host: 1.75, Overhead: 0.25, OverheadKnown: true}, true); !ok || err != nil {
		t.Fatalf("final: %v %v", ok, err)
	}
	after := UsageInterval{SandboxID: "sbx_a", KeyID: "key_1", Start: next.End, End: next.End.Add(time.Second), WallSeconds: 1}
	if ok, _ := st.RecordUsage(ctx, after, CPUMark{Host: 2}, false); ok {
		t.Fatal("a closed ledger took another interval")
	}
	cur, err := st.GetUsageCursor(ctx, "sbx_a")
	if err != nil || !cur.Closed || cur.LastCPU != 1.75 || !cur.OverheadKnown || cur.LastOverheadCPU != 0.25 || !cur.LastAt.Equal(next.End) {
		t.Fatalf("cursor: %+v %v", cur, err)
	}
	sums, err := st.SumUsage(ctx, UsageFilter{KeyID: "key_1"}, true)
	if err != nil || len(sums) != 1 {
		t.Fatalf("sums: %+v %v", sums, err)
	}
	if s := sums[0]; s.CPUSeconds != 1 || s.OverheadCPUSeconds != 0.25 || s.WallSeconds != 3 || s.GiBSeconds != 1.5 || s.Day != "2023-11-14" {
		t.Fatalf("sum: %+v", s)
	}
	if err := st.SetKeyDailyLimit(ctx, "key_1", 5); err != nil {
		t.Fatal(err)
	}
	if l, _ := st.KeyDailyLimits(ctx); l["key_1"] != 5 {
		t.Fatalf("limits: %v", l)
	}
}

// A cursor opened without the isolation layer's figure says so (NULL), and
// one that has it keeps it.
func TestUsageCursorOverheadUnknown(t *testing.T) { eachBackend(t, testUsageCursorOverheadUnknown) }

func testUsageCursorOverheadUnknown(t *testing.T, dsn string) {
	ctx := context.Background()
	st, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	if err := st.StartUsage(ctx, "sbx_b", t0, CPUMark{Host: 2}); err != nil {
		t.Fatal(err)
	}
	cur, err := st.GetUsageCursor(ctx, "sbx_b")
	if err != nil || cur.OverheadKnown || cur.LastCPU != 2 {
		t.Fatalf("cursor without overhead: %+v %v", cur, err)
	}
	iv := UsageInterval{SandboxID: "sbx_b", KeyID: "k", Start: t0, End: t0.Add(time.Second), CPUSeconds: 1, WallSeconds: 1}
	if ok, err := st.RecordUsage(ctx, iv, CPUMark{Host: 3, Overhead: 0, OverheadKnown: true}, false); !ok || err != nil {
		t.Fatalf("record: %v %v", ok, err)
	}
	if cur, err = st.GetUsageCursor(ctx, "sbx_b"); err != nil || !cur.OverheadKnown || cur.LastOverheadCPU != 0 {
		t.Fatalf("cursor with a zero overhead: %+v %v", cur, err)
	}
}

// A batch writes each record as RecordUsage would, in one transaction: a
// record whose cursor moved (written since by another sampler) or closed
// is skipped and the others are written; cursors and sandboxes are read
// many at a time, the missing ones absent.
func TestRecordUsageBatch(t *testing.T) { eachBackend(t, testRecordUsageBatch) }

func testRecordUsageBatch(t *testing.T, dsn string) {
	ctx := context.Background()
	st, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	ids := []string{"sbx_a", "sbx_b", "sbx_c", "sbx_d"}
	for _, id := range ids {
		if err := st.StartUsage(ctx, id, t0, CPUMark{Host: 1}); err != nil {
			t.Fatal(err)
		}
		if err := st.InsertSandbox(ctx, Sandbox{ID: id, KeyID: "key_1", Template: "base", State: StateRunning, MemoryMiB: 512,
			CreatedAt: t0, LeaseEndsAt: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	end := t0.Add(5 * time.Second)
	iv := func(id string, start time.Time) UsageInterval {
		return UsageInterval{SandboxID: id, KeyID: "key_1", Start: start, End: end, CPUSeconds: 0.5, WallSeconds: 5, GiBSeconds: 2.5}
	}
	// sbx_b's cursor moves before the batch (another sampler wrote it),
	// sbx_c's ledger is closed.
	if ok, err := st.RecordUsage(ctx, iv("sbx_b", t0), CPUMark{Host: 1.5}, false); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := st.RecordUsage(ctx, UsageInterval{SandboxID: "sbx_c", KeyID: "key_1", Start: t0, End: t0}, CPUMark{Host: 1}, true); !ok || err != nil {
		t.Fatal(ok, err)
	}
	curs, err := st.GetUsageCursors(ctx, append(ids, "sbx_none"))
	if err != nil || len(curs) != 4 || !curs["sbx_c"].Closed || !curs["sbx_b"].LastAt.Equal(end) || !curs["sbx_a"].LastAt.Equal(t0) {
		t.Fatalf("cursors: %+v %v", curs, err)
	}
	sbs, err := st.GetSandboxes(ctx, []string{"sbx_a", "sbx_none", "sbx_d"})
	if err != nil || len(sbs) != 2 || sbs["sbx_a"].MemoryMiB != 512 || sbs["sbx_d"].ID != "sbx_d" {
		t.Fatalf("sandboxes: %+v %v", sbs, err)
	}
	recs := []UsageRecord{
		{Interval: iv("sbx_a", t0), Mark: CPUMark{Host: 1.5}},
		{Interval: iv("sbx_b", t0), Mark: CPUMark{Host: 1.5}}, // its cursor is at end now
		{Interval: iv("sbx_c", t0), Mark: CPUMark{Host: 1.5}}, // closed
		{Interval: iv("sbx_d", t0), Mark: CPUMark{Host: 1.5}, Final: true},
	}
	written, err := st.RecordUsageBatch(ctx, recs)
	if err != nil || len(written) != 4 || !written[0] || written[1] || written[2] || !written[3] {
		t.Fatalf("batch: %v %v, want [true false false true]", written, err)
	}
	if again, err := st.RecordUsageBatch(ctx, recs); err != nil || again[0] || again[3] {
		t.Fatalf("the same batch again wrote %v (%v): an interval counted twice", again, err)
	}
	curs, err = st.GetUsageCursors(ctx, ids)
	if err != nil || !curs["sbx_a"].LastAt.Equal(end) || curs["sbx_a"].LastCPU != 1.5 || curs["sbx_a"].Closed || !curs["sbx_d"].Closed {
		t.Fatalf("cursors after: %+v %v", curs, err)
	}
	sums, err := st.SumUsage(ctx, UsageFilter{KeyID: "key_1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	var wall float64
	for _, s := range sums {
		wall += s.WallSeconds
	}
	if wall != 15 { // a, b (its own write) and d: 5 s each
		t.Fatalf("wall seconds %v, want 15: %+v", wall, sums)
	}
	if w, err := st.RecordUsageBatch(ctx, nil); err != nil || len(w) != 0 {
		t.Fatalf("empty batch: %v %v", w, err)
	}
}
