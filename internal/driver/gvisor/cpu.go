package gvisor

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

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
