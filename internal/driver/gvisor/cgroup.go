package gvisor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// cgroupParent is the cgroup under which runsc makes each sandbox's
// (cgroupPath): /withruntime in every hierarchy.
const cgroupParent = "withruntime"

// prepareCgroups makes the sandboxes' parent cgroup usable before runsc
// creates a first sandbox under it. runsc makes missing parents itself, but
// on cgroup v1 a new cpuset cgroup starts with empty cpuset.cpus and
// cpuset.mems (cgroup.clone_children is 0 by default), and a child of a
// parent with no CPUs refuses every cpuset write with EACCES: on a host that
// had never run Runtime, every sandbox of one vCPU failed to start. Like
// runc, fill an empty parent from its own parent. cgroup v2 needs nothing:
// an empty cpuset.cpus there means the parent's effective set.
func prepareCgroups() error {
	return prepareCPUSet("/sys/fs/cgroup/cpuset", cgroupParent)
}

// prepareCPUSet makes root/name (root: a cgroup v1 cpuset hierarchy) exist
// with non-empty cpuset.cpus and cpuset.mems, copied from root where they are
// empty. A host without that hierarchy needs nothing and returns nil.
func prepareCPUSet(root, name string) error {
	if _, err := os.Stat(filepath.Join(root, "cpuset.cpus")); err != nil {
		return nil // no cgroup v1 cpuset controller here
	}
	dir := filepath.Join(root, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return cpusetError(dir, err)
	}
	// mems first: the kernel refuses tasks in a cpuset without both, and
	// writing cpus first is refused on some kernels while mems is empty.
	for _, file := range []string{"cpuset.mems", "cpuset.cpus"} {
		cur, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return cpusetError(dir, err)
		}
		if len(bytes.TrimSpace(cur)) > 0 {
			continue
		}
		want, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return cpusetError(dir, err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), bytes.TrimSpace(want), 0); err != nil {
			return cpusetError(dir, err)
		}
	}
	return nil
}

func cpusetError(dir string, err error) error {
	hint := "run the server as root on a host whose cgroup filesystem is writable"
	if errors.Is(err, unix.EROFS) {
		hint = "the cgroup filesystem is read-only here (a container?): mount it read-write or run the server on the host"
	}
	return fmt.Errorf("gvisor driver: prepare the sandboxes' cpuset cgroup %s: %w (%s)", dir, err, hint)
}
