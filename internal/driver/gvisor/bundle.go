package gvisor

import (
	"math"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"withruntime.dev/runtime/internal/driver"
)

// Paths inside the sandbox. The template reserves both mount points.
const (
	agentDirInSandbox   = "/opt/withruntime"
	agentPathInSandbox  = agentDirInSandbox + "/withruntime-agent"
	socketDirInSandbox  = "/run/withruntime"
	socketPathInSandbox = socketDirInSandbox + "/agent.sock"
	cpuPeriodMicros     = 100_000
	// memoryHeadroomBytes is what the host limit adds to the sandbox's memory
	// size for gVisor's own kernel (the sentry), so that the agent can stop a
	// runaway command before the host limit kills the whole sandbox.
	memoryHeadroomBytes = 64 << 20
)

// agentCaps are Docker's default capabilities: what root in a container
// usually has. Commands the agent runs as the sandbox user get none.
var agentCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW",
	"CAP_SYS_CHROOT", "CAP_MKNOD", "CAP_AUDIT_WRITE", "CAP_SETFCAP",
}

// ociSpec builds the OCI runtime spec of one sandbox: the agent as PID 1
// (root inside the sandbox; it drops to the sandbox user per command), the
// template as the root (gVisor overlays it, so it is never written), the
// agent binary and socket directory bind-mounted in, and the limits.
func ociSpec(spec driver.Spec, agentBinary, socketDir string) *specs.Spec {
	env := append([]string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root",
		"LANG=C.UTF-8",
		"PYTHONUNBUFFERED=1",
	}, spec.Env...)
	memLimit := spec.MemoryBytes + memoryHeadroomBytes
	quota := int64(math.Round(spec.CPU * cpuPeriodMicros))
	period := uint64(cpuPeriodMicros)
	pids := spec.PidsLimit
	tmpOpts := []string{"nosuid", "nodev", "mode=1777"}
	if spec.TmpBytes > 0 {
		tmpOpts = append(tmpOpts, "size="+itoa(spec.TmpBytes))
	}
	return &specs.Spec{
		Version:  specs.Version,
		Hostname: "sandbox",
		Root:     &specs.Root{Path: spec.RootFS, Readonly: false},
		Process: &specs.Process{
			User: specs.User{UID: 0, GID: 0},
			Args: []string{agentPathInSandbox, "--socket", socketPathInSandbox},
			Env:  env,
			Cwd:  "/",
			// The agent needs root's usual container capabilities to switch to
			// the sandbox user, chown files and signal process groups.
			Capabilities: &specs.LinuxCapabilities{
				Bounding: agentCaps, Effective: agentCaps, Permitted: agentCaps,
			},
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Hard: 65536, Soft: 65536},
			},
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "mode=755"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: tmpOpts},
			{Destination: agentDirInSandbox, Type: "bind", Source: agentBinaryDir(agentBinary), Options: []string{"rbind", "ro"}},
			{Destination: socketDirInSandbox, Type: "bind", Source: socketDir, Options: []string{"rbind", "rw"}},
		},
		Linux: &specs.Linux{
			CgroupsPath: "/withruntime/" + spec.ID,
			Resources: &specs.LinuxResources{
				Memory: &specs.LinuxMemory{Limit: &memLimit},
				CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period},
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
