package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

func openStore(t *testing.T, dsn string) *Store {
	t.Helper()
	st, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Every kind of record reads back as written on both databases: the
// dialect's parts (metadata filters, days of usage, flags, duplicate codes,
// upserts) included.
func TestRecords(t *testing.T) { eachBackend(t, testRecords) }

func testRecords(t *testing.T, dsn string) {
	ctx := context.Background()
	st := openStore(t, dsn)
	t0 := time.UnixMilli(1_700_000_000_123).UTC()

	sb := Sandbox{ID: "sbx_1", KeyID: "key_1", Template: "base", State: StateStarting, CPU: 1.5, MemoryMiB: 512,
		DiskMiB: 1024, Env: map[string]string{"A": "1"}, Metadata: map[string]string{"team": "x", `we"ird`: "?"},
		CreatedAt: t0, LeaseEndsAt: t0.Add(time.Hour), Driver: "gvisor", AutoResume: true, TimeoutSeconds: 300}
	if err := st.InsertSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	other := sb
	other.ID, other.Metadata, other.CreatedAt, other.AutoResume = "sbx_2", map[string]string{"team": "y"}, t0.Add(time.Second), false
	if err := st.InsertSandbox(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkRunning(ctx, "sbx_1", []byte{0, 1, 2, 0xff}); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkRunning(ctx, "sbx_1", nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("MarkRunning twice: %v, want ErrNotFound", err)
	}
	got, err := st.GetSandbox(ctx, "sbx_1")
	if err != nil || got.State != StateRunning || !got.CreatedAt.Equal(t0) || string(got.DriverState) != "\x00\x01\x02\xff" ||
		!got.AutoResume || got.OnLeaseEnd != OnLeaseEndStop || got.Metadata[`we"ird`] != "?" || got.CPU != 1.5 || got.EndedAt != nil {
		t.Errorf("GetSandbox: %+v, %v", got, err)
	}
	if _, err := st.GetSandbox(ctx, "sbx_none"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetSandbox of nothing: %v", err)
	}
	for _, f := range []struct {
		f    SandboxFilter
		want string
	}{
		{SandboxFilter{Metadata: map[string]string{"team": "x"}}, "sbx_1"},
		{SandboxFilter{Metadata: map[string]string{`we"ird`: "?"}}, "sbx_1"},
		{SandboxFilter{Metadata: map[string]string{"team": "x", `we"ird`: "!"}}, ""},
		{SandboxFilter{State: StateStarting}, "sbx_2"},
		{SandboxFilter{KeyID: "key_1"}, "sbx_2,sbx_1"},
	} {
		list, err := st.ListSandboxes(ctx, f.f)
		var ids []string
		for _, s := range list {
			ids = append(ids, s.ID)
		}
		if err != nil || strings.Join(ids, ",") != f.want {
			t.Errorf("ListSandboxes(%+v) = %v, %v; want %s", f.f, ids, err, f.want)
		}
	}
	if err := st.SetLeasePolicy(ctx, "sbx_1", OnLeaseEndPause, false, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.SetLeasePauseMode(ctx, "sbx_1", PauseFilesystem); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetSandbox(ctx, "sbx_1"); got.LeasePauseMode != PauseFilesystem || got.PauseMode != PauseFull {
		t.Errorf("lease pause mode: %q, pause mode %q", got.LeasePauseMode, got.PauseMode)
	}
	if err := st.MarkPaused(ctx, "sbx_1", t0.Add(time.Minute), 4096, PauseFilesystem); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetSandbox(ctx, "sbx_1"); got.State != StatePaused || got.PauseMode != PauseFilesystem {
		t.Errorf("paused files-only: %+v", got)
	}
	if err := st.StartUsage(ctx, "sbx_1", t0, CPUMark{Host: 1}); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkResumed(ctx, "sbx_1", t0.Add(2*time.Hour), []byte("s"), CPUMark{Host: 0.5, Overhead: 0.1, OverheadKnown: true}); err != nil {
		t.Fatal(err)
	}
	got, _ = st.GetSandbox(ctx, "sbx_1")
	if got.State != StateRunning || got.OnLeaseEnd != OnLeaseEndPause || got.AutoResume || got.TimeoutSeconds != 300 || got.PausedAt != nil {
		t.Errorf("after pause and resume: %+v", got)
	}
	if cur, _ := st.GetUsageCursor(ctx, "sbx_1"); cur.LastCPU != 0.5 || cur.LastOverheadCPU != 0.1 {
		t.Errorf("cursor after resume: %+v", cur)
	}
	if err := st.SetLeasePolicy(ctx, "sbx_1", OnLeaseEndStop, true, 600); err != nil {
		t.Fatal(err)
	}
	if got, _ = st.GetSandbox(ctx, "sbx_1"); got.TimeoutSeconds != 600 || !got.AutoResume || got.OnLeaseEnd != OnLeaseEndStop {
		t.Errorf("after SetLeasePolicy: %+v", got)
	}
	if err := st.MarkStopped(ctx, "sbx_1", "deleted", t0.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkStopped(ctx, "sbx_1", "failed", t0.Add(4*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, _ = st.GetSandbox(ctx, "sbx_1"); got.EndReason != "deleted" || !got.EndedAt.Equal(t0.Add(3*time.Hour)) {
		t.Errorf("stopped: %+v", got)
	}
	if err := st.SetLeaseEnd(ctx, "sbx_1", t0); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetLeaseEnd of a stopped sandbox: %v", err)
	}
	if n, err := st.CountSandboxesByState(ctx); err != nil || n[StateStopped] != 1 || n[StateStarting] != 1 {
		t.Errorf("counts: %v %v", n, err)
	}

	// Usage by UTC day: an interval ending at midnight is the day before.
	midnight := time.Date(2024, 3, 2, 0, 0, 0, 0, time.UTC)
	if err := st.StartUsage(ctx, "sbx_2", midnight.Add(-time.Second), CPUMark{}); err != nil {
		t.Fatal(err)
	}
	for _, end := range []time.Time{midnight, midnight.Add(time.Second)} {
		iv := UsageInterval{SandboxID: "sbx_2", KeyID: "key_1", Start: end.Add(-time.Second), End: end, WallSeconds: 1}
		if ok, err := st.RecordUsage(ctx, iv, CPUMark{}, false); !ok || err != nil {
			t.Fatalf("record: %v %v", ok, err)
		}
	}
	sums, err := st.SumUsage(ctx, UsageFilter{SandboxIDs: []string{"sbx_2", "sbx_x"}, To: midnight.Add(time.Hour)}, true)
	if err != nil || len(sums) != 2 || sums[0].Day != "2024-03-01" || sums[1].Day != "2024-03-02" || sums[0].WallSeconds != 1 {
		t.Errorf("sums by day: %+v %v", sums, err)
	}
	if sums, err = st.SumUsage(ctx, UsageFilter{From: midnight}, false); err != nil || len(sums) != 1 || sums[0].Day != "" {
		t.Errorf("sums: %+v %v", sums, err)
	}
	if w, err := st.KeyWallSeconds(ctx, "key_1"); err != nil || w != 2 {
		t.Errorf("KeyWallSeconds = %v %v", w, err)
	}
	if w, err := st.KeyWallSeconds(ctx, "key_none"); err != nil || w != 0 {
		t.Errorf("KeyWallSeconds of nothing = %v %v", w, err)
	}

	// Keys, limits, sessions.
	k := Key{ID: "key_2", Name: "ci", Prefix: "rt_ab", Hash: "h2", CreatedAt: t0}
	if err := st.InsertKey(ctx, k, 7); err != nil {
		t.Fatal(err)
	}
	if err := st.InsertKey(ctx, Key{ID: "key_3", Name: "dup", Hash: "h2", CreatedAt: t0}, 0); err == nil {
		t.Error("a second key with the same hash was inserted")
	}
	if got, err := st.KeyByHash(ctx, "h2"); err != nil || got.ID != "key_2" || got.RevokedAt != nil {
		t.Errorf("KeyByHash: %+v %v", got, err)
	}
	if err := st.RevokeKey(ctx, "key_2", t0); err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeKey(ctx, "key_2", t0); !errors.Is(err, ErrNotFound) {
		t.Errorf("revoke twice: %v", err)
	}
	if l, _ := st.KeyDailyLimit(ctx, "key_2"); l != 7 {
		t.Errorf("limit %d", l)
	}
	if err := st.SetKeyDailyLimit(ctx, "key_2", 9); err != nil {
		t.Fatal(err)
	}
	if err := st.SetKeyDailyLimit(ctx, "key_2", 0); err != nil {
		t.Fatal(err)
	}
	if l, _ := st.KeyDailyLimits(ctx); len(l) != 0 {
		t.Errorf("limits after removal: %v", l)
	}
	if err := st.InsertSession(ctx, Session{TokenHash: "s1", KeyID: "key_2", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SessionByHash(ctx, "s1", t0.Add(2*time.Hour)); !errors.Is(err, ErrNotFound) {
		t.Errorf("an expired session: %v", err)
	}
	if se, err := st.SessionByHash(ctx, "s1", t0); err != nil || se.KeyID != "key_2" {
		t.Errorf("session: %+v %v", se, err)
	}

	// E2B tokens and traffic flags.
	if err := st.InsertE2BToken(ctx, E2BToken{Hash: "t1", SandboxID: "sbx_2", Template: "base", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if tok, err := st.E2BTokenByHash(ctx, "t1"); err != nil || tok.SandboxID != "sbx_2" {
		t.Errorf("token: %+v %v", tok, err)
	}
	if err := st.InitE2BTraffic(ctx, "sbx_2", true); err != nil {
		t.Fatal(err)
	}
	if err := st.InitE2BTraffic(ctx, "sbx_2", false); err != nil { // keeps the first
		t.Fatal(err)
	}
	if pub, err := st.E2BPublicTraffic(ctx, "sbx_2"); err != nil || !pub {
		t.Errorf("public traffic: %v %v", pub, err)
	}
	if err := st.SetE2BTraffic(ctx, "sbx_2", false); err != nil {
		t.Fatal(err)
	}
	if pub, _ := st.E2BPublicTraffic(ctx, "sbx_2"); pub {
		t.Error("SetE2BTraffic(false) kept it public")
	}
	if m, err := st.E2BTemplates(ctx); err != nil || m["sbx_2"] != "base" {
		t.Errorf("templates: %v %v", m, err)
	}
}

// Device login: a taken user code is ErrDuplicate, polls slow down, a code
// is redeemed once.
func TestDeviceCodes(t *testing.T) { eachBackend(t, testDeviceCodes) }

func testDeviceCodes(t *testing.T, dsn string) {
	ctx := context.Background()
	st := openStore(t, dsn)
	now := time.UnixMilli(1_700_000_000_000).UTC()
	d := DeviceCode{DeviceHash: "d1", UserHash: "u1", State: DevicePending, ClientName: "cli", TrialRequested: true,
		CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute), IntervalSeconds: 5}
	if err := st.InsertDeviceCode(ctx, d); err != nil {
		t.Fatal(err)
	}
	d2 := d
	d2.DeviceHash = "d2"
	if err := st.InsertDeviceCode(ctx, d2); !errors.Is(err, ErrDuplicate) {
		t.Errorf("a taken user code: %v, want ErrDuplicate", err)
	}
	if _, slow, err := st.PollDeviceCode(ctx, "d1", now, 5); slow || err != nil {
		t.Errorf("first poll: slow=%v %v", slow, err)
	}
	if _, slow, _ := st.PollDeviceCode(ctx, "d1", now.Add(time.Second), 5); !slow {
		t.Error("a poll 1 s after the last was not slow")
	}
	got, err := st.DeviceCodeByUserHash(ctx, "u1")
	if err != nil || got.IntervalSeconds != 10 || !got.TrialRequested || got.ClientName != "cli" {
		t.Errorf("after slow_down: %+v %v", got, err)
	}
	if err := st.DecideDeviceCode(ctx, DeviceCode{UserHash: "u1", State: DeviceApproved, KeyName: "laptop",
		DailyLimitMicros: 3, TrialSeconds: 60, DecidedBy: "admin"}, now); err != nil {
		t.Fatal(err)
	}
	if n, _ := st.CountLiveDeviceCodes(ctx, now); n != 1 {
		t.Errorf("live codes %d", n)
	}
	// Redeemed once, however many polls race for it.
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, lost := 0, 0
	for i := range 8 {
		wg.Go(func() {
			k := Key{ID: "key_d" + string(rune('a'+i)), Prefix: "rt", Hash: "hd" + string(rune('a'+i)), CreatedAt: now}
			_, err := st.RedeemDeviceCode(ctx, "d1", k, now)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, ErrNotFound) || isBusy(err):
				lost++
			default:
				t.Errorf("redeem: %v", err)
			}
		})
	}
	wg.Wait()
	if won != 1 || lost != 7 {
		t.Errorf("redeemed %d times (%d refused), want once", won, lost)
	}
	keys, _ := st.ListKeys(ctx)
	if len(keys) != 1 || keys[0].Name != "laptop" {
		t.Fatalf("keys after redemption: %+v", keys)
	}
	if a, _ := st.KeyTrial(ctx, keys[0].ID); a != 60 {
		t.Errorf("trial %d", a)
	}
	if err := st.DeleteDeviceCodesBefore(ctx, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeviceCodeByDeviceHash(ctx, "d1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
}

// isBusy says SQLite refused a write while another held the lock (its
// busy timeout is 10 s, so this is rare); PostgreSQL waits for row locks
// instead and never says it.
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// Samplers on several servers at once (PostgreSQL: API replicas) record an
// interval once: exactly one of them moves the cursor.
func TestRecordUsageRace(t *testing.T) { eachBackend(t, testRecordUsageRace) }

func testRecordUsageRace(t *testing.T, dsn string) {
	ctx := context.Background()
	a, b := openStore(t, dsn), openStore(t, dsn) // two servers
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	if err := a.StartUsage(ctx, "sbx_r", t0, CPUMark{}); err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		start := t0.Add(time.Duration(round) * time.Second)
		iv := UsageInterval{SandboxID: "sbx_r", KeyID: "k", Start: start, End: start.Add(time.Second), WallSeconds: 1}
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := range 6 {
			st := []*Store{a, b}[i%2]
			wg.Go(func() {
				ok, err := st.RecordUsage(ctx, iv, CPUMark{Host: float64(round)}, false)
				if err != nil && !isBusy(err) {
					t.Errorf("record: %v", err)
				}
				if ok {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("round %d: the interval was recorded %d times, want once", round, wins)
		}
	}
	if w, _ := a.KeyWallSeconds(ctx, "k"); w != 20 {
		t.Errorf("wall seconds %v, want 20", w)
	}
}
