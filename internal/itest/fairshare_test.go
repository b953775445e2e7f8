package itest

import (
	"net/http"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// TestFairShareWeights (issue 25): under contention each key gets one
// sandbox's share of the host CPU, however many sandboxes it keeps busy.
// Key A keeps two sandboxes busy and B one: A's two get half a sandbox's
// weight each, B's keeps a whole one; once A's loops end, A's sandboxes
// get a whole weight again. Hostile root inside cannot change its weight:
// the weight is a host cgroup file the sandbox does not see.
func TestFairShareWeights(t *testing.T) {
	e := newEnv(t)
	a, b := e.asTenant("a"), e.asTenant("b")
	var busy []api.Sandbox
	for i := 0; i < 2; i++ {
		sb := a.create(api.CreateSandboxRequest{CPU: 1})
		a.must(http.StatusCreated, "POST", "/v1/sandboxes/"+sb.ID+"/processes",
			agentapi.ExecRequest{Command: "timeout 12 sh -c 'while :; do :; done'"}, nil)
		busy = append(busy, sb)
	}
	quiet := b.create(api.CreateSandboxRequest{CPU: 1})
	b.must(http.StatusCreated, "POST", "/v1/sandboxes/"+quiet.ID+"/processes",
		agentapi.ExecRequest{Command: "timeout 12 sh -c 'while :; do :; done'"}, nil)

	// Two rounds of the rebalancing measure the loops.
	want := func(id string, shares int64, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			w, v1 := cpuWeight(t, id)
			if !v1 {
				shares = max(1, shares*100/1024)
			}
			if w == shares {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("sandbox %s: CPU weight %d, want %d", id, w, shares)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for _, sb := range busy {
		want(sb.ID, 512, 8*time.Second)
	}
	want(quiet.ID, 1024, time.Second)

	// Root inside sees no cgroup file of the host to write its weight to.
	res := a.sh(busy[0].ID, "cat /sys/fs/cgroup/cpu/cpu.shares 2>&1; echo 4096 > /sys/fs/cgroup/cpu/cpu.shares 2>&1; true")
	t.Logf("inside: %q", res.Stdout)
	if w, v1 := cpuWeight(t, busy[0].ID); v1 && w != 512 || !v1 && w != 50 {
		t.Errorf("after root inside wrote its cpu.shares, the host's weight is %d", w)
	}

	// The loops end after 12 s: A's sandboxes are idle and weigh a whole
	// sandbox each again.
	for _, sb := range busy {
		want(sb.ID, 1024, 20*time.Second)
	}
}
