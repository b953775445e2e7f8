package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/driver"
)

var _ driver.StatsReader = (*Driver)(nil)

// statsTimeout bounds one GET /usage (an agent that does not answer gives
// no sample; the meter bills no CPU for it).
const statsTimeout = 5 * time.Second

// cpuSlack is the CPU time, in seconds, allowed above vCPUs × the pod's
// age, for the agent's and the clocks' granularity.
const cpuSlack = 1.0

// remember keeps sandbox id's state for Stats (made or recovered by this
// driver); forget drops it.
func (d *Driver) remember(id string, st state) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.known[id] = st
}

func (d *Driver) forget(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.known, id)
	delete(d.cpuSeen, id)
}

// Stats implements driver.StatsReader from inside the pod: there is no
// host to measure it from (a kubelet's metrics need node access the server
// does not get). CPUSeconds is what the sandbox's agent reports (GET
// /usage: the guest CPU time of every process in the sandbox, as gVisor's
// kernel counts it; gVisor's own CPU is not in it, so IsolationKnown is
// false), checked: a value that is not a finite number of seconds ≥ 0 is an
// error; it is capped at the pod's visible vCPUs × its age plus cpuSlack,
// and it never goes below what this driver reported before. MemoryBytes is
// the pod's memory limit (the sandbox's size, from the API server), not
// what it uses.
//
// What a lying agent (root in the sandbox replaced or fooled it) can gain:
// it reports only its own sandbox's CPU, so a lie moves only its own
// tenant's bill. Over-reporting is capped at what the pod's CPU limit
// allows (it could only bill itself up to its vCPUs); under-reporting or
// refusing to answer bills less CPU, never less than the billing floor
// (metering: CPUFloorVCPU × wall time); memory and wall time come from the
// record, not the agent.
//
// Stats knows the sandboxes this driver made or recovered; others (another
// replica's) are ErrNotFound.
func (d *Driver) Stats(ctx context.Context, id string) (driver.Stats, error) {
	d.mu.Lock()
	st, ok := d.known[id]
	last := d.cpuSeen[id]
	d.mu.Unlock()
	if !ok {
		return driver.Stats{}, fmt.Errorf("kubernetes stats %s: not made or recovered by this server: %w", id, driver.ErrNotFound)
	}
	pod, err := d.pods.Pods(st.Namespace).Get(st.Pod)
	if apierrors.IsNotFound(err) || err == nil && string(pod.UID) != st.UID {
		return driver.Stats{}, fmt.Errorf("kubernetes stats %s: %w", id, driver.ErrNotFound)
	}
	if err != nil {
		return driver.Stats{}, fmt.Errorf("kubernetes stats %s: %w", id, err)
	}
	var cpus float64
	var mem int64
	for _, c := range pod.Spec.Containers {
		if c.Name == mainContainer {
			cpus = float64(driver.VisibleCPUs(c.Resources.Limits.Cpu().AsApproximateFloat64()))
			mem = c.Resources.Limits.Memory().Value()
		}
	}
	start := pod.CreationTimestamp.Time
	if pod.Status.StartTime != nil {
		start = pod.Status.StartTime.Time
	}
	uctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	reported, err := agentUsage(uctx, d.dialer(st))
	if err != nil {
		return driver.Stats{}, fmt.Errorf("kubernetes stats %s: %w", id, err)
	}
	now := time.Now()
	cpu, err := saneCPU(reported, last, cpus, now.Sub(start))
	if err != nil {
		return driver.Stats{}, fmt.Errorf("kubernetes stats %s: %w", id, err)
	}
	d.mu.Lock()
	if _, ok := d.known[id]; ok {
		d.cpuSeen[id] = max(d.cpuSeen[id], cpu)
	}
	d.mu.Unlock()
	return driver.Stats{CPUSeconds: cpu, MemoryBytes: mem, At: now}, nil
}

// saneCPU checks an agent's cumulative CPU seconds: a finite number ≥ 0,
// capped at cpus × age + cpuSlack, never below last (what was reported
// before: a counter that goes back would bill the same CPU twice).
func saneCPU(reported, last, cpus float64, age time.Duration) (float64, error) {
	if math.IsNaN(reported) || math.IsInf(reported, 0) || reported < 0 {
		return 0, fmt.Errorf("the agent reported %v CPU seconds: not a CPU time", reported)
	}
	limit := cpus*max(0, age.Seconds()) + cpuSlack
	return max(last, min(reported, limit)), nil
}

// agentUsage asks the agent for GET /usage, reading at most 4 KiB.
func agentUsage(ctx context.Context, dial func(context.Context) (net.Conn, error)) (float64, error) {
	client := http.Client{Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/usage", nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("agent usage: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("agent usage: %s", resp.Status)
	}
	var u agentapi.Usage
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<10)).Decode(&u); err != nil {
		return 0, errors.Join(errors.New("agent usage: bad answer"), err)
	}
	return u.CPUSeconds, nil
}
