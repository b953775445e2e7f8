package gvisor

import (
	"os"
	"strconv"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/driver"
)

// cgroupStats reads a sandbox's CPU time and memory use straight from its
// host cgroup: the same figures `runsc events --stats` reports (runsc reads
// them there), without starting a process — metering samples every running
// sandbox every few seconds. ok is false when the cgroup cannot be read
// (then Stats asks runsc).
func cgroupStats(id string) (driver.Stats, bool) {
	now := time.Now()
	// cgroup v1: cpuacct.usage in nanoseconds.
	if b, err := os.ReadFile("/sys/fs/cgroup/cpuacct/withruntime/" + id + "/cpuacct.usage"); err == nil {
		ns, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return driver.Stats{}, false
		}
		st := driver.Stats{CPUSeconds: float64(ns) / 1e9, At: now}
		if b, err := os.ReadFile("/sys/fs/cgroup/memory/withruntime/" + id + "/memory.usage_in_bytes"); err == nil {
			st.MemoryBytes, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		}
		return st, true
	}
	// cgroup v2: usage_usec in cpu.stat.
	for _, dir := range []string{"/sys/fs/cgroup/withruntime/", "/sys/fs/cgroup/unified/withruntime/"} {
		us, ok := readKeyed(dir+id+"/cpu.stat", "usage_usec")
		if !ok {
			continue
		}
		st := driver.Stats{CPUSeconds: float64(us) / 1e6, At: now}
		if b, err := os.ReadFile(dir + id + "/memory.current"); err == nil {
			st.MemoryBytes, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		}
		return st, true
	}
	return driver.Stats{}, false
}
