package kubernetes_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, to read the ledger

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/driver"
	kdriver "withruntime.dev/runtime/internal/driver/kubernetes"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/internal/store/pgtest"
	withruntime "withruntime.dev/runtime/sdk/go"
)

// leaderOf asks a server's health who leads (ok false when it does not
// answer).
func leaderOf(s *server) (api.LeaderStatus, bool) {
	resp, err := http.Get("http://" + s.addr + "/v1/health")
	if err != nil {
		return api.LeaderStatus{}, false
	}
	defer resp.Body.Close()
	var h api.Health
	if json.NewDecoder(resp.Body).Decode(&h) != nil || h.Leader == nil {
		return api.LeaderStatus{}, false
	}
	return *h.Leader, true
}

// TestReplicasSurviveLeaderKill is issue 19's test of several API
// replicas: two `withruntime serve --driver kubernetes` processes share one
// PostgreSQL (pgtest) and one Lease. Sandboxes are created through both,
// and every command runs through the OTHER server (which attaches from the
// shared store). A sandbox one server holds and the other deletes is
// answered as stopped by the first (no stale state). Then the leader is
// killed (SIGKILL, no clean shutdown): the survivor takes the Lease, and
// every sandbox still answers exec through it, those the dead server
// created included, and one whose lease ends after the kill is ended by the
// survivor (lease_ended). After all are deleted through the survivor:
//
// The ledger check, per sandbox: its intervals, ordered by start, begin at
// the sandbox's creation, each begins exactly where the one before ended
// (no gap: no missing interval; no overlap: no doubled one — the primary
// key (sandbox, start) makes an exact double impossible, so overlap is what
// would show one), the last ends at the sandbox's end (its lease end if
// that came first), and its cursor is closed there.
//
// And nothing is left in the cluster: no pod, secret, network policy or
// pod process.
func TestReplicasSurviveLeaderKill(t *testing.T) {
	// A short grace, so that the survivor cleans up what the dead server
	// left within the test; on the node double the creates here take well
	// under a second, and that none is taken for a leftover while the
	// leader runs is checked too (every sandbox answers to the end). On a
	// real node a create takes seconds to a minute, and the leader would
	// fail the other replica's creates under way: there the grace is the
	// driver's pod ready timeout, as the flag's documentation asks.
	orphanGrace := 3 * time.Second
	// Five sandboxes must fit a real node of 2 CPUs (requests = limits),
	// and the short lease must outlast a real node's create.
	cpu, shortLease := 0.0, int64(12)
	if os.Getenv("WITHRUNTIME_K8S_NODE") == "real" {
		orphanGrace, cpu, shortLease = 2*time.Minute, 0.25, 60
	}
	pg := pgtest.New(t)
	dsn := pg.NewDatabase(t)
	base := prepareServer(t)
	election := func(id string) []string {
		return []string{"--store", dsn, "--meter-interval", "1s", "--leader-election", "--leader-election-namespace", ns,
			"--leader-election-orphan-grace", orphanGrace.String(),
			"--leader-election-identity", id, "--leader-election-lease-duration", "3s",
			"--leader-election-renew-deadline", "2s", "--leader-election-retry-period", "250ms"}
	}
	replica := func(id string) *server {
		r := *base
		r.addr, r.data, r.extraArgs = freeAddr(t), t.TempDir(), election(id)
		return &r
	}
	a, b := replica("server-a"), replica("server-b")
	a.start(t)
	b.start(t)
	names := map[string]*server{"server-a": a, "server-b": b}

	var lead, other *server
	for deadline := time.Now().Add(15 * time.Second); lead == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no leader in 15 s")
		}
		if st, ok := leaderOf(a); ok && st.Leader != "" {
			lead = names[st.Leader]
		}
	}
	if lead == a {
		other = b
	} else {
		other = a
	}
	ctx := context.Background()
	clientOf := func(s *server) *withruntime.Client {
		c, err := withruntime.NewClient(withruntime.WithBaseURL("http://"+s.addr), withruntime.WithAPIKey(a.key)) // one key, valid on both (one store)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	clients := map[*server]*withruntime.Client{a: clientOf(a), b: clientOf(b)}
	otherOf := map[*server]*server{a: b, b: a}

	type made struct {
		id string
		on *server
	}
	var sandboxes []made
	for _, s := range []*server{a, b, a, b} {
		sbx, err := clients[s].Create(ctx, withruntime.Options{Template: "base", TimeoutSeconds: 300, CPU: cpu})
		if err != nil {
			t.Fatal(err)
		}
		sandboxes = append(sandboxes, made{sbx.ID(), s})
	}
	// exec runs a command in sandbox id through server s.
	exec := func(s *server, id string) {
		t.Helper()
		sbx, err := clients[s].Connect(ctx, id)
		if err != nil {
			t.Fatalf("connect %s through %s: %v", id, s.addr, err)
		}
		res, err := sbx.Run(ctx, "echo $((6*7)) "+id)
		if err != nil || res.ExitCode != 0 || res.Stdout != "42 "+id+"\n" {
			t.Fatalf("exec in %s through %s: %v %+v", id, s.addr, err, res)
		}
	}
	for _, m := range sandboxes {
		exec(otherOf[m.on], m.id) // created on one, run through the other
		exec(m.on, m.id)
	}

	// No stale state: the first sandbox is held by both servers now; one
	// deletes it, the other answers it as stopped.
	gone := sandboxes[0]
	sbx, err := clients[gone.on].Connect(ctx, gone.id)
	if err != nil {
		t.Fatal(err)
	}
	if err := sbx.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	stale, err := clients[otherOf[gone.on]].Connect(ctx, gone.id)
	if err == nil {
		_, err = stale.Run(ctx, "true")
	}
	if !errors.Is(err, withruntime.ErrSandboxStopped) {
		t.Fatalf("exec in %s (deleted through the other server) through the server that held it: %v, want sandbox stopped", gone.id, err)
	}
	sandboxes = sandboxes[1:]

	// What a dead server leaves: a pod with no record (a warm pool's, a
	// create that died between pool and record) and a record still
	// "starting" an hour ago with its pod (a create that died). Made here
	// by hand through the driver and the store, as the dead server would
	// have left them.
	orphan, stuck := leaveDebris(t, base, dsn)

	// A sandbox whose lease ends after the leader is killed: the survivor's
	// sweep ends it, and its ledger stops at its lease end.
	short, err := clients[lead].Create(ctx, withruntime.Options{Template: "base", TimeoutSeconds: shortLease, CPU: cpu})
	if err != nil {
		t.Fatal(err)
	}
	exec(other, short.ID())

	// Kill the leader, abruptly, while commands run through the survivor.
	time.Sleep(2 * time.Second) // the leader's sampler has run: the ledger has intervals of its term
	t0 := time.Now()
	lead.kill()
	for _, m := range sandboxes {
		exec(other, m.id) // before and while the survivor takes over
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if st, ok := leaderOf(other); ok && st.Leading {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the survivor does not lead 10 s after the leader was killed")
		}
	}
	t.Logf("leader killed: the survivor leads after %v", time.Since(t0).Round(time.Millisecond))
	time.Sleep(2 * time.Second) // the survivor's sampler runs too
	for _, m := range sandboxes {
		exec(other, m.id)
	}
	waitDebrisCleaned(t, base, dsn, orphan, stuck, orphanGrace)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		info, err := clients[other].Connect(ctx, short.ID())
		if errors.Is(err, withruntime.ErrLeaseEnded) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the short lease of %s did not end through the survivor: %v %v", short.ID(), info, err)
		}
	}
	all := []string{gone.id, short.ID()}
	for _, m := range sandboxes {
		sbx, err := clients[other].Connect(ctx, m.id)
		if err != nil {
			t.Fatal(err)
		}
		if err := sbx.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
		all = append(all, m.id)
	}
	checkLedger(t, dsn, all)
	assertNothingLeft(t, other)
}

// checkLedger checks each sandbox's intervals (see the test above).
func checkLedger(t *testing.T, dsn string, ids []string) {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, id := range ids {
		var created, leaseEnd int64
		var ended sql.NullInt64
		var state string
		if err := db.QueryRow(`SELECT created_at, lease_ends_at, ended_at, state FROM sandboxes WHERE id = $1`, id).
			Scan(&created, &leaseEnd, &ended, &state); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if state != "stopped" || !ended.Valid {
			t.Errorf("%s: state %s, want stopped with an end", id, state)
			continue
		}
		stoppedAt := min(ended.Int64, leaseEnd)
		rows, err := db.Query(`SELECT start_at, end_at FROM usage_intervals WHERE sandbox_id = $1 ORDER BY start_at`, id)
		if err != nil {
			t.Fatal(err)
		}
		at, n := created, 0
		var spans []string
		for rows.Next() {
			var s, e int64
			if err := rows.Scan(&s, &e); err != nil {
				t.Fatal(err)
			}
			spans = append(spans, time.UnixMilli(s).Format("15:04:05.000")+"-"+time.UnixMilli(e).Format("15:04:05.000"))
			if s != at || e <= s {
				t.Errorf("%s: interval %d is [%d, %d] ms, want it to start at %d (where the ledger stood) and end after", id, n, s, e, at)
			}
			at, n = e, n+1
		}
		rows.Close()
		if at < stoppedAt || at > stoppedAt+5000 || at > leaseEnd {
			t.Errorf("%s: the ledger ends at %d ms, want the final sample: within 5 s after the end %d, not past the lease end %d", id, at, stoppedAt, leaseEnd)
		}
		var last int64
		var closed int
		if err := db.QueryRow(`SELECT last_at, closed FROM usage_cursor WHERE sandbox_id = $1`, id).Scan(&last, &closed); err != nil {
			t.Fatalf("%s cursor: %v", id, err)
		}
		if closed == 0 || last != at {
			t.Errorf("%s: cursor at %d closed=%d, want closed at the ledger's end %d", id, last, closed, at)
		}
		t.Logf("%s: %d intervals %s", id, n, strings.Join(spans, " "))
	}
}

// leaveDebris makes what a server that died leaves: the pod of a sandbox
// with no record (orphan) and a record "starting" since an hour ago, with
// its pod (stuck).
func leaveDebris(t *testing.T, s *server, dsn string) (orphan, stuck string) {
	t.Helper()
	ctx := context.Background()
	drv, err := kdriver.New(ctx, kdriver.Config{Client: s.c.Client, Namespace: ns, AgentImage: s.images.agent, RuntimeClass: s.runtimeClass})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	orphan, stuck = "sbx_orphanpodaaaaaaa", "sbx_stuckstartaaaaaa"
	created := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	if err := st.InsertSandbox(ctx, store.Sandbox{ID: stuck, Template: "base", State: store.StateStarting, CPU: 0.25, MemoryMiB: 256,
		DiskMiB: 1024, CreatedAt: created, LeaseEndsAt: created.Add(2 * time.Hour), Driver: "kubernetes", TimeoutSeconds: 7200}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{orphan, stuck} {
		if _, err := drv.Create(ctx, driver.Spec{ID: id, RootFS: s.images.base, CPU: 0.25, // 0.25: a real node has 2 CPUs
			MemoryBytes: 256 << 20, DiskBytes: 1 << 30, TmpBytes: 64 << 20, PidsLimit: 64, LeaseEndsAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	return orphan, stuck
}

// waitDebrisCleaned waits until a leader has deleted both sandboxes (pod,
// secret, network policy: the leader killed in the middle of a destroy
// leaves the last two, which the next one deletes) and failed the stuck
// record.
func waitDebrisCleaned(t *testing.T, s *server, dsn, orphan, stuck string, grace time.Duration) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Now()
	for deadline := t0.Add(3*grace + 10*time.Second); ; time.Sleep(100 * time.Millisecond) {
		left := 0 // pods, secrets and network policies of the two
		for _, id := range []string{orphan, stuck} {
			name := "wr-" + strings.ReplaceAll(id, "_", "-")
			if _, err := s.c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
				left++
			}
			if _, err := s.c.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
				left++
			}
			if _, err := s.c.Client.NetworkingV1().NetworkPolicies(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
				left++
			}
		}
		sb, err := st.GetSandbox(ctx, stuck)
		if err != nil {
			t.Fatal(err)
		}
		if left == 0 && sb.State == store.StateStopped {
			if sb.EndReason != sandbox.EndFailed {
				t.Errorf("the stuck create ended %q, want %q", sb.EndReason, sandbox.EndFailed)
			}
			t.Logf("the leader (the killed one or the survivor, whichever led when the grace had passed) cleaned up the leftovers; %v after the survivor led", time.Since(t0).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("leftovers after %v: %d objects (pods, secrets, policies), the stuck record %s", time.Since(t0), left, sb.State)
		}
	}
}
