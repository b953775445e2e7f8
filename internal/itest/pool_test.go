package itest

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/server"
)

func withPool(size int) option {
	return func(c *server.Config) { c.Pool = sandbox.PoolConfig{Size: size} }
}

// waitPoolReady waits until the health route says base has n sandboxes
// ready.
func (e *env) waitPoolReady(n int) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var h api.Health
		e.must(http.StatusOK, "GET", "/v1/health", nil, &h)
		if h.Pool["base"].Ready == n && h.Pool["base"].Size > 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("warm pool: %+v after 60 s, want %d ready", h.Pool, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// uptime is how long the sandbox's kernel has run, from /proc/uptime.
func (e *env) uptime(id string) float64 {
	e.t.Helper()
	res := e.sh(id, "cat /proc/uptime")
	f := strings.Fields(res.Stdout)
	if len(f) == 0 {
		e.t.Fatalf("/proc/uptime: %+v", res)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

// TestPoolClaim: a create of the default shape takes a sandbox that booted
// before it was asked for, with the create's own env, metadata, lease and
// network policy, billed from the claim; pooled sandboxes are nobody's until
// then.
func TestPoolClaim(t *testing.T) {
	e := newEnv(t, withPool(2))
	e.waitPoolReady(2)
	var list api.SandboxList
	e.must(http.StatusOK, "GET", "/v1/sandboxes", nil, &list)
	if len(list.Sandboxes) != 0 {
		t.Fatalf("pooled sandboxes are listed as the key's: %+v", list.Sandboxes)
	}
	// Pooled sandboxes wait at a low host CPU weight (their boots yield
	// the cores to running sandboxes); a claimed one gets the default.
	pooled, err := os.ReadDir(filepath.Join(e.dataDir, "gvisor", "sandboxes"))
	if err != nil || len(pooled) != 2 {
		t.Fatalf("pooled sandboxes on disk: %v %v", pooled, err)
	}
	for _, d := range pooled {
		if w, v1 := cpuWeight(t, d.Name()); (v1 && w != 128) || (!v1 && w != 5) {
			t.Errorf("pooled sandbox %s: cpu weight %d, want the background's (v1 shares 128, v2 weight 5)", d.Name(), w)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	before := time.Now()
	sb := e.create(api.CreateSandboxRequest{TimeoutSeconds: 60, Env: map[string]string{"GREETING": "hello pool"},
		Metadata: map[string]string{"task": "t1"}, Network: &api.NetworkPolicy{Allow: []string{"example.test"}}})
	if up := e.uptime(sb.ID); up < 1.5 {
		t.Errorf("sandbox up %.2f s: the create did not take a pooled sandbox (booted before the request)", up)
	}
	if w, v1 := cpuWeight(t, sb.ID); (v1 && w != 1024) || (!v1 && w != 100) {
		t.Errorf("claimed sandbox: cpu weight %d, want the default (v1 shares 1024, v2 weight 100)", w)
	}
	if res := e.sh(sb.ID, `echo "$GREETING"`); res.Stdout != "hello pool\n" {
		t.Errorf("env of the create not applied: %+v", res)
	}
	got := e.get(sb.ID)
	if got.Metadata["task"] != "t1" || got.CreatedAt.Before(before.Add(-time.Second)) ||
		got.LeaseEndsAt.Sub(got.CreatedAt) != 60*time.Second {
		t.Errorf("record of the claimed sandbox: %+v", got)
	}
	var pol api.NetworkPolicy
	e.must(http.StatusOK, "GET", "/v1/sandboxes/"+sb.ID+"/network", nil, &pol)
	if len(pol.Allow) != 1 || pol.Allow[0] != "example.test" {
		t.Errorf("network policy of the claimed sandbox: %+v", pol)
	}
	// The pool refills behind the claim.
	e.waitPoolReady(2)

	// Another CPU count that shows as many CPUs inside (0.5 and the
	// default 1 both show 1) is a claim too: the host cgroup's quota follows.
	time.Sleep(1500 * time.Millisecond)
	half := e.create(api.CreateSandboxRequest{CPU: 0.5})
	if up := e.uptime(half.ID); up < 1.5 {
		t.Errorf("a create with cpu 0.5 did not take a pooled sandbox (up %.2f s)", up)
	}
	if q := cpuQuota(t, half.ID); q != 50000 {
		t.Errorf("cpu 0.5: the cgroup quota is %d µs per 100 ms, want 50000", q)
	}
	e.waitPoolReady(2)
	// Two CPUs show as two inside, which gVisor fixes at boot (C24): cold,
	// and the pool is left alone.
	two := e.create(api.CreateSandboxRequest{CPU: 2})
	if up := e.uptime(two.ID); up > 1.5 {
		t.Errorf("a create with cpu 2 took a pooled sandbox of 1 CPU (up %.2f s)", up)
	}
	if q := cpuQuota(t, two.ID); q != 200000 {
		t.Errorf("cpu 2: the cgroup quota is %d µs per 100 ms, want 200000", q)
	}
	e.waitPoolReady(2)

	// Another memory size is fixed when gVisor boots: it starts cold and
	// leaves the pool alone.
	e.create(api.CreateSandboxRequest{MemoryMiB: 1024})
	var h api.Health
	e.must(http.StatusOK, "GET", "/v1/health", nil, &h)
	if h.Pool["base"].Ready != 2 {
		t.Errorf("a create of another memory size took from the pool: %+v", h.Pool)
	}
}

func (e *env) mustOK(id string) {
	e.t.Helper()
	if res := e.sh(id, "true"); res.ExitCode != 0 {
		e.t.Fatalf("sandbox %s: %+v", id, res)
	}
}

// TestPoolBurst: more concurrent creates than the pool holds all succeed
// (the rest start cold), each with a sandbox of its own, and nothing leaks
// (the harness checks at the end, pooled sandboxes included).
func TestPoolBurst(t *testing.T) {
	e := newEnv(t, withPool(2))
	e.waitPoolReady(2)
	const n = 6
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := e.try("POST", "/v1/sandboxes", api.CreateSandboxRequest{Env: map[string]string{"N": strconv.Itoa(i)}})
			if o.err != nil || o.status != http.StatusCreated {
				t.Errorf("create %d: %v", i, o)
				return
			}
			var sb api.Sandbox
			if err := json.Unmarshal(o.body, &sb); err != nil {
				t.Error(err)
				return
			}
			ids[i] = sb.ID
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, id := range ids {
		if id == "" {
			continue
		}
		if seen[id] {
			t.Fatalf("sandbox %s handed out twice", id)
		}
		seen[id] = true
		res := e.exec(id, agentapi.ExecRequest{Command: `echo "$N"`})
		if res.Stdout != strconv.Itoa(i)+"\n" {
			t.Errorf("create %d got env %q", i, res.Stdout)
		}
	}
}

// cpuQuota reads the CFS quota (µs per 100 ms period) of a sandbox's host
// cgroup, v1 or v2.
func cpuQuota(t *testing.T, id string) int64 {
	t.Helper()
	for _, dir := range cgroupsOf(id) {
		if b, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us")); err == nil {
			v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			return v
		}
		if b, err := os.ReadFile(filepath.Join(dir, "cpu.max")); err == nil {
			v, _ := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
			return v
		}
	}
	t.Fatalf("no cpu cgroup for %s", id)
	return 0
}

// cpuWeight reads the CPU weight of a sandbox's host cgroup: v1
// cpu.shares (v1 true) or v2 cpu.weight.
func cpuWeight(t *testing.T, id string) (w int64, v1 bool) {
	t.Helper()
	for _, dir := range cgroupsOf(id) {
		for _, f := range []string{"cpu.shares", "cpu.weight"} {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
				v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
				return v, f == "cpu.shares"
			}
		}
	}
	t.Fatalf("no cpu cgroup for %s", id)
	return 0, false
}
