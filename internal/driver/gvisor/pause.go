package gvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/driver"
)

var _ driver.Pauser = (*Driver)(nil)

// Pause and resume are gVisor's checkpoint and restore (measured with the
// pinned runsc; docs/ARCHITECTURE.md has the figures):
//
//   - `runsc checkpoint --leave-running` saves the whole sandbox — its
//     kernel, every process's memory and the file-backed overlay that holds
//     its disk (a private memory file of the sentry, so the image holds the
//     disk's used blocks and the filestore itself need not be kept) — into
//     three files (checkpoint.img, pages_meta.img, pages.img). Without
//     --leave-running a failed save kills the sandbox; with it, a failed save
//     leaves it running, and a successful one is followed by a kill.
//   - The agent must first close its listener: a socket bound on the host
//     (--host-uds=create) cannot be saved, and the save fails. Connections
//     the sentry accepted from the host are closed by the save.
//   - `runsc restore --detach --bundle B --image-path I` with the flags of
//     `runsc run` boots a new sandbox process from the image in the bundle's
//     spec: the same cgroup path (limits from the spec), the network
//     namespace the spec names (its addresses and routes are read again, so
//     a namespace made anew, even with another address, works), the bind
//     mounts read again from the host (resolv.conf rewritten in place is
//     seen). The restored agent listens again (internal/agent/checkpoint.go)
//     and the host dials it with the usual checks (channel.go). With
//     --background (the image is uncompressed) the memory is read after
//     the command returns, from the files it opened: resume→first output of
//     an idle sandbox fell from about 930 to 370 ms, of one holding 200 MiB
//     of Python objects from 620 to 550 ms; the image directory may be
//     removed once the store says running (open files stay readable).
//
// The image lives in <sandbox dir>/images, which is never mounted into the
// sandbox: nothing inside can name, plant or read a file there. images/new
// is a checkpoint being written (a fresh empty directory every time, which
// runsc fills with files it creates exclusively); images/current the image
// of a paused sandbox. The socket directory's tmpfs stays mounted while
// the sandbox is paused (a file root held open there must exist at the
// restore).

const (
	imagesDir = "images"
	imageNew  = "new"
	imageCur  = "current"
)

// checkpointTimeout bounds `runsc checkpoint` and `runsc restore` (a few
// hundred ms for small sandboxes; the image's size in disk writes or reads
// for large ones). Like `runsc run` they are never killed half-way.
const checkpointTimeout = 10 * time.Minute

// agentRelisten is how long the agent may stay without a listener after a
// pause that did not happen: it listens again at once after a failed save,
// and after agent.checkpointWait (10 s) when no checkpoint came at all.
const agentRelisten = 20 * time.Second

// imageHeadroom is the free space a pause needs on the host beyond the
// image's estimate (imageNeed).
const imageHeadroom = 64 << 20

// Pause implements driver.Pauser.
func (d *Driver) Pause(ctx context.Context, id string, raw []byte, commit func(driver.Image) error) error {
	if _, err := pausable(raw); err != nil {
		return fmt.Errorf("gvisor pause %s: %w", id, err)
	}
	dir := d.sandboxDir(id)
	images := filepath.Join(dir, imagesDir)
	newDir := filepath.Join(images, imageNew)
	if err := freshDir(images, newDir); err != nil {
		return fmt.Errorf("gvisor pause %s: %w", id, err)
	}
	fail := func(err error) error {
		_ = os.RemoveAll(images)
		return fmt.Errorf("gvisor pause %s: %w", id, err)
	}
	if err := checkSpace(images, d.imageNeed(ctx, id)); err != nil {
		return fail(err)
	}
	sockDir := filepath.Join(dir, "sock")
	if name, err := boundSocket(sockDir); err != nil || name != "" {
		if err == nil {
			err = fmt.Errorf("%w: something in the sandbox made the socket %s in %s, and a socket bound on the host cannot be saved; remove it (and stop what listens on it) and pause again",
				driver.ErrNotSavable, name, socketDirInSandbox)
		}
		return fail(err)
	}
	agent := newAgentDialer(id, sockDir)
	if err := prepareCheckpoint(ctx, agent); err != nil {
		// The agent may have let go of its listener all the same.
		_ = waitReady(context.WithoutCancel(ctx), agent, agentRelisten)
		return fail(fmt.Errorf("the agent did not prepare for the checkpoint: %w", err))
	}
	ckCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkpointTimeout)
	defer cancel()
	if _, err := d.runsc(ckCtx, nil, "checkpoint", "--leave-running", "--image-path", newDir, id); err != nil {
		// --leave-running: the sandbox runs on and its agent listens again.
		if werr := waitReady(context.WithoutCancel(ctx), agent, agentRelisten); werr != nil {
			err = fmt.Errorf("%w; and the agent did not answer after it: %v", err, werr)
		}
		if cerr := checkSpace(images, 0); cerr != nil {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return fail(err)
	}
	size, err := dirBytes(newDir)
	if err != nil {
		return fail(err)
	}
	// The store says paused: the copy that ran on after the save goes.
	return d.installPause(ctx, id, images, newDir, size, commit, fail)
}

// installPause makes the image saved in newDir the paused sandbox's
// current one (renamed into images and synced), has commit record it
// (size bytes), and then stops the sandbox. An error before the commit
// goes through fail (which removes images); one stopping the sandbox
// after it is returned as is, the pause being recorded.
func (d *Driver) installPause(ctx context.Context, id, images, newDir string, size int64, commit func(driver.Image) error, fail func(error) error) error {
	if err := os.Rename(newDir, filepath.Join(images, imageCur)); err != nil {
		return fail(err)
	}
	if err := syncDir(images); err != nil {
		return fail(err)
	}
	if err := commit(driver.Image{Bytes: size}); err != nil {
		return fail(err)
	}
	if err := d.unload(context.WithoutCancel(ctx), id); err != nil {
		return fmt.Errorf("gvisor pause %s: stopping the paused sandbox: %w", id, err)
	}
	return nil
}

// pausable parses a sandbox's driver state and checks that it can be
// paused (restored with the flags it was booted with).
func pausable(raw []byte) (state, error) {
	var st state
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("bad state: %w", err)
	}
	if len(st.Flags) == 0 {
		return st, errors.New("the sandbox was created by an older version of the server, which did not record how it was booted; it cannot be paused")
	}
	return st, nil
}

// Resume implements driver.Pauser.
func (d *Driver) Resume(ctx context.Context, id string, raw []byte, n *driver.Network, commit func(*driver.Handle) error) (*driver.Handle, error) {
	st, err := pausable(raw)
	if err != nil {
		return nil, fmt.Errorf("gvisor resume %s: %w", id, err)
	}
	dir := d.sandboxDir(id)
	cur := filepath.Join(dir, imagesDir, imageCur)
	if fi, err := os.Lstat(cur); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("gvisor resume %s: no image: %w", id, driver.ErrNotFound)
	}
	if filesImage(cur) {
		return d.resumeFiles(ctx, id, st, cur, n, commit)
	}
	fail := func(err error) (*driver.Handle, error) {
		_ = d.unload(context.WithoutCancel(ctx), id)
		return nil, fmt.Errorf("gvisor resume %s: %w", id, err)
	}
	// A restore interrupted by a dead server may have left a container.
	if err := d.unload(ctx, id); err != nil {
		return fail(err)
	}
	if err := d.prepareRestore(dir, n); err != nil {
		return fail(err)
	}
	// The bundle's bind mounts are read again from the host: its volumes
	// must be mounted there (a server restarted meanwhile mounts them at
	// first use).
	if _, err := d.mountVolumes(ctx, st.Volumes); err != nil {
		return fail(err)
	}
	rsCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkpointTimeout)
	defer cancel()
	// The pid file names the new sandbox process (Wait reads it).
	if err := os.Remove(filepath.Join(dir, pidFileName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(err)
	}
	args := []string{"restore", "--detach", "--background", "--pid-file", filepath.Join(dir, pidFileName),
		"--bundle", filepath.Join(dir, "bundle"), "--image-path", cur, id}
	if err := d.start(rsCtx, dir, st.Flags, args...); err != nil {
		return fail(err)
	}
	agent := newAgentDialer(id, filepath.Join(dir, "sock"))
	if err := waitReady(ctx, agent, d.cfg.ReadyTimeout); err != nil {
		return fail(fmt.Errorf("the restored agent did not answer: %w", err))
	}
	if err := d.widenCPUSet(id); err != nil {
		return fail(err)
	}
	h := &driver.Handle{ID: id, State: raw, Dial: agent.dial}
	if err := commit(h); err != nil {
		return fail(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, imagesDir)); err != nil {
		return h, fmt.Errorf("gvisor resume %s: removing the image: %w", id, err)
	}
	return h, nil
}

// prepareRestore readies a paused sandbox's directory for its restore in
// network n: the socket directory mounted and without a socket, and the
// resolv.conf and namespace of n.
func (d *Driver) prepareRestore(dir string, n *driver.Network) error {
	sockDir := filepath.Join(dir, "sock")
	if !isMountPoint(sockDir) {
		// The host rebooted meanwhile: the tmpfs went with it.
		if !exists(filepath.Join(dir, hostDirName)) { // an older sandbox's
			if err := mountSocketDir(sockDir, socketDirModeOld); err != nil {
				return err
			}
		} else {
			if err := mountSocketDir(sockDir, socketDirMode); err != nil {
				return err
			}
			if err := mountHostDir(dir, sockDir); err != nil {
				return err
			}
		}
	}
	// The socket the saved copy left (or whatever root inside put there
	// under its name) goes, so the restored agent can listen. unlinkat
	// removes the entry itself, never what a link points to.
	if err := removeEntry(sockDir, socketName); err != nil {
		return err
	}
	if n == nil {
		return nil
	}
	if err := os.WriteFile(resolvConfPath(dir), []byte(n.ResolvConf), 0o644); err != nil {
		return err
	}
	return setNetns(filepath.Join(dir, "bundle", "config.json"), n.NetnsPath)
}

// setNetns points the bundle's network namespace at path (it is the same
// unless the server's egress names changed).
func setNetns(configPath, path string) error {
	data, err := os.ReadFile(configPath)
	if err != nil {
		return err
	}
	var s specs.Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	changed := false
	for i := range s.Linux.Namespaces {
		if ns := &s.Linux.Namespaces[i]; ns.Type == specs.NetworkNamespace && ns.Path != path {
			ns.Path, changed = path, true
		}
	}
	if !changed {
		return nil
	}
	out, err := json.Marshal(&s)
	if err != nil {
		return err
	}
	return os.WriteFile(configPath, out, 0o600)
}

// RecoverPaused implements driver.Pauser.
func (d *Driver) RecoverPaused(ctx context.Context, id string) (driver.Image, error) {
	if err := d.unload(ctx, id); err != nil {
		return driver.Image{}, fmt.Errorf("gvisor recover %s: %w", id, err)
	}
	images := filepath.Join(d.sandboxDir(id), imagesDir)
	// A checkpoint being written when the server died is not the image.
	if err := os.RemoveAll(filepath.Join(images, imageNew)); err != nil {
		return driver.Image{}, fmt.Errorf("gvisor recover %s: %w", id, err)
	}
	size, err := dirBytes(filepath.Join(images, imageCur))
	if errors.Is(err, fs.ErrNotExist) {
		return driver.Image{}, fmt.Errorf("gvisor recover %s: no image: %w", id, driver.ErrNotFound)
	}
	if err != nil {
		return driver.Image{}, fmt.Errorf("gvisor recover %s: %w", id, err)
	}
	return driver.Image{Bytes: size}, nil
}

// unload stops a sandbox's container, if it has one, and removes its
// cgroups, but keeps its directory (bundle, image, socket directory).
func (d *Driver) unload(ctx context.Context, id string) error {
	// delete --force kills the sandbox (see Destroy). It fails for a
	// container runsc does not know; only then is its state asked, so a
	// pause starts one runsc, not two.
	if _, err := d.runsc(ctx, nil, "delete", "--force", id); err != nil && d.containerExists(ctx, id) {
		return err
	}
	return removeCgroups(id)
}

// pingAfterPause pings a running sandbox's agent. When a pause was under
// way (images/new exists: a server died during one), the agent may be
// waiting for a checkpoint that never comes, without a listener, so it is
// given the time it takes to listen again.
func (d *Driver) pingAfterPause(ctx context.Context, id string, agent *agentDialer) error {
	if _, err := os.Lstat(filepath.Join(d.sandboxDir(id), imagesDir, imageNew)); err != nil {
		return ping(ctx, agent)
	}
	return waitReady(ctx, agent, agentRelisten)
}

// prepareCheckpoint asks the agent to close its listener for a checkpoint.
func prepareCheckpoint(ctx context.Context, agent *agentDialer) error {
	tr := &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return agent.dial(ctx) },
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent/checkpoint", nil)
	if err != nil {
		return err
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("agent answered %s: %.200q", resp.Status, body)
	}
	return nil
}

// boundSocket returns the path (relative to the socket directory dir) of
// a socket there other than the agent's own, or "". Root inside the sandbox
// may have bound one (gVisor cannot save it) and may have filled the
// directory with anything: it is walked through directory descriptors,
// never following a link, and it holds at most socketDirInodes entries.
func boundSocket(dir string) (string, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("socket directory: %w", err)
	}
	return walkSockets(fd, "", socketDirInodes)
}

// walkSockets is boundSocket's walk of the directory fd (which it closes)
// at path rel, at most depth levels down.
func walkSockets(fd int, rel string, depth int) (string, error) {
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	names, err := f.Readdirnames(socketDirInodes + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone meanwhile
		}
		path := filepath.Join(rel, name)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFSOCK:
			if path != socketName {
				return path, nil
			}
		case unix.S_IFDIR:
			if depth <= 0 {
				continue
			}
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			if found, err := walkSockets(sub, path, depth-1); err != nil || found != "" {
				return found, err
			}
		}
	}
	return "", nil
}

// freshDir makes parent (0700) and an empty dir in it.
func freshDir(parent, dir string) error {
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Mkdir(dir, 0o700)
}

// checkSpace fails with driver.ErrNoSpace when the filesystem of dir has
// less than need + imageHeadroom bytes free.
func checkSpace(dir string, need int64) error {
	var fsst unix.Statfs_t
	if err := unix.Statfs(dir, &fsst); err != nil {
		return err
	}
	free := int64(fsst.Bavail) * fsst.Bsize
	if free < need+imageHeadroom {
		return fmt.Errorf("%w: %d MiB free where the image needs about %d MiB", driver.ErrNoSpace, free>>20, (need+imageHeadroom)>>20)
	}
	return nil
}

// imageNeed is about the most the image of sandbox id will take
// (ImageEstimate: its memory in use and its writable layer's blocks); its
// memory alone when the layer cannot be measured, 0 when nothing can.
func (d *Driver) imageNeed(ctx context.Context, id string) int64 {
	if n, err := d.ImageEstimate(ctx, id); err == nil {
		return n
	}
	st, ok := hostCgroupStats(id)
	if !ok {
		return 0
	}
	return st.MemoryBytes
}

// dirBytes is the disk space of the regular files directly in dir.
func dirBytes(dir string) (int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			return 0, err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().IsRegular() {
			n += st.Blocks * 512
		}
	}
	return n, nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// isMountPoint reports whether dir is on another device than its parent.
func isMountPoint(dir string) bool {
	var a, b unix.Stat_t
	if unix.Lstat(dir, &a) != nil || unix.Lstat(filepath.Dir(dir), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}

// removeEntry removes the entry name from directory dir without following
// links (a socket, file or link; an empty directory too). A missing entry
// is fine.
func removeEntry(dir, name string) error {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	defer unix.Close(fd)
	err = unix.Unlinkat(fd, name, 0)
	if errors.Is(err, unix.EISDIR) {
		err = unix.Unlinkat(fd, name, unix.AT_REMOVEDIR)
	}
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing %s from the socket directory: %w", name, err)
	}
	return nil
}
