package gvisor

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPrepareCPUSet makes a fresh parent in the host's real cgroup v1 cpuset
// hierarchy, as runsc would on a host new to Runtime (empty cpus and mems),
// and checks that after prepareCPUSet a child can be given one core: the
// write that failed with EACCES on every new host.
func TestPrepareCPUSet(t *testing.T) {
	const root = "/sys/fs/cgroup/cpuset"
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := os.Stat(filepath.Join(root, "cpuset.cpus")); err != nil {
		t.Skip("no cgroup v1 cpuset hierarchy on this host")
	}
	name := fmt.Sprintf("withruntime-test-%d", os.Getpid())
	parent := filepath.Join(root, name)
	child := filepath.Join(parent, "child")
	t.Cleanup(func() { _ = os.Remove(child); _ = os.Remove(parent) })

	// What runsc leaves: a parent made with mkdir alone.
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(child, 0o755); err != nil {
		t.Fatal(err)
	}
	cpu := firstCPU(t, root)
	if err := os.WriteFile(filepath.Join(child, "cpuset.cpus"), []byte(cpu), 0); err == nil {
		t.Skip("this kernel fills new cpusets itself (clone_children?): nothing to prepare")
	}
	if err := os.Remove(child); err != nil {
		t.Fatal(err)
	}

	if err := prepareCPUSet(root, name); err != nil {
		t.Fatalf("prepareCPUSet: %v", err)
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		want, _ := os.ReadFile(filepath.Join(root, f))
		got, _ := os.ReadFile(filepath.Join(parent, f))
		if strings.TrimSpace(string(got)) != strings.TrimSpace(string(want)) {
			t.Errorf("%s = %q, want the root's %q", f, got, want)
		}
	}
	if err := os.Mkdir(child, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(child, "cpuset.cpus"), []byte(cpu), 0); err != nil {
		t.Fatalf("one core for a sandbox after prepareCPUSet: %v", err)
	}
	// A second call on a prepared parent changes nothing and succeeds.
	if err := prepareCPUSet(root, name); err != nil {
		t.Fatalf("prepareCPUSet again: %v", err)
	}
	// A host without the hierarchy needs nothing.
	if err := prepareCPUSet(t.TempDir(), name); err != nil {
		t.Fatalf("prepareCPUSet without a cpuset hierarchy: %v", err)
	}
}

// firstCPU is the first core of root's cpuset.cpus ("0-1,4" gives "0").
func firstCPU(t *testing.T, root string) string {
	b, err := os.ReadFile(filepath.Join(root, "cpuset.cpus"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(b)), ",")
	first, _, _ = strings.Cut(first, "-")
	return first
}

// TestPlaceCPURefusesBadRanges: a range outside the server's cores, or an
// empty one, is an error that names it; a sandbox with no cpuset cgroup is
// an error too.
func TestPlaceCPURefusesBadRanges(t *testing.T) {
	d := &Driver{hostCPUs: []int{0, 1}}
	for _, r := range [][2]int{{0, 0}, {1, 1}, {-1, 1}, {0, 3}, {2, 1}} {
		err := d.PlaceCPU(t.Context(), "sbx_none", r[0], r[1])
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("cores %d..%d of 2", r[0], r[1]-1)) {
			t.Errorf("PlaceCPU(%d, %d): %v, want an error naming the range", r[0], r[1], err)
		}
	}
	if err := d.PlaceCPU(t.Context(), "sbx_none", 0, 2); err == nil || !strings.Contains(err.Error(), "no cpuset cgroup") {
		t.Errorf("PlaceCPU of a sandbox without a cgroup: %v", err)
	}
}

// TestBootCPUs: a one-vCPU sandbox boots on the boot cores in turn (all
// the server's by default, the range BootCPUs set otherwise), a sandbox of
// more vCPUs on every core; a range that is empty or outside the server's
// cores means all of them again.
func TestBootCPUs(t *testing.T) {
	d := &Driver{hostCPUs: []int{3, 5, 7, 9}}
	boots := func(cpu float64) []string {
		var got []string
		for range 4 {
			got = append(got, d.cpusetFor(cpu))
		}
		return got
	}
	if got, want := boots(1), []string{"3", "5", "7", "9"}; !slices.Equal(got, want) {
		t.Errorf("boots on all cores: %v, want %v", got, want)
	}
	d.BootCPUs(2, 4)
	if got, want := boots(1), []string{"7", "9", "7", "9"}; !slices.Equal(got, want) {
		t.Errorf("boots on cores 2..3: %v, want %v", got, want)
	}
	if got := d.cpusetFor(2); got != "" {
		t.Errorf("a 2-vCPU boot: cpuset %q, want every core", got)
	}
	for _, r := range [][2]int{{0, 0}, {-1, 2}, {3, 5}, {3, 2}, {0, 4}} {
		d.BootCPUs(2, 4)
		d.BootCPUs(r[0], r[1])
		if from, to := d.bootRange(); from != 0 || to != 4 {
			t.Errorf("BootCPUs(%d, %d): boot cores %d..%d, want all", r[0], r[1], from, to-1)
		}
	}
}
