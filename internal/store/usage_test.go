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
