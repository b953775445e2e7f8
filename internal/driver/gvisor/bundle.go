package gvisor

import (
	"math"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"withruntime.dev/runtime/internal/driver"
)

// Paths inside the sandbox. The template reserves the mount point (and
// /opt/withruntime, where sandboxes of earlier versions had the agent).
const (
	socketDirInSandbox  = "/run/withruntime"
	socketPathInSandbox = socketDirInSandbox + "/agent.sock"
	// agentPathInSandbox is in the host directory, which the host mounts
	// read-only inside the socket directory (mountHostDir).
	agentPathInSandbox = socketDirInSandbox + "/" + hostDirName + "/" + agentName
	cpuPeriodMicros    = 100_000
	// pidsPerTask and pidsBase size the host pids cgroup: each process or
	// thread inside has host tasks of its own under gVisor's systrap
	// platform (measured: about 2.3 host tasks per sleeping process), plus
	// the sentry's own threads. See hostPidsLimit.
	pidsPerTask = 3
	pidsBase    = 256
	// memoryHeadroomBytes is what the host limit adds to the sandbox's memory
	// size for gVisor's own kernel (the sentry), so that the agent can stop a
	// runaway command before the host limit kills the whole sandbox.
	memoryHeadroomBytes = 64 << 20
	// memoryHeadroomDivisor adds a quarter of the memory size to the host
	// limit: the guard's reaction time. A command filling memory grows
	// about 1 GB/s; on a loaded host the agent may get the CPU only a few
	// hundred milliseconds later (CI: two busy cores beside the sandbox
	// took a 1 GiB sandbox past 64 MiB + 256 MiB of headroom). Past the
	// host limit the host's OOM killer takes the command (see
	// preferStubsForOOM), with a small risk of taking the whole sandbox.
	memoryHeadroomDivisor = 4
	// hostBytesPerProcess is added to the host limit for every process the
	// sandbox may run (its PidsLimit). gVisor's host memory for a process
	// (a host stub process, page tables; measured about 0.2-0.3 MiB) is not
	// in the sandbox's own accounting, which the agent watches; and while a
	// fork bomb grows, the agent gets too little CPU to act, so the bomb's
	// processes can outgrow the memory size for a few seconds (forked
	// python3 processes: about 4 MiB each). This margin lets the sandbox
	// survive until the agent kills the bomb.
	hostBytesPerProcess = 1 << 20
)

// agentCaps are Docker's default capabilities: what root in a container
// usually has. Commands the agent runs as the sandbox user get none.
var agentCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW",
	"CAP_SYS_CHROOT", "CAP_MKNOD", "CAP_AUDIT_WRITE", "CAP_SETFCAP",
	// CAP_SYS_PTRACE lets the agent read the open files (/proc/PID/fd) of the
	// sandbox user's processes, to find pipelines stalled by a gVisor pipe
	// bug (see the agent's kicker); root commands can strace as a bonus.
	// ptrace is gVisor's own, inside the sandbox.
	"CAP_SYS_PTRACE",
}

// ociSpec builds the OCI runtime spec of one sandbox: the agent as PID 1
// (root inside the sandbox; it drops to the sandbox user per command), the
// template as the root (gVisor overlays it, so it is never written), the
// socket directory bind-mounted in (with the host directory mounted
// read-only inside it: the agent binary and the files for /etc), and the
// limits.
//
// Every bind mount in the bundle costs each sandbox a gofer connection:
// about two host threads (one in the gofer, one in the sentry) for the
// sandbox's whole life, measured with bench/suite memory (five mounts: 30
// threads; three: 26; this one: 24, against 19 for a bare runsc sandbox).
// So the sandbox gets the host's files through the one mount it must
// have, the socket directory, and no other.
func ociSpec(spec driver.Spec, socketDir string) *specs.Spec {
	env := append([]string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root",
		"LANG=C.UTF-8",
		"PYTHONUNBUFFERED=1",
	}, spec.Env...)
	memLimit := spec.MemoryBytes + spec.MemoryBytes/memoryHeadroomDivisor + memoryHeadroomBytes + spec.PidsLimit*hostBytesPerProcess
	quota := int64(math.Round(spec.CPU * cpuPeriodMicros))
	period := uint64(cpuPeriodMicros)
	pids := hostPidsLimit(spec.PidsLimit)
	tmpOpts := tmpfsOptions(spec.TmpBytes)
	shmOpts := tmpfsOptions(spec.ShmBytes)
	return &specs.Spec{
		Version:  specs.Version,
		Hostname: "sandbox",
		Root:     &specs.Root{Path: spec.RootFS, Readonly: false},
		Process: &specs.Process{
			User: specs.User{UID: 0, GID: 0},
			// The agent is the sandbox's OOM killer: it kills a command
			// before the sandbox's memory reaches the host limit, which is
			// memoryHeadroomBytes higher.
			Args: agentArgs(spec),
			Env:  env,
			Cwd:  "/",
			// The agent needs root's usual container capabilities to switch to
			// the sandbox user, chown files and signal process groups.
			Capabilities: &specs.LinuxCapabilities{
				Bounding: agentCaps, Effective: agentCaps, Permitted: agentCaps,
			},
			Rlimits: rlimits(spec),
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "mode=755"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: tmpOpts},
			// A tmpfs of the sentry's, like /tmp: no gofer, no host thread.
			{Destination: "/dev/shm", Type: "tmpfs", Source: "tmpfs", Options: shmOpts},
			// gVisor's own cgroups (v1), for the agent's per-command cgroups.
			{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "mode=755"}},
			{Destination: socketDirInSandbox, Type: "bind", Source: socketDir, Options: []string{"rbind", "rw"}},
		},
		Linux: &specs.Linux{
			CgroupsPath: cgroupPath(spec.ID),
			Resources: &specs.LinuxResources{
				Memory: &specs.LinuxMemory{Limit: &memLimit},
				CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period, Shares: cpuShares(spec.Background)},
				Pids:   &specs.LinuxPids{Limit: pids},
			},
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace},
				{Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.MountNamespace},
				{Type: specs.NetworkNamespace},
			},
		},
	}
}

// cgroupPath is a sandbox's host cgroup, under each hierarchy's root.
// tmpfsOptions are the mount options of a world-writable tmpfs (sticky, as
// /tmp and /dev/shm are everywhere) of at most size bytes (0: gVisor's
// default).
func tmpfsOptions(size int64) []string {
	opts := []string{"nosuid", "nodev", "mode=1777"}
	if size > 0 {
		opts = append(opts, "size="+itoa(size))
	}
	return opts
}

func cgroupPath(id string) string { return "/withruntime/" + id }

// rlimits are the agent's resource limits, inherited by every command.
//
// The pids cgroup (linux.resources.pids) caps only the host threads of
// gVisor's kernel, not the processes inside the sandbox, which gVisor
// schedules itself. gVisor does enforce RLIMIT_NPROC (per user, counting
// threads, for tasks without CAP_SYS_ADMIN or CAP_SYS_RESOURCE, which
// neither the agent nor its commands have), so that is what caps the
// processes of each user inside at PidsLimit.
func rlimits(spec driver.Spec) []specs.POSIXRlimit {
	rl := []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 65536, Soft: 65536}}
	if spec.PidsLimit > 0 {
		n := uint64(spec.PidsLimit)
		rl = append(rl, specs.POSIXRlimit{Type: "RLIMIT_NPROC", Hard: n, Soft: n})
	}
	return rl
}

// hostPidsLimit is the host pids cgroup limit for a sandbox whose users may
// each run limit processes and threads (RLIMIT_NPROC, see rlimits). It is a
// backstop that keeps the host's process table safe even if RLIMIT_NPROC is
// sidestepped (root inside can switch to further uids, each with a count of
// its own): past it gVisor cannot make the host tasks it needs and the
// sandbox fails, the host does not. It leaves room for two users (the
// sandbox user, and root for the agent and root commands) at the limit.
func hostPidsLimit(limit int64) int64 {
	if limit <= 0 {
		return 0
	}
	return 2*pidsPerTask*limit + pidsBase
}

// agentArgs is the agent's command line for spec.
func agentArgs(spec driver.Spec) []string {
	args := []string{agentPathInSandbox, "--socket", socketPathInSandbox, "--memory-bytes", itoa(spec.MemoryBytes)}
	if !spec.LeaseEndsAt.IsZero() {
		// Rounded up: the backstop must never come before the lease end.
		args = append(args, "--lease-ends-at", itoa(spec.LeaseEndsAt.Add(time.Second-1).Unix()))
	}
	return args
}
