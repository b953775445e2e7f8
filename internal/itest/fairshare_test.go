package itest

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
	loops := time.Now()
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
		wantWeight(t, id, shares, within)
	}
	for _, sb := range busy {
		want(sb.ID, 512, 8*time.Second)
	}
	want(quiet.ID, 1024, time.Second)

	// Root inside sees no cgroup file of the host to write its weight to.
	res := a.sh(busy[0].ID, "cat /sys/fs/cgroup/cpu/cpu.shares 2>&1; echo 4096 > /sys/fs/cgroup/cpu/cpu.shares 2>&1; true")
	t.Logf("inside: %q", res.Stdout)
	if w, v1 := cpuWeight(t, busy[0].ID); v1 && w == 4096 || !v1 && w > 100 {
		t.Errorf("after root inside wrote its cpu.shares, the host's weight is %d", w)
	}

	time.Sleep(time.Until(loops.Add(13 * time.Second)))
	// The loops end after 12 s: A's sandboxes are idle and weigh a whole
	// sandbox each again.
	for _, sb := range busy {
		want(sb.ID, 1024, 20*time.Second)
	}
}

// wantWeight waits up to within for sandbox id's host CPU weight to be
// shares (cgroup v1 cpu.shares; on v2 the cpu.weight it maps to).
func wantWeight(t *testing.T, id string, shares int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		w, v1 := cpuWeight(t, id)
		want := shares
		if !v1 {
			want = max(1, int64(math.Round(float64(shares)*100/1024)))
		}
		if w == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s: CPU weight %d, want %d", id, w, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestFairShareHeavyKey (issue 25): a key that uses clearly more CPU than
// the others is heavy, and its sandboxes weigh a sixteenth of a light
// key's, so the light key's threads run first when they wake, and run on
// other host cores than the light key's (on a host of two or more); once
// it no longer does, it weighs a whole sandbox again and may run on every
// core. Key A keeps one sandbox of one vCPU busy, key B one of half a vCPU
// (its quota holds it there): A uses twice what B does. Root inside the
// heavy sandbox cannot move it back: its cpuset is a host cgroup file.
func TestFairShareHeavyKey(t *testing.T) {
	e := newEnv(t)
	a, b := e.asTenant("a"), e.asTenant("b")
	heavy := a.create(api.CreateSandboxRequest{CPU: 1})
	light := b.create(api.CreateSandboxRequest{CPU: 0.5})
	loops := time.Now()
	for _, c := range []struct {
		k  *env
		id string
	}{{a, heavy.ID}, {b, light.ID}} {
		c.k.must(http.StatusCreated, "POST", "/v1/sandboxes/"+c.id+"/processes",
			agentapi.ExecRequest{Command: "timeout 10 sh -c 'while :; do :; done'"}, nil)
	}
	wantWeight(t, heavy.ID, 1024/16, 6*time.Second)
	wantWeight(t, light.ID, 1024, time.Second)
	cores := hostCores(t)
	if len(cores) >= 2 {
		// Two present keys, one heavy: the heavy key gets half the cores
		// (rounded down), the last ones.
		k := len(cores) / 2
		wantCPUSet(t, heavy.ID, cores[len(cores)-k:], time.Second)
		wantCPUSet(t, light.ID, cores[:len(cores)-k], time.Second)
		res := a.sh(heavy.ID, "echo 0-63 > /sys/fs/cgroup/cpuset/cpuset.cpus 2>&1; cat /sys/fs/cgroup/cpuset/cpuset.cpus 2>&1; true")
		t.Logf("inside: %q", res.Stdout)
		wantCPUSet(t, heavy.ID, cores[len(cores)-k:], 0)
		// A create while the cores are divided boots on the heavy key's
		// cores, not on the light key's beside its running sandboxes;
		// read at once, it is there (or, after a round, already on the
		// light key's cores), never on every core; then it is placed.
		boot := b.create(api.CreateSandboxRequest{CPU: 0.5})
		if got := cpusetOf(t, boot.ID); got != cpuSet(cores[len(cores)-k:]) && got != cpuSet(cores[:len(cores)-k]) {
			t.Errorf("a new sandbox of the light key while the cores are divided: host cpuset %q, want the heavy key's cores %v (or, placed, the light key's)", got, cores[len(cores)-k:])
		}
		wantCPUSet(t, boot.ID, cores[:len(cores)-k], 2*time.Second)
	} else {
		t.Logf("this host lets the server use %d core(s): no cores to divide", len(cores))
	}
	// The loops end after 10 s: nobody is heavy.
	time.Sleep(time.Until(loops.Add(11 * time.Second)))
	wantWeight(t, heavy.ID, 1024, 15*time.Second)
	if len(cores) >= 2 {
		wantCPUSet(t, heavy.ID, cores, 2*time.Second)
		wantCPUSet(t, light.ID, cores, 2*time.Second)
	}
}

// hostCores lists the host cores this process (and the server in it) may
// run on, or nil without a cpuset controller (the driver then places no
// sandbox).
func hostCores(t *testing.T) []int {
	t.Helper()
	if _, err := os.Stat("/sys/fs/cgroup/cpuset/cpuset.cpus"); err != nil {
		if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err != nil || !strings.Contains(string(b), "cpuset") {
			return nil
		}
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatalf("sched_getaffinity: %v", err)
	}
	var cores []int
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			cores = append(cores, i)
		}
	}
	return cores
}

// wantCPUSet waits up to within for sandbox id's host cpuset to be cores.
func wantCPUSet(t *testing.T, id string, cores []int, within time.Duration) {
	t.Helper()
	want := make([]string, len(cores))
	for i, c := range cores {
		want[i] = strconv.Itoa(c)
	}
	deadline := time.Now().Add(within)
	for {
		got := cpusetOf(t, id)
		if got == strings.Join(want, ",") || got == cpuRange(cores) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s: host cpuset %q, want %v", id, got, cores)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cpuSet is cores as the kernel writes them in cpuset.cpus.
func cpuSet(cores []int) string {
	if r := cpuRange(cores); r != "" {
		return r
	}
	s := make([]string, len(cores))
	for i, c := range cores {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// cpuRange is the kernel's way of writing consecutive cores ("0-3").
func cpuRange(cores []int) string {
	if len(cores) == 1 {
		return strconv.Itoa(cores[0])
	}
	if cores[len(cores)-1]-cores[0] == len(cores)-1 {
		return fmt.Sprintf("%d-%d", cores[0], cores[len(cores)-1])
	}
	return ""
}

// cpusetOf reads sandbox id's host cpuset.cpus.
func cpusetOf(t *testing.T, id string) string {
	t.Helper()
	for _, dir := range cgroupsOf(id) {
		if b, err := os.ReadFile(filepath.Join(dir, "cpuset.cpus")); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("no cpuset cgroup for %s", id)
	return ""
}
