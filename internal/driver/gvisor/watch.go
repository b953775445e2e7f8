package gvisor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/driver"
)

var _ driver.Watcher = (*Driver)(nil)
var _ driver.Closer = (*Driver)(nil)

// Wait implements driver.Watcher. It watches the sandbox's host process
// (runsc-sandbox, which runs gVisor's kernel and every process inside)
// through a pidfd registered with Go's poller, so a waiting sandbox costs no
// wake-ups. When the process has gone it reads the sandbox's memory cgroup to
// tell an out-of-memory kill from a crash; the cgroup stays until Destroy.
func (d *Driver) Wait(ctx context.Context, id string) (driver.Exit, error) {
	pid, ok := d.pidFromFile(id)
	if !ok {
		var err error
		pid, err = d.sandboxPid(ctx, id)
		if errors.Is(err, driver.ErrNotFound) {
			return d.exitOf(id), nil
		}
		if err != nil {
			return driver.Exit{}, err
		}
	}
	if err := waitPid(ctx, pid, id); err != nil {
		return driver.Exit{}, err
	}
	return d.exitOf(id), nil
}

// pidFileName is the file in a sandbox's directory where `runsc run` and
// `runsc restore` write the host pid of the sandbox process (--pid-file).
// The directory is the host's: nothing inside the sandbox can write there.
const pidFileName = "sandbox.pid"

// pidFromFile returns the pid that runsc wrote to the sandbox's pid file,
// when that process is alive and is sandbox id's sandbox process. Reading
// the file spares a `runsc state` per sandbox (a 100 MB Go binary started:
// several ms of CPU for every create). A missing, stale (a sandbox resumed
// since, a pid reused) or unreadable file gives ok false: the caller asks
// runsc.
func (d *Driver) pidFromFile(id string) (pid int, ok bool) {
	b, err := os.ReadFile(filepath.Join(d.sandboxDir(id), pidFileName))
	if err != nil {
		return 0, false
	}
	pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || !isSandboxProcess(pid, id) {
		return 0, false
	}
	return pid, true
}

// sandboxPid returns the host pid of a running sandbox from `runsc state`,
// or ErrNotFound.
func (d *Driver) sandboxPid(ctx context.Context, id string) (int, error) {
	out, err := d.runsc(ctx, nil, "state", id)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if !isNotExist(err) {
			return 0, fmt.Errorf("gvisor wait %s: %w", id, err)
		}
		return 0, fmt.Errorf("gvisor wait %s: %w", id, driver.ErrNotFound)
	}
	var cs struct {
		Status string `json:"status"`
		Pid    int    `json:"pid"`
	}
	if err := json.Unmarshal(out, &cs); err != nil {
		return 0, fmt.Errorf("gvisor wait %s: runsc state: %w", id, err)
	}
	if cs.Status != "running" || cs.Pid <= 0 {
		return 0, fmt.Errorf("gvisor wait %s: container is %q: %w", id, cs.Status, driver.ErrNotFound)
	}
	return cs.Pid, nil
}

// waitPid blocks until process pid, the sandbox process of sandbox id, has
// exited or ctx ends.
func waitPid(ctx context.Context, pid int, id string) error {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return pollPid(ctx, pid, id)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	// The pid came from runsc state a moment ago; make sure it was not
	// reused meanwhile: the sandbox process names its bundle (and so the id)
	// on its command line. Checked after pidfd_open, so the pidfd holds the
	// process that was checked.
	if !isSandboxProcess(pid, id) {
		return nil
	}
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		// Not registered with the poller (old kernel without pidfd poll).
		return pollPid(ctx, pid, id)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return pollPid(ctx, pid, id)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	err = rc.Read(func(fd uintptr) bool {
		// A pidfd is readable once the process has exited. Returning false
		// parks this goroutine in the poller until it is.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, perr := unix.Poll(fds, 0)
		return perr == nil && n > 0
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return pollPid(ctx, pid, id)
	}
	return nil
}

// pollPid is waitPid's fallback where pidfds cannot be polled: it checks
// every second.
func pollPid(ctx context.Context, pid int, id string) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for isSandboxProcess(pid, id) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// isSandboxProcess reports whether pid is alive (not a zombie) and is the
// sandbox process of id.
func isSandboxProcess(pid int, id string) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the last ')' (the command name may hold spaces).
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return false
	}
	return bytes.Contains(cmdline, []byte("/"+id+"/bundle"))
}

// exitOf says how a sandbox that is no longer running ended.
func (d *Driver) exitOf(id string) driver.Exit {
	var ex driver.Exit
	if n, ok := oomKills(id); ok && n > 0 {
		ex.OutOfMemory = true
		ex.Detail = fmt.Sprintf("the host killed the sandbox for going over its memory limit (%d oom kills)", n)
		return ex
	}
	if log, err := os.ReadFile(filepath.Join(d.sandboxDir(id), "console.log")); err == nil {
		ex.Detail = tail(string(log), 500)
	}
	return ex
}

// cgroupDirs returns the host cgroup directories that exist for sandbox id
// (cgroup v1: one per controller; v2: one). runsc creates them at
// /withruntime/<id> under each hierarchy's root (see ociSpec).
func cgroupDirs(id string) []string {
	var dirs []string
	for _, pattern := range []string{
		"/sys/fs/cgroup/withruntime/" + id,   // v2
		"/sys/fs/cgroup/*/withruntime/" + id, // v1 controllers, hybrid v2
	} {
		m, _ := filepath.Glob(pattern)
		dirs = append(dirs, m...)
	}
	return dirs
}

// oomKills reads how many processes the kernel's OOM killer killed in the
// sandbox's memory cgroup.
func oomKills(id string) (int64, bool) {
	for _, f := range []string{
		"/sys/fs/cgroup/memory/withruntime/" + id + "/memory.oom_control", // v1
		"/sys/fs/cgroup/withruntime/" + id + "/memory.events",             // v2
		"/sys/fs/cgroup/unified/withruntime/" + id + "/memory.events",     // hybrid
	} {
		if n, ok := readKeyed(f, "oom_kill"); ok {
			return n, true
		}
	}
	return 0, false
}

// readKeyed reads the value of key from a "key value" per line cgroup file.
func readKeyed(path, key string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// removeCgroups removes the cgroups runsc left for sandbox id. runsc delete
// normally removes them; this catches the ones a killed or racing runsc
// left behind. A cgroup that still holds processes cannot be removed.
func removeCgroups(id string) error {
	var errs []error
	for _, dir := range cgroupDirs(id) {
		// Sub-cgroups first (runsc makes none today, but be thorough).
		subs, _ := filepath.Glob(filepath.Join(dir, "*", "cgroup.procs"))
		for _, s := range subs {
			_ = unix.Rmdir(filepath.Dir(s))
		}
		var err error
		for i := 0; i < 20; i++ {
			if err = unix.Rmdir(dir); err == nil || errors.Is(err, unix.ENOENT) {
				err = nil
				break
			}
			if !errors.Is(err, unix.EBUSY) {
				break
			}
			time.Sleep(10 * time.Millisecond) // dying tasks leave shortly
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// Close implements driver.Closer. runsc pins an empty network namespace
// (for the gofers of --network=none sandboxes) with a bind mount in its root
// directory, shared by every sandbox and kept after the last one ends.
// Close unmounts it so the state directory can be removed; running
// sandboxes keep their namespaces and the next create pins a new one. It
// also unmounts the volumes' host mounts (volume.go).
func (d *Driver) Close() error {
	path := filepath.Join(d.cfg.StateDir, "runsc", "null-netns")
	// Concurrent first creates may stack mounts: unmount until none is left.
	for i := 0; i < 100 && unix.Unmount(path, unix.MNT_DETACH) == nil; i++ {
	}
	// Volumes' host mounts go; sandboxes keep their own (volume.Host.Close).
	return d.vols.Close()
}
