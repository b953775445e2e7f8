package kubernetes

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/driver"
)

// The attack: an agent (root in the sandbox replaced it) lies about its
// CPU. Nonsense is refused, too much is capped at what the pod's vCPUs
// allow over its age, and a counter that goes back keeps the last value
// (so the same CPU is not billed twice).
func TestSaneCPURefusesAndCapsLies(t *testing.T) {
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1} {
		if _, err := saneCPU(bad, 3, 2, time.Minute); err == nil {
			t.Errorf("reported %v: accepted", bad)
		}
	}
	for _, c := range []struct {
		reported, last, cpus float64
		age                  time.Duration
		want                 float64
	}{
		{reported: 30, last: 10, cpus: 1, age: time.Minute, want: 30},         // honest
		{reported: 1e300, last: 10, cpus: 1, age: time.Minute, want: 61},      // capped: 1 vCPU × 60 s + slack
		{reported: 500, last: 10, cpus: 4, age: 100 * time.Second, want: 401}, // 4 vCPUs
		{reported: 2, last: 10, cpus: 1, age: time.Minute, want: 10},          // went back: the last stands
		{reported: 5, last: 0, cpus: 1, age: -time.Second, want: cpuSlack},    // a start time in the future
	} {
		got, err := saneCPU(c.reported, c.last, c.cpus, c.age)
		if err != nil || got != c.want {
			t.Errorf("saneCPU(%v, last %v, %v vCPUs, age %v) = %v, %v; want %v", c.reported, c.last, c.cpus, c.age, got, err, c.want)
		}
	}
}

// TestStatsMetersABusyLoop: a pod's busy loop shows in Stats (from the
// agent's count of its processes: on the fake node they are host
// processes, on a real node gVisor's), memory is the pod's size, and a
// sandbox this driver does not know is ErrNotFound.
func TestStatsMetersABusyLoop(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	h, err := e.d.Create(ctx, testSpec("sbx_busy"))
	if err != nil {
		t.Fatal(err)
	}
	before, err := e.d.Stats(ctx, "sbx_busy")
	if err != nil {
		t.Fatal(err)
	}
	if before.MemoryBytes != 512<<20 {
		t.Errorf("memory %d, want the pod's 512 MiB", before.MemoryBytes)
	}
	client := http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return h.Dial(ctx) }}}
	resp, err := client.Post("http://agent/exec", "application/json",
		strings.NewReader(`{"command": "timeout 2 sh -c 'while :; do :; done'; true"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("exec: %s", resp.Status)
	}
	after, err := e.d.Stats(ctx, "sbx_busy")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CPU before %.2f s, after a 2 s busy loop %.2f s", before.CPUSeconds, after.CPUSeconds)
	// Two shared cores: at least half of the loop's 2 s.
	if d := after.CPUSeconds - before.CPUSeconds; d < 1 || d > 2.6 {
		t.Errorf("the busy loop metered %.2f s of CPU, want about 2", d)
	}
	if _, err := e.d.Stats(ctx, "sbx_other"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("Stats of an unknown sandbox: %v, want ErrNotFound", err)
	}
	if err := e.d.Destroy(ctx, "sbx_busy"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.d.Stats(ctx, "sbx_busy"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("Stats after Destroy: %v, want ErrNotFound", err)
	}
	assertNothingLeft(t, e)
}
