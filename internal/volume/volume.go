// Package volume keeps volumes on this host's disk: one sparse ext4 image
// file per volume, attached to a loop device and mounted by the host with
// nosuid,nodev,discard. A sandbox gets the volume's data directory as a bind
// mount (the gVisor driver's Spec.Volumes); the file API opens it with
// os.Root.
//
// Why this form (issue 28). The size must be a hard quota that holds
// against root inside a sandbox, and the contents must survive sandboxes,
// pauses and server restarts:
//   - A filesystem of exactly the volume's size is the quota: a write past it
//     is ENOSPC inside the sandbox, from the host's kernel, whatever the
//     sandbox does; inodes are bounded too (one volume cannot exhaust the
//     host's). The image is sparse and mounted with discard, so the host's
//     free space drops only by what is written (at most the size) and comes
//     back when files are deleted.
//   - Nothing a sandbox names reaches the host: the image and its mount
//     point are under the driver's state directory, named by the volume's id
//     (made by the server, never by a caller), and the sandbox sees only the
//     data directory inside the mounted filesystem. Links (symbolic or hard)
//     made inside resolve inside that filesystem: a hard link cannot cross
//     filesystems, and a symbolic link is resolved by gVisor's kernel within
//     the sandbox's own mount tree (and by os.Root within the data directory
//     on the host). Device nodes cannot be made on it from a sandbox (gVisor's
//     gofer refuses mknod of devices) and would not open on the host (nodev);
//     setuid bits do not apply inside (the bind mount is nosuid) nor on the
//     host (nosuid).
//   - It needs nothing of the host's filesystem: XFS project quotas would
//     need the data directory on XFS mounted with prjquota, and a tmpfs would
//     lose the contents at a restart.
//   - A crash is a journal replay; an image that e2fsck cannot repair in
//     preen mode is reported (ErrCorrupt) and never mounted.
//
// Costs: the filesystem's own structures take part of the size (a journal
// of 4 MiB and inode tables; a 64 MiB volume holds about 54 MiB of files, a
// 1 GiB one about 990 MiB), a mounted volume holds a loop device, and each
// mount in a sandbox costs it a gofer connection (about two host threads).
package volume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrCorrupt says a volume's filesystem failed its check and was not
// mounted: its files need an administrator (e2fsck) before any use.
var ErrCorrupt = errors.New("the volume's filesystem is damaged")

// MinBytes is the smallest volume: room for the filesystem's journal and
// inode tables and a few MiB of files.
const MinBytes = 16 << 20

// Names of a volume's files under its directory.
const (
	imageName = "volume.img"
	mntName   = "mnt"
	// DataName is the directory inside the filesystem that holds the
	// volume's files: what a sandbox mounts and the file API opens. The
	// filesystem's root (with lost+found) stays the host's.
	DataName = "data"
)

var idPattern = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// Host holds the volumes under one directory. Safe for concurrent use.
type Host struct {
	dir string
	// UID and GID own a new volume's data directory (the sandbox user).
	uid, gid int

	mu sync.Mutex
	// mounted holds the volumes this Host mounted and has not unmounted.
	mounted map[string]bool
	locks   map[string]*sync.Mutex
}

// New returns the volumes under dir (made 0700 if missing), whose data
// directories the user uid:gid owns.
func New(dir string, uid, gid int) (*Host, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	h := &Host{dir: dir, uid: uid, gid: gid, mounted: map[string]bool{}, locks: map[string]*sync.Mutex{}}
	// A server that died left its host mounts: they are this Host's to
	// unmount at Close.
	ids, err := h.List()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if ours, err := h.isOurMount(id); err == nil && ours {
			h.mounted[id] = true
		}
	}
	return h, nil
}

func (h *Host) lock(id string) func() {
	h.mu.Lock()
	l := h.locks[id]
	if l == nil {
		l = &sync.Mutex{}
		h.locks[id] = l
	}
	h.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func checkID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("volume id %q is not one the server makes", id)
	}
	return nil
}

func (h *Host) volDir(id string) string { return filepath.Join(h.dir, id) }
func (h *Host) image(id string) string  { return filepath.Join(h.dir, id, imageName) }
func (h *Host) mnt(id string) string    { return filepath.Join(h.dir, id, mntName) }

// DataDir is where volume id's files are on the host while it is mounted
// (Mount): the directory a sandbox's bind mount names.
func (h *Host) DataDir(id string) string { return filepath.Join(h.mnt(id), DataName) }

// Create makes volume id of sizeBytes (a multiple of 1 MiB, at least
// MinBytes): a sparse image with an ext4 filesystem, mounted, with an
// empty data directory owned by the sandbox user. On error nothing of it
// is left.
func (h *Host) Create(ctx context.Context, id string, sizeBytes int64) (err error) {
	if err := checkID(id); err != nil {
		return err
	}
	if sizeBytes < MinBytes {
		return fmt.Errorf("volume %s: %d bytes is under the smallest volume, %d", id, sizeBytes, MinBytes)
	}
	defer h.lock(id)()
	if err := os.Mkdir(h.volDir(id), 0o700); err != nil {
		return fmt.Errorf("volume %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			_ = h.unmountLocked(id)
			_ = os.RemoveAll(h.volDir(id))
		}
	}()
	f, err := os.OpenFile(h.image(id), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("volume %s: %w", id, err)
	}
	err = f.Truncate(sizeBytes)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("volume %s: %w", id, err)
	}
	// 4 KiB blocks, no blocks reserved for root (the whole size is the
	// volume's), inode tables and journal written now rather than by a
	// kernel thread after the first mount.
	if out, err := run(ctx, "mkfs.ext4", "-q", "-F", "-b", "4096", "-m", "0", "-L", "withruntime",
		"-E", "lazy_itable_init=0,lazy_journal_init=0", h.image(id)); err != nil {
		return fmt.Errorf("volume %s: mkfs.ext4: %w: %s", id, err, out)
	}
	if err := os.Mkdir(h.mnt(id), 0o700); err != nil {
		return fmt.Errorf("volume %s: %w", id, err)
	}
	if err := h.mountLocked(ctx, id, false); err != nil {
		return err
	}
	data := h.DataDir(id)
	if err := os.Mkdir(data, 0o755); err != nil {
		return fmt.Errorf("volume %s: %w", id, err)
	}
	if err := os.Chown(data, h.uid, h.gid); err != nil {
		return fmt.Errorf("volume %s: %w", id, err)
	}
	return nil
}

// Mount makes sure volume id is mounted on the host and returns its data
// directory. A volume is mounted at its first use after a server starts
// (and stays so until Close); before a first mount that no other mount
// shares, its filesystem is checked (e2fsck in preen mode, which replays
// the journal of a host that crashed): one it cannot repair is ErrCorrupt.
func (h *Host) Mount(ctx context.Context, id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	defer h.lock(id)()
	if err := h.mountLocked(ctx, id, true); err != nil {
		return "", err
	}
	if err := h.checkData(id); err != nil {
		return "", err
	}
	return h.DataDir(id), nil
}

// mountLocked mounts volume id unless it is already; check runs e2fsck
// before a fresh attach. id's lock is held.
func (h *Host) mountLocked(ctx context.Context, id string, check bool) error {
	mnt, image := h.mnt(id), h.image(id)
	ours, err := h.isOurMount(id)
	if err != nil {
		return err
	}
	if ours {
		h.setMounted(id, true)
		return nil
	}
	if _, err := os.Stat(image); err != nil {
		return fmt.Errorf("volume %s: its image: %w", id, err)
	}
	dev, err := attachedLoop(image)
	if err != nil {
		return fmt.Errorf("volume %s: %w", id, err)
	}
	if dev == "" {
		// Nothing holds the filesystem: it may be checked, then attached.
		if check {
			if err := fsck(ctx, id, image); err != nil {
				return err
			}
		}
		var fd int
		if dev, fd, err = attachLoop(image); err != nil {
			return fmt.Errorf("volume %s: %w", id, err)
		}
		// Closed once mounted: the last close of a device that nothing
		// mounts clears it (auto-clear), so a failed mount leaves none.
		defer unix.Close(fd)
	}
	// errors=remount-ro: a fault the kernel finds later stops writes
	// instead of spreading. discard gives freed blocks back to the host.
	err = unix.Mount(dev, mnt, "ext4", unix.MS_NOSUID|unix.MS_NODEV, "errors=remount-ro,discard")
	if err != nil {
		return fmt.Errorf("volume %s: mount %s: %w", id, loopName(dev), err)
	}
	h.setMounted(id, true)
	return nil
}

// checkData requires the data directory to be a directory (never a link)
// on the volume's filesystem.
func (h *Host) checkData(id string) error {
	var st, root unix.Stat_t
	if err := unix.Lstat(h.DataDir(id), &st); err != nil {
		return fmt.Errorf("volume %s: data directory: %w", id, err)
	}
	if err := unix.Lstat(h.mnt(id), &root); err != nil {
		return fmt.Errorf("volume %s: %w", id, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Dev != root.Dev {
		return fmt.Errorf("volume %s: its data directory is not a directory of its filesystem: %w", id, ErrCorrupt)
	}
	return nil
}

// isOurMount says whether volume id's mount point has its image mounted
// on it; anything else mounted there is unmounted.
func (h *Host) isOurMount(id string) (bool, error) {
	var mnt, parent, img unix.Stat_t
	if err := unix.Lstat(h.mnt(id), &mnt); err != nil {
		return false, fmt.Errorf("volume %s: %w", id, err)
	}
	if err := unix.Lstat(h.volDir(id), &parent); err != nil {
		return false, fmt.Errorf("volume %s: %w", id, err)
	}
	if mnt.Dev == parent.Dev {
		return false, nil
	}
	if err := unix.Stat(h.image(id), &img); err != nil {
		return false, fmt.Errorf("volume %s: its image: %w", id, err)
	}
	if devNo, ino, ok := loopBacking(mnt.Dev); ok && devNo == img.Dev && ino == img.Ino {
		return true, nil
	}
	_ = unix.Unmount(h.mnt(id), unix.MNT_DETACH)
	return false, nil
}

func (h *Host) setMounted(id string, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if on {
		h.mounted[id] = true
	} else {
		delete(h.mounted, id)
	}
}

// fsck checks image with e2fsck in preen mode: it fixes what is safe to
// fix (a journal to replay, counts) and fails on anything else.
func fsck(ctx context.Context, id, image string) error {
	out, err := run(ctx, "e2fsck", "-p", image)
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() <= 2 {
		return nil // 1: errors corrected; 2: corrected, reboot wanted (root filesystems only)
	}
	if errors.As(err, &ee) {
		return fmt.Errorf("volume %s: e2fsck found damage it cannot repair alone (exit %d: %s): %w",
			id, ee.ExitCode(), tail(out, 400), ErrCorrupt)
	}
	if err != nil {
		return fmt.Errorf("volume %s: e2fsck: %w", id, err)
	}
	return nil
}

// Usage returns the bytes volume id's files take (the filesystem's used
// blocks) and the bytes its files may take in all (its capacity, less the
// filesystem's own structures). It mounts the volume.
func (h *Host) Usage(ctx context.Context, id string) (used, capacity int64, err error) {
	data, err := h.Mount(ctx, id)
	if err != nil {
		return 0, 0, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(data, &st); err != nil {
		return 0, 0, fmt.Errorf("volume %s: %w", id, err)
	}
	bs := int64(st.Bsize)
	return (int64(st.Blocks) - int64(st.Bfree)) * bs, int64(st.Blocks) * bs, nil
}

// OpenRoot mounts volume id and opens its data directory as an os.Root:
// every path through it stays inside, whatever links its files hold.
func (h *Host) OpenRoot(ctx context.Context, id string) (*os.Root, error) {
	data, err := h.Mount(ctx, id)
	if err != nil {
		return nil, err
	}
	return os.OpenRoot(data)
}

// Remove unmounts volume id and deletes its image: its files are gone.
// Removing a missing volume is not an error. A sandbox gofer that still
// holds a mount of it (a sandbox not yet destroyed) keeps the filesystem
// until it ends; its blocks are freed then.
func (h *Host) Remove(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	defer h.lock(id)()
	if err := h.unmountLocked(id); err != nil {
		return err
	}
	if err := os.RemoveAll(h.volDir(id)); err != nil {
		return fmt.Errorf("volume %s: %w", id, err)
	}
	h.mu.Lock()
	delete(h.locks, id)
	h.mu.Unlock()
	return nil
}

// unmountLocked unmounts volume id's host mount, if any. A busy mount (a
// file of it open on the host) is detached: it goes once closed.
func (h *Host) unmountLocked(id string) error {
	h.setMounted(id, false)
	for range 10 {
		err := unix.Unmount(h.mnt(id), 0)
		switch {
		case err == nil:
			continue // mounts may be stacked
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil // not a mount point (any more)
		case errors.Is(err, unix.EBUSY):
			if err := unix.Unmount(h.mnt(id), unix.MNT_DETACH); err != nil {
				return fmt.Errorf("volume %s: unmount: %w", id, err)
			}
		default:
			return fmt.Errorf("volume %s: unmount: %w", id, err)
		}
	}
	return nil
}

// List returns the ids of the volumes on this host's disk.
func (h *Host) List() ([]string, error) {
	entries, err := os.ReadDir(h.dir)
	if err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && idPattern.MatchString(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// Close unmounts every volume this Host mounted. Sandboxes that mount them
// keep their own mounts (in their gofers' namespaces); the next Host
// mounts the same loop device again at first use.
func (h *Host) Close() error {
	h.mu.Lock()
	ids := make([]string, 0, len(h.mounted))
	for id := range h.mounted {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	var errs []error
	for _, id := range ids {
		unlock := h.lock(id)
		errs = append(errs, h.unmountLocked(id))
		unlock()
	}
	return errors.Join(errs...)
}

func run(ctx context.Context, name string, args ...string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		for _, dir := range []string{"/usr/sbin", "/sbin"} {
			if _, serr := os.Stat(filepath.Join(dir, name)); serr == nil {
				path, err = filepath.Join(dir, name), nil
				break
			}
		}
	}
	if err != nil {
		return "", fmt.Errorf("%s not found: install e2fsprogs on the host", name)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return strings.TrimSpace(out.String()), err
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
