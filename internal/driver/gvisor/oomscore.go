package gvisor

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// stubOOMScoreAdj is the host oom_score_adj of a sandbox's systrap stubs.
//
// The agent is the sandbox's OOM killer, but it is a process like the
// others: on a loaded host a command can grow faster than the agent gets
// the CPU to see it (seen in CI: 16 MiB allocations in a loop under two
// busy cores), and the sandbox reaches its host memory limit. The kernel's
// OOM killer then picks a process of the sandbox's cgroup. Under systrap
// every process inside has a host stub holding that process's memory, so
// the largest stub is the runaway command's: killing it ends that one
// command (gVisor gives it SIGKILL) and the sandbox lives on. Picking the
// sentry or the gofer instead stops the whole sandbox, so the stubs are
// made the kernel's preferred victims. (Lowering the sentry's score would
// say the same more directly but needs CAP_SYS_RESOURCE, which a server in
// a container often lacks; raising a score needs nothing.)
const stubOOMScoreAdj = 500

// preferStubsForOOM sets stubOOMScoreAdj on sandbox id's stubs: every
// process in its cgroup whose parent is in it too. The sentry and the
// gofer (whose parents are outside) keep theirs. New stubs are cloned from
// existing ones and inherit the score. Nothing here reads what a sandbox
// could write: the parent comes from the kernel's /proc/PID/stat
// (parentOf), never from a stub's command line, which lives in memory the
// sandbox shares.
func preferStubsForOOM(id string) error {
	var procs []byte
	var err error
	for _, dir := range []string{
		"/sys/fs/cgroup/memory/withruntime/" + id, // v1
		"/sys/fs/cgroup/withruntime/" + id,        // v2
	} {
		if procs, err = os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("no memory cgroup for %s: %w", id, err)
	}
	in := map[int]bool{}
	var pids []int
	for f := range strings.FieldsSeq(string(procs)) {
		if pid, err := strconv.Atoi(f); err == nil {
			in[pid] = true
			pids = append(pids, pid)
		}
	}
	stubs := 0
	for _, pid := range pids {
		if ppid, ok := parentOf(pid); !ok || !in[ppid] {
			continue
		}
		path := filepath.Join("/proc", strconv.Itoa(pid), "oom_score_adj")
		if err := os.WriteFile(path, []byte(strconv.Itoa(stubOOMScoreAdj)), 0); err != nil {
			if os.IsNotExist(err) {
				continue // it exited
			}
			return fmt.Errorf("set %s: %w", path, err)
		}
		stubs++
	}
	if stubs == 0 {
		return fmt.Errorf("no stub process found in the cgroup of %s", id)
	}
	return nil
}
