// Package rootfs does file operations inside a template's root filesystem
// from the host without ever leaving it.
//
// A root filesystem that came from an image (or from commands run in a
// sandbox) is hostile: any path in it may be a symlink planted to point at
// the host's files. Host code therefore never hands such a path to the
// kernel's ordinary path walk. Every lookup here is an openat2(2) relative to
// a directory descriptor of the root, in one of two modes:
//
//   - Strict: no symlink is followed at all (RESOLVE_NO_SYMLINKS), for writes
//     that must land exactly where named (the layer flattener).
//   - InRoot: symlinks are followed the way the sandbox would see them, with
//     "/" and ".." clamped to the root (RESOLVE_IN_ROOT), for reading and
//     adjusting what the image set up (/etc/passwd, the CA bundle).
//
// Both refuse magic links (/proc/self/...) and crossing into another mount.
// Needs Linux 5.6 or later (openat2).
package rootfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Mode says how symlinks met while resolving a path are treated.
type Mode int

const (
	// Strict follows no symlink: a path through one fails with ErrSymlink.
	Strict Mode = iota
	// InRoot follows symlinks as the sandbox would, never out of the root.
	InRoot
)

// ErrSymlink is returned (wrapped) when a Strict lookup meets a symlink.
var ErrSymlink = errors.New("path goes through a symlink")

// Root is an open root filesystem directory. Its methods take paths
// relative to the root ("etc/passwd"; a leading "/" is allowed and means the
// root). Not safe for concurrent use with writers outside this package.
type Root struct {
	fd   int
	path string
}

// Open opens the directory dir as a Root. dir itself is trusted (it is the
// template store's own directory); what is inside is not.
func Open(dir string) (*Root, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open root %s: %w", dir, err)
	}
	return &Root{fd: fd, path: dir}, nil
}

// Close releases the root's descriptor.
func (r *Root) Close() error { return unix.Close(r.fd) }

// Path is the host path the root was opened at (for messages only).
func (r *Root) Path() string { return r.path }

// Clean turns name into a path relative to the root: "/" prefixes, "." and
// empty components are dropped. It fails for a name with a ".." component:
// callers refuse such names rather than guess what was meant.
func Clean(name string) (string, error) {
	for c := range strings.SplitSeq(name, "/") {
		if c == ".." {
			return "", fmt.Errorf("path %q contains \"..\"", name)
		}
	}
	p := path.Clean("/" + name)
	return strings.TrimPrefix(p, "/"), nil
}

func how(flags uint64, mode Mode) *unix.OpenHow {
	h := &unix.OpenHow{Flags: flags | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV}
	if mode == Strict {
		h.Resolve |= unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS
	} else {
		h.Resolve |= unix.RESOLVE_IN_ROOT
	}
	return h
}

// openat resolves rel (already Clean) under the root.
func (r *Root) openat(rel string, flags uint64, mode Mode) (int, error) {
	if rel == "" {
		rel = "."
	}
	for {
		fd, err := unix.Openat2(r.fd, rel, how(flags, mode))
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue // EAGAIN: a rename raced the lookup; retry
		}
		if errors.Is(err, unix.ELOOP) && mode == Strict {
			return -1, fmt.Errorf("/%s: %w", rel, ErrSymlink)
		}
		if errors.Is(err, unix.ENOSYS) {
			return -1, errors.New("the kernel has no openat2 (Linux 5.6 or later is needed to import images safely)")
		}
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: "/" + rel, Err: err}
		}
		return fd, nil
	}
}

// OpenDir returns an O_PATH descriptor of the directory rel. The caller
// closes it.
func (r *Root) OpenDir(rel string, mode Mode) (int, error) {
	rel, err := Clean(rel)
	if err != nil {
		return -1, err
	}
	return r.openat(rel, unix.O_PATH|unix.O_DIRECTORY, mode)
}

// MkdirAll returns an O_PATH descriptor of the directory rel, creating the
// missing directories on the way with perm (exactly: no umask) and owner
// uid:gid. Existing directories are left as they are. A component that
// exists but is not a directory fails with ENOTDIR.
func (r *Root) MkdirAll(rel string, mode Mode, perm uint32, uid, gid int) (int, error) {
	rel, err := Clean(rel)
	if err != nil {
		return -1, err
	}
	fd, err := r.openat(rel, unix.O_PATH|unix.O_DIRECTORY, mode)
	if err == nil || !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	parent, base := path.Split(rel)
	pfd, err := r.MkdirAll(parent, mode, perm, uid, gid)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	if err := MkdirAt(pfd, base, perm, uid, gid); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, fmt.Errorf("mkdir /%s: %w", rel, err)
	}
	return r.openat(rel, unix.O_PATH|unix.O_DIRECTORY, mode)
}

// MkdirAt creates the directory name in dirfd with exactly perm (setuid,
// setgid and sticky bits included) and owner uid:gid.
func MkdirAt(dirfd int, name string, perm uint32, uid, gid int) error {
	if err := unix.Mkdirat(dirfd, name, 0o700); err != nil {
		return err
	}
	return SetDirAttrs(dirfd, name, perm, uid, gid)
}

// SetDirAttrs sets the owner and mode of the directory name in dirfd,
// refusing anything that is not a directory (a symlink is not followed).
func SetDirAttrs(dirfd int, name string, perm uint32, uid, gid int) error {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fchown(fd, uid, gid); err != nil {
		return err
	}
	// After chown, which clears setuid and setgid.
	return unix.Fchmod(fd, perm&0o7777)
}

// ReadFile reads the regular file rel, at most max bytes (a larger file is an
// error). Symlinks are treated as mode says.
func (r *Root) ReadFile(rel string, mode Mode, max int64) ([]byte, error) {
	rel, err := Clean(rel)
	if err != nil {
		return nil, err
	}
	fd, err := r.openat(rel, unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK, mode)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "/"+rel)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("/%s is not a regular file (%s)", rel, st.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("/%s is over %d bytes", rel, max)
	}
	return b, nil
}

// ReadFile reads the regular file name inside the root filesystem at dir,
// following symlinks as the sandbox would but never out of dir, at most max
// bytes. A missing file is an error wrapping fs.ErrNotExist. This is how host
// code reads a file a sandbox's template provides (e.g. its CA bundle).
func ReadFile(dir, name string, max int64) ([]byte, error) {
	r, err := Open(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadFile(name, InRoot, max)
}

// WriteFile replaces rel with a new regular file holding data, with perm and
// owner uid:gid. The parent directory is resolved as mode says (and must
// exist); whatever rel was (a symlink included) is replaced by a rename, never
// written through.
func (r *Root) WriteFile(rel string, mode Mode, data []byte, perm uint32, uid, gid int) error {
	rel, err := Clean(rel)
	if err != nil {
		return err
	}
	parent, base := path.Split(rel)
	if base == "" {
		return fmt.Errorf("write %q: not a file name", rel)
	}
	pfd, err := r.openat(parent, unix.O_PATH|unix.O_DIRECTORY, mode)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	tmp := ".withruntime-" + base + ".tmp"
	_ = unix.Unlinkat(pfd, tmp, 0)
	fd, err := unix.Openat(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("write /%s: %w", rel, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Chown(uid, gid)
	}
	if err == nil {
		err = f.Chmod(os.FileMode(perm & 0o777))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(pfd, tmp, pfd, base)
	}
	if err != nil {
		_ = unix.Unlinkat(pfd, tmp, 0)
		return fmt.Errorf("write /%s: %w", rel, err)
	}
	return nil
}

// Lstat returns the attributes of rel itself (a final symlink is not
// followed; earlier components are resolved as mode says).
func (r *Root) Lstat(rel string, mode Mode) (unix.Stat_t, error) {
	var st unix.Stat_t
	rel, err := Clean(rel)
	if err != nil {
		return st, err
	}
	if rel == "" {
		return st, unix.Fstat(r.fd, &st)
	}
	parent, base := path.Split(rel)
	pfd, err := r.openat(parent, unix.O_PATH|unix.O_DIRECTORY, mode)
	if err != nil {
		return st, err
	}
	defer unix.Close(pfd)
	if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, &os.PathError{Op: "lstat", Path: "/" + rel, Err: err}
	}
	return st, nil
}

// RemoveAllAt removes name in dirfd and, for a directory, everything below
// it, never following a symlink. A missing name is not an error. name must
// be one entry of dirfd: "", ".", ".." and names with a "/" are refused
// (".." would empty dirfd's parent).
func RemoveAllAt(dirfd int, name string) error {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return fmt.Errorf("remove %q: not the name of one entry of a directory: %w", name, unix.EINVAL)
	}
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	if err := RemoveChildren(dirfd, name, nil); err != nil {
		return err
	}
	return unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
}

// RemoveChildren empties the directory name in dirfd, never following a
// symlink, except the entries keep says to keep (keep may be nil).
func RemoveChildren(dirfd int, name string, keep func(child string) bool) error {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(fd), name)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		if keep != nil && keep(n) {
			continue
		}
		if err := RemoveAllAt(fd, n); err != nil {
			return fmt.Errorf("remove %s/%s: %w", name, n, err)
		}
	}
	return nil
}

// Stat returns the attributes of what rel leads to, a final symlink
// followed or not as mode says (Strict: a symlink anywhere fails).
func (r *Root) Stat(rel string, mode Mode) (unix.Stat_t, error) {
	var st unix.Stat_t
	rel, err := Clean(rel)
	if err != nil {
		return st, err
	}
	fd, err := r.openat(rel, unix.O_PATH, mode)
	if err != nil {
		return st, err
	}
	defer unix.Close(fd)
	return st, unix.Fstat(fd, &st)
}

// SetDirAttrs sets the owner and mode of the directory rel (its parent
// resolved as mode says; rel itself must be a directory, not a symlink).
func (r *Root) SetDirAttrs(rel string, mode Mode, perm uint32, uid, gid int) error {
	rel, err := Clean(rel)
	if err != nil {
		return err
	}
	parent, base := path.Split(rel)
	if base == "" {
		base = "."
	}
	pfd, err := r.openat(parent, unix.O_PATH|unix.O_DIRECTORY, mode)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return SetDirAttrs(pfd, base, perm, uid, gid)
}
