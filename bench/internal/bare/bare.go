// Package bare runs the benchmarks' bare runsc sandboxes: the baseline
// that does a Runtime sandbox's work with gVisor alone (no server, no
// agent, no network), on the same template root.
package bare

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
	"sync"
	"sync/atomic"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Runner runs the baselines' bare runsc sandboxes: bundles equal to a Runtime
// sandbox's (see internal/driver/gvisor/bundle.go: same template root
// overlaid by a file-backed layer of the same size, same /dev, /sys and
// /tmp mounts, namespaces, memory, CPU and pids limits, rlimits and
// environment), but whose process is the command itself, or `sleep
// infinity` for a sandbox to exec into, run as the sandbox user (uid 1000)
// in /workspace, with no agent, no server and no network (runsc
// --network=none; Runtime's sandboxes get a network namespace, veth and
// firewall rules unless -network=false).
//
// Runsc is the runsc binary, Rootfs the template's root filesystem, Dir the
// directory of the runsc root (Dir/runsc) and of the bundles (Dir/ID), and
// CgroupParent the cgroup (one path element) the sandboxes' cgroups are
// made under. Files, if set, are host files bind-mounted read-only into
// every sandbox, by path inside (the floor programs: FloorPath). Extra
// runsc flags come from $WITHRUNTIME_RUNSC_FLAGS, as the server's do. A
// Runner is safe for concurrent use.
//
// Defaults, when set, boots with runsc's own default flags instead of
// Runtime's (only --root and --network=none: runsc's default overlay,
// root:self, a file-backed upper layer beside the root filesystem, and no
// $WITHRUNTIME_RUNSC_FLAGS): the "bare runsc with default flags" of
// bench/workloads. Size, when set, replaces Runtime's default sandbox size
// (one vCPU, 512 MiB) with another, as Runtime's driver would turn it into
// host limits; Env, when set, replaces the process environment.
//
// Erofs, when set, is an EROFS image of Rootfs: the sandboxes boot it as
// their root through runsc's rootfs annotations (dev.gvisor.spec.rootfs.*,
// read by gVisor's kernel itself, no gofer), with the same file-backed
// upper layer (Runtime's flags) or runsc's default self-backed one.
type Runner struct {
	Runsc, Rootfs, Dir string
	CgroupParent       string
	Files              map[string]string
	Defaults           bool
	Size               *Size
	Env                []string
	Erofs              string
}

// Size is a sandbox's size as a create asks for it: vCPUs, memory and
// root filesystem writes (bytes).
type Size struct {
	CPUs                   float64
	MemoryBytes, DiskBytes int64
}

// hostLimits are the host limits Runtime's driver sets for a sandbox of
// size s (internal/driver/gvisor/bundle.go): memory plus a quarter, 64 MiB
// and 1 MiB per process (one process per 4 MiB, at most 1,024), CFS quota
// per vCPU, 2*3 host tasks per process plus 256; and the process limit.
func (s *Size) hostLimits() (mem, quota, pids, nproc int64) {
	if s == nil {
		return bareMemoryBytes, 100_000, bareHostPids, bareNproc
	}
	nproc = min(s.MemoryBytes/(4<<20), 1024)
	mem = s.MemoryBytes + s.MemoryBytes/4 + 64<<20 + nproc<<20
	return mem, int64(s.CPUs * 100_000), 2*3*nproc + 256, nproc
}

var bareSeq atomic.Int64

func newBareID(prefix string) string {
	return fmt.Sprintf("%s-%d-%05d", prefix, os.Getpid(), bareSeq.Add(1))
}

// Root is the runsc root of the sandboxes (--root).
func (b *Runner) Root() string { return filepath.Join(b.Dir, "runsc") }

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
func (b *Runner) bundle(id string, argv []string) (string, error) {
	dir := filepath.Join(b.Dir, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	mem, quota, pids, nproc := b.Size.hostLimits()
	period := uint64(100_000)
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/home/user", "LANG=C.UTF-8", "PYTHONUNBUFFERED=1"}
	if b.Env != nil {
		env = b.Env
	}
	spec := specs.Spec{
		Version: specs.Version, Hostname: "sandbox",
		Root: &specs.Root{Path: b.Rootfs},
		Process: &specs.Process{
			User: specs.User{UID: 1000, GID: 1000}, Args: argv, Cwd: "/workspace",
			Env: env,
			Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 65536, Soft: 65536},
				{Type: "RLIMIT_NPROC", Hard: uint64(nproc), Soft: uint64(nproc)}},
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "mode=755"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", fmt.Sprintf("size=%d", bareTmpBytes)}},
		},
		Linux: &specs.Linux{
			CgroupsPath: "/" + b.CgroupParent + "/" + id,
			Resources: &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: &mem},
				CPU: &specs.LinuxCPU{Quota: &quota, Period: &period}, Pids: &specs.LinuxPids{Limit: pids}},
			Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace}, {Type: specs.MountNamespace}, {Type: specs.NetworkNamespace}},
		},
	}
	for in, host := range b.Files {
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: in, Type: "bind", Source: host, Options: []string{"bind", "ro"}})
	}
	if b.Erofs != "" {
		// One bind mount, as Runtime's sandboxes have (the socket
		// directory): with no mount to serve runsc starts no gofer, and
		// then (pinned runsc) makes no file for a file-backed upper layer
		// and its kernel panics at boot ("fdDispenser out of fds").
		mnt := filepath.Join(dir, "mnt")
		if err := os.MkdirAll(mnt, 0o755); err != nil {
			return "", err
		}
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: "/run/bare", Type: "bind", Source: mnt, Options: []string{"bind", "ro"}})
		medium := "self"
		if !b.Defaults {
			medium = "dir=" + dir
		}
		spec.Annotations = map[string]string{"dev.gvisor.spec.rootfs.source": b.Erofs,
			"dev.gvisor.spec.rootfs.type": "erofs", "dev.gvisor.spec.rootfs.overlay": medium,
			"dev.gvisor.spec.rootfs.options": fmt.Sprintf("size=%d", b.diskBytes())}
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "config.json"), data, 0o600)
}

func (b *Runner) runArgs(bundle, id string, detach bool) []string {
	if b.Defaults {
		args := []string{"--root", b.Root(), "--network=none", "run"}
		if detach {
			args = append(args, "--detach")
		}
		return append(args, "--bundle", bundle, id)
	}
	disk := b.diskBytes()
	// Extra runsc flags the server passes too (WITHRUNTIME_RUNSC_FLAGS).
	args := append([]string{"--root", b.Root()}, strings.Fields(os.Getenv("WITHRUNTIME_RUNSC_FLAGS"))...)
	args = append(args, "--network=none", "--host-uds=create",
		fmt.Sprintf("--overlay2=root:dir=%s,size=%d", bundle, disk), "run")
	if detach {
		args = append(args, "--detach")
	}
	return append(args, "--bundle", bundle, id)
}

// diskBytes is the sandboxes' root filesystem writes limit.
func (b *Runner) diskBytes() int64 {
	if b.Size != nil && b.Size.DiskBytes > 0 {
		return b.Size.DiskBytes
	}
	return bareDiskBytes
}

// RunFirstOutput times `runsc run` of argv from its start to the first
// byte of its stdout, which must begin want; it then waits for the
// container to end (runsc run deletes it).
func (b *Runner) RunFirstOutput(ctx context.Context, argv []string, want string) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	id := newBareID("first")
	bundle, err := b.bundle(id, argv)
	if err != nil {
		return 0, err
	}
	defer b.Destroy(id)
	cmd := exec.Command(b.Runsc, b.runArgs(bundle, id, false)...)
	return FirstOutput(cmd, want)
}

// FirstOutput starts cmd and times it to the first byte of its stdout, which
// must begin want, then waits for it to exit 0.
func FirstOutput(cmd *exec.Cmd, want string) (time.Duration, error) {
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

// RunToExit times `runsc run` of argv (a whole bare sandbox's life: boot,
// run, exit, delete), plus removing its bundle.
func (b *Runner) RunToExit(ctx context.Context, argv []string) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	start := time.Now()
	id := newBareID("life")
	bundle, err := b.bundle(id, argv)
	if err != nil {
		return 0, err
	}
	out, err := exec.Command(b.Runsc, b.runArgs(bundle, id, false)...).CombinedOutput()
	if err != nil {
		b.Destroy(id)
		return 0, fmt.Errorf("runsc run: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if err := os.RemoveAll(bundle); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// Start boots a bare sandbox whose process is `sleep infinity`, to exec
// into or to hold idle; it returns its id.
func (b *Runner) Start(ctx context.Context, prefix string) (string, error) {
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
	cmd := exec.Command(b.Runsc, b.runArgs(bundle, id, true)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		b.Destroy(id)
		out, _ := os.ReadFile(logf.Name())
		return "", fmt.Errorf("runsc run --detach: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return id, nil
}

// Exec times `runsc exec` of argv in sandbox id as the sandbox user, to its
// exit, its output collected (which must equal want).
func (b *Runner) Exec(ctx context.Context, id string, argv []string, want string) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	args := append([]string{"--root", b.Root(), "exec", "--user", "1000:1000", "--cwd", "/workspace", id}, argv...)
	cmd := exec.Command(b.Runsc, args...)
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

// ExecScript runs `bash -c script` in sandbox id as the sandbox user in
// /workspace with the environment env (runsc exec --env), stdin as its
// standard input (nil: none), and times it to its exit; it returns its
// stdout. A non-zero exit is an error with the end of its stderr.
func (b *Runner) ExecScript(ctx context.Context, id, script string, env []string, stdin io.Reader) (time.Duration, string, error) {
	args := []string{"--root", b.Root(), "exec", "--user", "1000:1000", "--cwd", "/workspace"}
	for _, e := range env {
		args = append(args, "--env", e)
	}
	args = append(args, id, "bash", "-c", script)
	cmd := exec.CommandContext(ctx, b.Runsc, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, stdout.String(), fmt.Errorf("runsc exec %q: %w: %s", script, err, tail(stderr.String(), 2000))
	}
	return d, stdout.String(), nil
}

// tail is the last n bytes of s, trimmed.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}

// Destroy kills and deletes sandbox id (a no-op for one already gone) and
// removes its bundle.
func (b *Runner) Destroy(id string) error {
	_ = exec.Command(b.Runsc, "--root", b.Root(), "kill", id, "KILL").Run()
	var errList []error
	if out, err := exec.Command(b.Runsc, "--root", b.Root(), "delete", "--force", id).CombinedOutput(); err != nil &&
		!strings.Contains(string(out), "does not exist") {
		errList = append(errList, fmt.Errorf("runsc delete %s: %w: %s", id, err, strings.TrimSpace(string(out))))
	}
	if err := os.RemoveAll(filepath.Join(b.Dir, id)); err != nil {
		errList = append(errList, err)
	}
	return errors.Join(errList...)
}

// DestroyAll destroys ids, n at a time, and returns every error.
func (b *Runner) DestroyAll(ids []string, n int) error {
	var (
		mu      sync.Mutex
		errList []error
		wg      sync.WaitGroup
		sem     = make(chan struct{}, n)
	)
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := b.Destroy(id); err != nil {
				mu.Lock()
				errList = append(errList, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errList...)
}

// List returns the bare containers runsc knows.
func (b *Runner) List() []string {
	out, _ := exec.Command(b.Runsc, "--root", b.Root(), "list", "--quiet").Output()
	return strings.Fields(string(out))
}

// Cgroups lists the bare sandboxes' cgroups left on the host.
func (b *Runner) Cgroups() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + b.CgroupParent + "/*/cgroup.procs")
	for i := range dirs {
		dirs[i] = filepath.Dir(dirs[i])
	}
	return dirs
}

// Sweep destroys every bare container, unmounts the network namespace runsc
// pins in its root, and removes the bare cgroups and their parent.
func (b *Runner) Sweep() error {
	var errList []error
	if _, err := os.Stat(b.Root()); err == nil {
		for _, id := range b.List() {
			if err := b.Destroy(id); err != nil {
				errList = append(errList, err)
			}
		}
		nullNetns := filepath.Join(b.Root(), "null-netns")
		for i := 0; i < 100 && unix.Unmount(nullNetns, unix.MNT_DETACH) == nil; i++ {
		}
	}
	for _, d := range b.Cgroups() {
		if err := rmdirRetry(d); err != nil {
			errList = append(errList, err)
		}
	}
	parents, _ := filepath.Glob("/sys/fs/cgroup/*/" + b.CgroupParent)
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

// Checkpoint boots a bare sandbox of `sleep infinity` (as Start), saves it
// with `runsc checkpoint` into a new image directory under Dir and destroys
// it; it returns the image's directory, for RestoreExec.
func (b *Runner) Checkpoint(ctx context.Context) (string, error) {
	id, err := b.Start(ctx, "ckpt")
	if err != nil {
		return "", err
	}
	defer b.Destroy(id)
	img := filepath.Join(b.Dir, newBareID("image"))
	if err := os.MkdirAll(img, 0o700); err != nil {
		return "", err
	}
	if out, err := exec.CommandContext(ctx, b.Runsc, "--root", b.Root(), "checkpoint", "--image-path", img, id).CombinedOutput(); err != nil {
		return "", fmt.Errorf("runsc checkpoint: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return img, nil
}

// RestoreExec times a bare sandbox restored from img (Checkpoint's image)
// with `runsc restore --detach --background`, as Runtime restores, then
// `runsc exec` of argv in it to its exit, whose stdout must equal want:
// the least a create from a snapshot can cost on runsc before the command
// gives its output. The sandbox is destroyed after.
func (b *Runner) RestoreExec(ctx context.Context, img string, argv []string, want string) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	id := newBareID("restore")
	bundle, err := b.bundle(id, []string{"sleep", "infinity"})
	if err != nil {
		return 0, err
	}
	defer b.Destroy(id)
	var args []string
	for _, a := range b.runArgs(bundle, id, true) {
		if a == "run" {
			args = append(args, "restore", "--background", "--image-path", img)
			continue
		}
		args = append(args, a)
	}
	logf, err := os.Create(filepath.Join(bundle, "console.log"))
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	cmd := exec.Command(b.Runsc, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(logf.Name())
		return 0, fmt.Errorf("runsc restore: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if _, err := b.Exec(ctx, id, argv, want); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}
