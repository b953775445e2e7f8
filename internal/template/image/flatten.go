package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/template/rootfs"
)

// DefaultMaxBytes caps the uncompressed bytes an import writes (8 GiB).
const DefaultMaxBytes int64 = 8 << 30

// DefaultMaxEntries caps the tar entries an import applies (4 Mi), so a
// layer of millions of empty files cannot exhaust the host's inodes.
const DefaultMaxEntries int64 = 4 << 20

// Limits bound what a Flattener writes, over all the layers it applies.
type Limits struct {
	// MaxBytes caps the bytes of file content written, counted as they are
	// written (a file's full length, holes included; a file replaced by a
	// later layer still counts). 0: DefaultMaxBytes.
	MaxBytes int64
	// MaxEntries caps the tar entries applied. 0: DefaultMaxEntries.
	MaxEntries int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	return l
}

// LayerError is a layer refused by the flattener. It wraps errs.Invalid (an
// unsafe or malformed layer) or errs.TooLarge (over a cap).
type LayerError struct {
	Layer string // which layer, e.g. "layer 2/3 (sha256:…)"
	Entry string // the tar entry's name as given, "" for the layer as a whole
	Kind  error  // errs.Invalid or errs.TooLarge
	Msg   string
}

func (e *LayerError) Error() string {
	if e.Entry == "" {
		return fmt.Sprintf("%s: %s", e.Layer, e.Msg)
	}
	return fmt.Sprintf("%s: entry %q: %s", e.Layer, e.Entry, e.Msg)
}

// Unwrap gives the error's category.
func (e *LayerError) Unwrap() error { return e.Kind }

// Flattener applies image layers (uncompressed tar streams, lowest first) to
// a root filesystem, the way a container runtime stacks them, treating every
// layer as hostile:
//
//   - names are made relative to the root ("/etc/x" is "etc/x"); a name with
//     a ".." component is refused;
//   - nothing is written through a symlink: a path whose directory part is a
//     symlink is refused (layers built by docker never do this; see
//     rootfs.Strict). Symlinks themselves are created as given, never
//     followed;
//   - hard links must name a file already extracted, by a path inside the
//     root that goes through no symlink;
//   - character and block devices are refused; FIFOs are created;
//   - whiteouts (".wh.NAME") remove NAME from the lower layers and opaque
//     markers (".wh..wh..opq") empty their directory of what the lower layers
//     put there; the markers themselves are not written. A whiteout of no
//     entry (".wh.", ".wh..", ".wh...": the directory itself or its parent)
//     is refused;
//   - modes keep exactly the image's permission, setuid, setgid and sticky
//     bits, with the image's numeric owners; extended attributes (file
//     capabilities included) are dropped;
//   - Limits are enforced before a file is created (its declared size) and
//     as its bytes are written; holes in files stay holes on disk.
//
// Not safe for concurrent use.
type Flattener struct {
	root    *rootfs.Root
	limits  Limits
	written int64
	entries int64
	buf     []byte
}

// NewFlattener returns a Flattener that writes into root.
func NewFlattener(root *rootfs.Root, limits Limits) *Flattener {
	return &Flattener{root: root, limits: limits.withDefaults(), buf: make([]byte, 128<<10)}
}

// Written is the number of file content bytes written so far.
func (f *Flattener) Written() int64 { return f.written }

// Apply extracts one layer, an uncompressed tar stream. name says which
// layer in errors. On error the root is left part-written: the caller
// discards it.
func (f *Flattener) Apply(r io.Reader, name string) error {
	tr := tar.NewReader(r)
	ly := &layerState{f: f, name: name, seen: map[string]bool{}}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &LayerError{Layer: name, Kind: errs.Invalid, Msg: fmt.Sprintf("not a valid tar stream: %v", err)}
		}
		f.entries++
		if f.entries > f.limits.MaxEntries {
			return &LayerError{Layer: name, Kind: errs.TooLarge,
				Msg: fmt.Sprintf("the image has more than %d files (the import's cap on entries)", f.limits.MaxEntries)}
		}
		if err := ly.entry(hdr, tr); err != nil {
			var le *LayerError
			if errors.As(err, &le) {
				return err
			}
			return &LayerError{Layer: name, Entry: hdr.Name, Kind: errs.Invalid, Msg: err.Error()}
		}
	}
}

// layerState is one layer being applied.
type layerState struct {
	f    *Flattener
	name string
	// seen holds the paths this layer wrote: whiteouts hide only what the
	// lower layers put there.
	seen map[string]bool
}

func (ly *layerState) refuse(hdr *tar.Header, format string, args ...any) error {
	return &LayerError{Layer: ly.name, Entry: hdr.Name, Kind: errs.Invalid, Msg: fmt.Sprintf(format, args...)}
}

const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	opaqueMarker   = ".wh..wh..opq"
)

func (ly *layerState) entry(hdr *tar.Header, data io.Reader) error {
	rel, err := rootfs.Clean(hdr.Name)
	if err != nil {
		return ly.refuse(hdr, "the name contains \"..\"; a layer may only write inside the image")
	}
	if rel == "" {
		return nil // the root itself: it stays root's, 0755
	}
	dir, base := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")

	if strings.HasPrefix(base, whiteoutPrefix) {
		switch {
		case base == opaqueMarker:
			return ly.opaque(hdr, dir)
		case strings.HasPrefix(base, whiteoutMeta):
			return nil // other AUFS metadata (.wh..wh.plnk and the like): ignored
		}
		name := strings.TrimPrefix(base, whiteoutPrefix)
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
			// ".wh.." would hide the directory itself, ".wh..." its parent:
			// path.Join resolves them, past the ".." check of the entry's name.
			return ly.refuse(hdr, "is a whiteout of %q, which names no file of the directory; a whiteout hides one entry (.wh.NAME) or empties its directory (.wh..wh..opq)", name)
		}
		target := path.Join(dir, name)
		if ly.seen[target] {
			return nil // only the lower layers' files are hidden
		}
		pfd, err := ly.parent(hdr, dir, false)
		if err != nil || pfd < 0 {
			return err
		}
		defer unix.Close(pfd)
		if err := rootfs.RemoveAllAt(pfd, name); err != nil {
			return fmt.Errorf("whiteout of %s: %w", target, err)
		}
		return nil
	}

	if hdr.Uid < 0 || hdr.Gid < 0 || hdr.Uid > 1<<31 || hdr.Gid > 1<<31 {
		return ly.refuse(hdr, "owner %d:%d is out of range", hdr.Uid, hdr.Gid)
	}
	perm := uint32(hdr.Mode) & 0o7777
	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock:
		kind := "character"
		if hdr.Typeflag == tar.TypeBlock {
			kind = "block"
		}
		return ly.refuse(hdr, "is a %s device (%d:%d); images may not carry device nodes (the sandbox gets its own /dev)",
			kind, hdr.Devmajor, hdr.Devminor)
	case tar.TypeXGlobalHeader:
		return nil
	case tar.TypeDir, tar.TypeReg, tar.TypeGNUSparse, tar.TypeCont, tar.TypeSymlink, tar.TypeLink, tar.TypeFifo:
	default:
		return ly.refuse(hdr, "has tar type %q, which images do not use", string(hdr.Typeflag))
	}

	pfd, err := ly.parent(hdr, dir, true)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	ly.seen[rel] = true

	if hdr.Typeflag == tar.TypeDir {
		var st unix.Stat_t
		err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return rootfs.SetDirAttrs(pfd, base, perm, hdr.Uid, hdr.Gid)
		}
		if err == nil {
			if err := unix.Unlinkat(pfd, base, 0); err != nil {
				return err
			}
		}
		return rootfs.MkdirAt(pfd, base, perm, hdr.Uid, hdr.Gid)
	}

	if hdr.Typeflag == tar.TypeLink {
		// No times set: the link shares its target's inode, which may be
		// shared with another template (a Dockerfile build links its FROM's
		// files).
		return ly.hardLink(hdr, pfd, rel, base)
	}
	if err := rootfs.RemoveAllAt(pfd, base); err != nil {
		return fmt.Errorf("replace %s: %w", rel, err)
	}
	switch hdr.Typeflag {
	case tar.TypeSymlink:
		if hdr.Linkname == "" || strings.ContainsRune(hdr.Linkname, 0) {
			return ly.refuse(hdr, "is a symlink with an empty or invalid target")
		}
		if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
			return err
		}
		if err := unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	case tar.TypeFifo:
		if err := unix.Mknodat(pfd, base, unix.S_IFIFO|0o600, 0); err != nil {
			return err
		}
		if err := unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		// Just created as a FIFO by us: following is not possible here.
		if err := unix.Fchmodat(pfd, base, perm, 0); err != nil {
			return err
		}
	default:
		if err := ly.file(hdr, pfd, base, perm, data); err != nil {
			return err
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
	if hdr.ModTime.IsZero() {
		return nil
	}
	return unix.UtimesNanoAt(pfd, base, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// parent returns a descriptor of the directory dir, resolved without
// following any symlink. create makes missing directories (0755, root's);
// without it a missing dir gives -1 and no error.
func (ly *layerState) parent(hdr *tar.Header, dir string, create bool) (int, error) {
	var fd int
	var err error
	if create {
		fd, err = ly.f.root.MkdirAll(dir, rootfs.Strict, 0o755, 0, 0)
	} else {
		fd, err = ly.f.root.OpenDir(dir, rootfs.Strict)
		if errors.Is(err, unix.ENOENT) {
			return -1, nil
		}
	}
	switch {
	case errors.Is(err, rootfs.ErrSymlink):
		return -1, ly.refuse(hdr, "is written through a symlink (%v); a layer may not write through symlinks, which could lead out of the image", err)
	case errors.Is(err, unix.ENOTDIR):
		return -1, ly.refuse(hdr, "its directory /%s is not a directory in the layers below", dir)
	case err != nil:
		return -1, err
	}
	return fd, nil
}

// hardLink links rel to the file hdr.Linkname names, which must already be
// in the root, reached without symlinks, and not a directory.
func (ly *layerState) hardLink(hdr *tar.Header, pfd int, rel, base string) error {
	target, err := rootfs.Clean(hdr.Linkname)
	if err != nil || target == "" {
		return ly.refuse(hdr, "is a hard link to %q, outside the image", hdr.Linkname)
	}
	if target == rel {
		return nil
	}
	tdir, tbase := path.Split(target)
	tfd, err := ly.f.root.OpenDir(tdir, rootfs.Strict)
	if err != nil {
		if errors.Is(err, rootfs.ErrSymlink) {
			return ly.refuse(hdr, "is a hard link through a symlink (to %q); hard links must name a file of the image directly", hdr.Linkname)
		}
		return ly.refuse(hdr, "is a hard link to %q, which is not in the image (yet): %v", hdr.Linkname, err)
	}
	defer unix.Close(tfd)
	var st unix.Stat_t
	if err := unix.Fstatat(tfd, tbase, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return ly.refuse(hdr, "is a hard link to %q, which is not in the image (yet)", hdr.Linkname)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return ly.refuse(hdr, "is a hard link to the directory %q", hdr.Linkname)
	}
	if err := rootfs.RemoveAllAt(pfd, base); err != nil {
		return fmt.Errorf("replace %s: %w", rel, err)
	}
	// Flags 0: a symlink target is linked itself, never followed.
	return unix.Linkat(tfd, tbase, pfd, base, 0)
}

// file writes a regular file's content, keeping holes, counting its bytes
// against the cap.
func (ly *layerState) file(hdr *tar.Header, pfd int, base string, perm uint32, data io.Reader) error {
	f := ly.f
	if hdr.Size < 0 {
		return ly.refuse(hdr, "has a negative size")
	}
	if hdr.Size > f.limits.MaxBytes-f.written {
		return ly.tooLarge(hdr, hdr.Size)
	}
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	out := os.NewFile(uintptr(fd), base)
	defer out.Close()
	var n int64
	for {
		m, rerr := io.ReadFull(data, f.buf)
		if m > 0 {
			n += int64(m)
			f.written += int64(m)
			if f.written > f.limits.MaxBytes {
				return ly.tooLarge(hdr, n)
			}
			chunk := f.buf[:m]
			if isZero(chunk) {
				if _, err := out.Seek(int64(m), io.SeekCurrent); err != nil {
					return err
				}
			} else if _, err := out.Write(chunk); err != nil {
				return err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return ly.refuse(hdr, "reading its content: %v", rerr)
		}
	}
	if err := out.Truncate(n); err != nil {
		return err
	}
	if err := out.Chown(hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	// After chown, which clears setuid and setgid.
	return out.Chmod(os.FileMode(perm&0o777) | modeBits(perm))
}

func (ly *layerState) tooLarge(hdr *tar.Header, size int64) error {
	return &LayerError{Layer: ly.name, Entry: hdr.Name, Kind: errs.TooLarge,
		Msg: fmt.Sprintf("%d bytes would take the image past the import's cap of %s of uncompressed content",
			size, capText(ly.f.limits.MaxBytes))}
}

// modeBits turns the setuid, setgid and sticky bits of a Unix mode into
// os.FileMode's.
func modeBits(perm uint32) os.FileMode {
	var m os.FileMode
	if perm&unix.S_ISUID != 0 {
		m |= os.ModeSetuid
	}
	if perm&unix.S_ISGID != 0 {
		m |= os.ModeSetgid
	}
	if perm&unix.S_ISVTX != 0 {
		m |= os.ModeSticky
	}
	return m
}

var zeroBlock = make([]byte, 128<<10)

func isZero(b []byte) bool {
	return bytes.Equal(b, zeroBlock[:len(b)])
}

// opaque empties the directory dir of what the lower layers put there.
func (ly *layerState) opaque(hdr *tar.Header, dir string) error {
	fd, err := ly.parent(hdr, dir, true)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ly.seen[dir] = true
	return ly.removeUnseen(fd, dir)
}

// removeUnseen removes what is in the directory dirfd (the path dir) that
// this layer did not write, descending into directories it did.
func (ly *layerState) removeUnseen(dirfd int, dir string) error {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(fd), dir)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		p := path.Join(dir, n)
		if !ly.seen[p] {
			if err := rootfs.RemoveAllAt(fd, n); err != nil {
				return fmt.Errorf("opaque whiteout of /%s: %w", dir, err)
			}
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		cfd, err := unix.Openat(fd, n, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		err = ly.removeUnseen(cfd, p)
		unix.Close(cfd)
		if err != nil {
			return err
		}
	}
	return nil
}

// capText shows a cap in bytes with its size in GiB or MiB.
func capText(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%s (%d bytes)", humanBytes(n), n)
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
