package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// bare runs the baselines' bare runsc sandboxes: bundles equal to a Runtime
// sandbox's (see internal/driver/gvisor/bundle.go: same template root
// overlaid by a file-backed layer of the same size, same /dev, /sys and
// /tmp mounts, namespaces, memory, CPU and pids limits, rlimits and
// environment), but whose process is the command itself, or `sleep
// infinity` for a sandbox to exec into, run as the sandbox user (uid 1000)
// in /workspace, with no agent, no server and no network (runsc
// --network=none; Runtime's sandboxes get a network namespace, veth and
// firewall rules unless -network=false).
type bare struct {
	runsc, rootfs, dir string
	network            bool
}

var bareSeq atomic.Int64

func newBareID(prefix string) string {
	return fmt.Sprintf("%s-%d-%05d", prefix, os.Getpid(), bareSeq.Add(1))
}

func (b *bare) root() string { return filepath.Join(b.dir, "runsc") }

// Runtime's defaults (sandbox.DefaultLimits) as the driver turns them into
// a host spec: 512 MiB + 64 MiB headroom + 1 MiB for each of the 128
// processes (512 MiB / 4 MiB), 1 vCPU, 2*3*128+256 host tasks, 2 GiB of
// root filesystem writes, a 256 MiB /tmp.
const (
	bareMemoryBytes = (512 + 64 + 128) << 20
	bareNproc       = 128
	bareHostPids    = 2*3*bareNproc + 256
	bareDiskBytes   = 2048 << 20
	bareTmpBytes    = 256 << 20
)

// bundle writes the bundle of sandbox id running argv and returns its
// directory.
func (b *bare) bundle(id string, argv []string) (string, error) {
	dir := filepath.Join(b.dir, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	mem, quota, period, pids := int64(bareMemoryBytes), int64(100_000), uint64(100_000), int64(bareHostPids)
	spec := specs.Spec{
		Version: specs.Version, Hostname: "sandbox",
		Root: &specs.Root{Path: b.rootfs},
		Process: &specs.Process{
			User: specs.User{UID: 1000, GID: 1000}, Args: argv, Cwd: "/workspace",
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
				"HOME=/home/user", "LANG=C.UTF-8", "PYTHONUNBUFFERED=1"},
			Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 65536, Soft: 65536},
				{Type: "RLIMIT_NPROC", Hard: bareNproc, Soft: bareNproc}},
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "mode=755"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", fmt.Sprintf("size=%d", bareTmpBytes)}},
		},
		Linux: &specs.Linux{
			CgroupsPath: "/" + bareCgroupParent + "/" + id,
			Resources: &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: &mem},
				CPU: &specs.LinuxCPU{Quota: &quota, Period: &period}, Pids: &specs.LinuxPids{Limit: pids}},
			Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace}, {Type: specs.MountNamespace}, {Type: specs.NetworkNamespace}},
		},
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "config.json"), data, 0o600)
}

func (b *bare) runArgs(bundle, id string, detach bool) []string {
	// Extra runsc flags the server passes too (WITHRUNTIME_RUNSC_FLAGS).
	args := append([]string{"--root", b.root()}, strings.Fields(os.Getenv("WITHRUNTIME_RUNSC_FLAGS"))...)
	args = append(args, "--network=none", "--host-uds=create",
		fmt.Sprintf("--overlay2=root:dir=%s,size=%d", bundle, bareDiskBytes), "run")
	if detach {
		args = append(args, "--detach")
	}
	return append(args, "--bundle", bundle, id)
}

// runFirstOutput times `runsc run` of argv from its start to the first
// byte of its stdout, which must begin want; it then waits for the
// container to end (runsc run deletes it).
func (b *bare) runFirstOutput(ctx context.Context, argv []string, want string) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	id := newBareID("first")
	bundle, err := b.bundle(id, argv)
	if err != nil {
		return 0, err
	}
	defer b.destroy(id)
	cmd := exec.Command(b.runsc, b.runArgs(bundle, id, false)...)
	return firstOutput(cmd, want)
}

// firstOutput starts cmd and times it to the first byte of its stdout, which
// must begin want, then waits for it to exit 0.
func firstOutput(cmd *exec.Cmd, want string) (time.Duration, error) {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	buf := make([]byte, 64)
	n, _ := stdout.Read(buf)
	d := time.Since(start)
	rest, _ := io.ReadAll(stdout)
	got := string(buf[:n]) + string(rest)
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("%s: %w: %s", filepath.Base(cmd.Path), err, strings.TrimSpace(stderr.String()))
	}
	if n == 0 || got != want {
		return 0, fmt.Errorf("%s printed %q, want %q (stderr %q)", filepath.Base(cmd.Path), got, want, stderr.String())
	}
	return d, nil
}

// runToExit times `runsc run` of argv (a whole bare sandbox's life: boot,
// run, exit, delete), plus removing its bundle.
func (b *bare) runToExit(ctx context.Context, argv []string) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	start := time.Now()
	id := newBareID("life")
	bundle, err := b.bundle(id, argv)
	if err != nil {
		return 0, err
	}
	out, err := exec.Command(b.runsc, b.runArgs(bundle, id, false)...).CombinedOutput()
	if err != nil {
		b.destroy(id)
		return 0, fmt.Errorf("runsc run: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if err := os.RemoveAll(bundle); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// start boots a bare sandbox whose process is `sleep infinity`, to exec
// into or to hold idle; it returns its id.
func (b *bare) start(ctx context.Context, prefix string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	id := newBareID(prefix)
	bundle, err := b.bundle(id, []string{"sleep", "infinity"})
	if err != nil {
		return "", err
	}
	// The sandbox inherits runsc's stdout and stderr: a file, not a pipe.
	logf, err := os.Create(filepath.Join(bundle, "console.log"))
	if err != nil {
		return "", err
	}
	defer logf.Close()
	cmd := exec.Command(b.runsc, b.runArgs(bundle, id, true)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		b.destroy(id)
		out, _ := os.ReadFile(logf.Name())
		return "", fmt.Errorf("runsc run --detach: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return id, nil
}

// exec times `runsc exec` of argv in sandbox id as the sandbox user, to its
// exit, its output collected (which must equal want).
func (b *bare) exec(ctx context.Context, id string, argv []string, want string) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	args := append([]string{"--root", b.root(), "exec", "--user", "1000:1000", "--cwd", "/workspace", id}, argv...)
	cmd := exec.Command(b.runsc, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("runsc exec %q: %w: %s", argv, err, strings.TrimSpace(stderr.String()))
	}
	if stdout.String() != want {
		return 0, fmt.Errorf("runsc exec %q printed %q, want %q", argv, stdout.String(), want)
	}
	return d, nil
}

// destroy kills and deletes sandbox id (a no-op for one already gone) and
// removes its bundle.
func (b *bare) destroy(id string) error {
	_ = exec.Command(b.runsc, "--root", b.root(), "kill", id, "KILL").Run()
	var errList []error
	if out, err := exec.Command(b.runsc, "--root", b.root(), "delete", "--force", id).CombinedOutput(); err != nil &&
		!strings.Contains(string(out), "does not exist") {
		errList = append(errList, fmt.Errorf("runsc delete %s: %w: %s", id, err, strings.TrimSpace(string(out))))
	}
	if err := os.RemoveAll(filepath.Join(b.dir, id)); err != nil {
		errList = append(errList, err)
	}
	return errors.Join(errList...)
}

// list returns the bare containers runsc knows.
func (b *bare) list() []string {
	out, _ := exec.Command(b.runsc, "--root", b.root(), "list", "--quiet").Output()
	return strings.Fields(string(out))
}

// cgroups lists the bare sandboxes' cgroups left on the host.
func bareCgroups() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + bareCgroupParent + "/*/cgroup.procs")
	for i := range dirs {
		dirs[i] = filepath.Dir(dirs[i])
	}
	return dirs
}

// sweep destroys every bare container, unmounts the network namespace runsc
// pins in its root, and removes the bare cgroups and their parent.
func (b *bare) sweep() error {
	var errList []error
	if _, err := os.Stat(b.root()); err == nil {
		for _, id := range b.list() {
			if err := b.destroy(id); err != nil {
				errList = append(errList, err)
			}
		}
		nullNetns := filepath.Join(b.root(), "null-netns")
		for i := 0; i < 100 && unix.Unmount(nullNetns, unix.MNT_DETACH) == nil; i++ {
		}
	}
	for _, d := range bareCgroups() {
		if err := rmdirRetry(d); err != nil {
			errList = append(errList, err)
		}
	}
	parents, _ := filepath.Glob("/sys/fs/cgroup/*/" + bareCgroupParent)
	for _, d := range parents {
		if err := rmdirRetry(d); err != nil {
			errList = append(errList, err)
		}
	}
	return errors.Join(errList...)
}

func rmdirRetry(dir string) error {
	var err error
	for i := 0; i < 50; i++ {
		if err = unix.Rmdir(dir); err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, err)
}

// hostFirstOutput times the host's own python3 (the floor): start to first
// byte of output.
func hostFirstOutput(python string, argv []string, want string) (time.Duration, error) {
	cmd := exec.Command(python, argv[1:]...)
	cmd.Env = benchEnv
	return firstOutput(cmd, want)
}

// benchEnv is the environment of the host and bubblewrap baselines.
var benchEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "PYTHONUNBUFFERED=1"}

// bwrapFirstOutput times bubblewrap running argv over the template's root
// (read-only), with fresh /proc, /dev and /tmp and every namespace
// unshared: a container without gVisor.
func bwrapFirstOutput(bwrap, rootfs string, argv []string, want string) (time.Duration, error) {
	args := append([]string{"--ro-bind", rootfs, "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--unshare-all", "--die-with-parent", "--chdir", "/workspace", "--"}, argv...)
	cmd := exec.Command(bwrap, args...)
	cmd.Env = benchEnv
	return firstOutput(cmd, want)
}
