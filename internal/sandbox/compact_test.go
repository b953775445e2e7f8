package sandbox

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/store"
)

// A round of compaction works through three hours of 5-second intervals in
// as many bounded calls as it takes, leaves the last hour as the sampler
// wrote it, and changes no total.
func TestCompactUsageRound(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2024, 3, 2, 0, 30, 0, 0, time.UTC)
	start := now.Add(-3 * time.Hour)
	if err := st.StartUsage(ctx, "sbx_1", start, store.CPUMark{}); err != nil {
		t.Fatal(err)
	}
	var recs []store.UsageRecord
	for at := start; at.Before(now); at = at.Add(5 * time.Second) {
		recs = append(recs, store.UsageRecord{Interval: store.UsageInterval{SandboxID: "sbx_1", KeyID: "key_1",
			Start: at, End: at.Add(5 * time.Second), CPUSeconds: 0.25, WallSeconds: 5, GiBSeconds: 2.5}})
	}
	if _, err := st.RecordUsageBatch(ctx, recs); err != nil {
		t.Fatal(err)
	}
	total := func() store.UsageSum {
		t.Helper()
		sums, err := st.SumUsage(ctx, store.UsageFilter{}, false)
		if err != nil || len(sums) != 1 {
			t.Fatalf("sums: %+v %v", sums, err)
		}
		return sums[0]
	}
	want := total()

	m := New(&countingDriver{}, st, rootFS{}, DefaultLimits(), nil)
	m.now = func() time.Time { return now }
	m.compactUsage(ctx)

	if got := total(); got != want { // quarters and halves: exact in binary
		t.Errorf("total after compaction %+v, want %+v", got, want)
	}
	if n, err := st.CompactUsage(ctx, now.Add(-compactKeep)); n != 0 || err != nil {
		t.Errorf("the round left %d rows to merge before %v (%v)", n, now.Add(-compactKeep), err)
	}
	// The last hour (720 intervals ending from 23:30:05 to 00:30) is still
	// in 5-second rows: 360 merge into 23:00's row, 360 into one of 00:00.
	var merged int64
	for range 100 {
		n, err := st.CompactUsage(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		merged += n
	}
	if merged != 719 {
		t.Errorf("merging the last hour removed %d rows, want 719", merged)
	}
}
