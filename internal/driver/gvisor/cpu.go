package gvisor

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"withruntime.dev/runtime/internal/driver"
)

var _ driver.CPUSetter = (*Driver)(nil)

// SetCPU implements driver.CPUSetter: it rewrites the CFS quota of the
// sandbox's host cgroup (the limit runsc set from the bundle at boot), v1
// cpu.cfs_quota_us or v2 cpu.max. The period stays cpuPeriodMicros.
func (d *Driver) SetCPU(ctx context.Context, id string, cpu float64) error {
	if cpu <= 0 {
		return fmt.Errorf("gvisor set cpu %s: %g vCPUs", id, cpu)
	}
	quota := int64(math.Round(cpu * cpuPeriodMicros))
	for _, dir := range cgroupDirs(id) {
		if f := filepath.Join(dir, "cpu.max"); exists(f) {
			return writeCgroup(f, strconv.FormatInt(quota, 10)+" "+strconv.Itoa(cpuPeriodMicros))
		}
		if f := filepath.Join(dir, "cpu.cfs_quota_us"); exists(f) {
			return writeCgroup(f, strconv.FormatInt(quota, 10))
		}
	}
	return fmt.Errorf("gvisor set cpu %s: no cpu cgroup found", id)
}

var _ driver.Foregrounder = (*Driver)(nil)

// CPU weights of a sandbox's host cgroup, as cgroup v1 cpu.shares (runsc
// turns them into v2 cpu.weight: 128 becomes 5; the default is 1024, or
// 100 in v2). Under contention a cgroup gets CPU time in proportion to its
// weight among its siblings (the other sandboxes), so on a core it shares
// with a running sandbox a background boot gets one ninth. Not less: at 16
// (one sixty-fifth) the warm pool's refill took 5-10 s instead of 0.6 s
// while other work kept this 2-core host busy, and a pool that does not
// refill sends the next creates to cold boots at full weight anyway.
const (
	foregroundShares = 1024
	backgroundShares = 128
	// minShares is the least weight SetCPUWeight writes, cgroup v1's
	// least: each of a heavy key's 32 busy sandboxes (the manager's
	// fair share, sandbox/fairshare.go).
	minShares = 2
)

// cpuShares is the bundle's cpu.shares: nil (the default weight) unless
// background.
func cpuShares(background bool) *uint64 {
	if !background {
		return nil
	}
	s := uint64(backgroundShares)
	return &s
}

// Foreground implements driver.Foregrounder: it writes the default weight
// to the sandbox's host cgroup, v1 cpu.shares or v2 cpu.weight.
func (d *Driver) Foreground(ctx context.Context, id string) error {
	return d.SetCPUWeight(ctx, id, 1)
}

var _ driver.CPUWeighter = (*Driver)(nil)

// SetCPUWeight implements driver.CPUWeighter: share of the default weight,
// as v1 cpu.shares (1024 × share, at least minShares) or v2 cpu.weight
// (100 × share, at least 1).
func (d *Driver) SetCPUWeight(ctx context.Context, id string, share float64) error {
	share = min(max(share, 0), 1)
	for _, dir := range cgroupDirs(id) {
		if f := filepath.Join(dir, "cpu.weight"); exists(f) {
			return writeCgroup(f, strconv.Itoa(max(1, int(math.Round(100*share)))))
		}
		if f := filepath.Join(dir, "cpu.shares"); exists(f) {
			return writeCgroup(f, strconv.Itoa(max(minShares, int(math.Round(foregroundShares*share)))))
		}
	}
	return fmt.Errorf("gvisor cpu weight %s: no cpu cgroup found", id)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func writeCgroup(path, value string) error {
	if err := os.WriteFile(path, []byte(value), 0); err != nil {
		return fmt.Errorf("gvisor set cpu: %w", err)
	}
	return nil
}

// The CPU count a sandbox sees (nproc, os.cpu_count(), /proc/cpuinfo,
// sched_getaffinity) is what gVisor's kernel is told at boot: the number of
// CPUs in the sandbox's host cpuset, lowered to ceil(quota) by
// --cpu-num-from-quota, but never below 2 that way (runsc's own floor). So a
// sandbox granted more than one vCPU sees ceil(vCPUs) through the quota and
// can run on any host core, and a sandbox of one vCPU or less is given a
// cpuset of one host core, taken in turn from the cores this server may use
// so that such sandboxes spread over the host. The count is fixed at boot;
// SetCPU changes only the quota (the warm pool serves a create only when the
// visible count stays the same: driver.VisibleCPUs).

// cpusetFor returns the host cpuset of a sandbox of cpu vCPUs: one of the
// boot cores (bootRange) in turn when it sees one CPU, "" (all cores)
// otherwise.
func (d *Driver) cpusetFor(cpu float64) string {
	if driver.VisibleCPUs(cpu) > 1 || len(d.hostCPUs) == 0 {
		return ""
	}
	from, to := d.bootRange()
	n := d.nextCPU.Add(1) - 1
	return strconv.Itoa(d.hostCPUs[from+int(n%uint64(to-from))])
}

// widenCPUSet lets a sandbox booted on one host core (cpusetFor) run on
// every boot core (bootRange: every core this server may use, unless the
// manager divided them), once its kernel has counted its CPUs: gVisor
// fixes the count it shows at boot, so programs inside still see one CPU,
// and the CFS quota still grants one vCPU, but the host may run the
// sandbox's threads on whichever of those cores is free. Left pinned, a
// sandbox that shares its core with a busy neighbour waits for that core
// while the other one idles (issue 25: another tenant's busy sandbox on the
// same core doubled an exec's p99). Called after every boot and restore (a
// restore pins again from the bundle); for a sandbox that was not pinned
// it writes the boot cores too.
func (d *Driver) widenCPUSet(id string) error {
	if len(d.hostCPUs) < 2 {
		return nil
	}
	from, to := d.bootRange()
	set := make([]string, 0, to-from)
	for _, c := range d.hostCPUs[from:to] {
		set = append(set, strconv.Itoa(c))
	}
	for _, dir := range cgroupDirs(id) {
		if f := filepath.Join(dir, "cpuset.cpus"); exists(f) {
			return writeCgroup(f, strings.Join(set, ","))
		}
	}
	return nil
}

// BootCPUs implements driver.CPUPlacer: the range is kept as from<<32|to,
// 0 (never a valid range: to > from) for all cores.
func (d *Driver) BootCPUs(from, to int) {
	if from < 0 || to > len(d.hostCPUs) || from >= to || from == 0 && to == len(d.hostCPUs) {
		d.bootCPUs.Store(0)
		return
	}
	d.bootCPUs.Store(uint64(from)<<32 | uint64(to))
}

// bootRange is the boot cores, indices from..to-1 of hostCPUs (BootCPUs).
func (d *Driver) bootRange() (from, to int) {
	if r := d.bootCPUs.Load(); r != 0 {
		return int(r >> 32), int(r & 0xffffffff)
	}
	return 0, len(d.hostCPUs)
}

var _ driver.CPUPlacer = (*Driver)(nil)

// HostCPUs implements driver.CPUPlacer: the cores this server may use (its
// own CPU affinity), 0 without a cpuset controller.
func (d *Driver) HostCPUs() int { return len(d.hostCPUs) }

// PlaceCPU implements driver.CPUPlacer: it writes cores from..to-1 of
// those this server may use to the sandbox's host cpuset (cpuset.cpus,
// cgroup v1 or v2). A write of the set the cgroup already has changes
// nothing, so the manager writes every round.
func (d *Driver) PlaceCPU(ctx context.Context, id string, from, to int) error {
	if from < 0 || to > len(d.hostCPUs) || from >= to {
		return fmt.Errorf("gvisor place cpu %s: cores %d..%d of %d", id, from, to-1, len(d.hostCPUs))
	}
	set := make([]string, 0, to-from)
	for _, c := range d.hostCPUs[from:to] {
		set = append(set, strconv.Itoa(c))
	}
	for _, dir := range cgroupDirs(id) {
		if f := filepath.Join(dir, "cpuset.cpus"); exists(f) {
			return writeCgroup(f, strings.Join(set, ","))
		}
	}
	return fmt.Errorf("gvisor place cpu %s: no cpuset cgroup found", id)
}

// allowedCPUs lists the host cores this process may run on, or nil when
// the host has no cpuset controller to pin a sandbox with (runsc refuses a
// spec's cpuset then; such sandboxes show runsc's floor of 2 CPUs).
func allowedCPUs() []int {
	if !cpusetController() {
		return nil
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var cpus []int
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus
}

// cpusetController reports whether the host mounts a cpuset controller:
// cgroup v1's hierarchy, or cpuset among the v2 root's controllers.
func cpusetController() bool {
	if exists("/sys/fs/cgroup/cpuset/cpuset.cpus") {
		return true
	}
	b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
	return err == nil && slices.Contains(strings.Fields(string(b)), "cpuset")
}
