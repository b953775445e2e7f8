package gvisor

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/driver"
)

var _ driver.FileSnapshotter = (*Driver)(nil)

// Files-only snapshots (driver.FileSnapshotter). The sandbox's writable
// root layer is gVisor's overlay upper layer, which lives inside the
// sandbox (its memory or its unlinked filestore file): the host never sees
// it as files.
//
//   - `runsc tar rootfs-upper` asks the sentry to write that layer as a tar
//     archive (it holds the layer's lock while it does: writes to the root
//     wait, processes run on) into a FIFO that copyLayer reads as it
//     comes, writing snapshots/.new-<id>/rootfs-upper.tar; the
//     directory is then renamed into place as a full snapshot's is.
//   - The archive comes from inside the sandbox, so copyLayer treats it as
//     hostile: every name must be a clean relative path under "./", only
//     directories, regular files, symlinks, hard links to files kept
//     before them, FIFOs and overlay whiteouts (character device 0:0) pass;
//     other device nodes are dropped, headers are rebuilt with only the
//     fields gVisor reads (mode bits, owner, time, xattrs and ACLs), and the
//     whole is capped at the sandbox's disk size plus headers.
//   - The host never unpacks it. A create from it is a fresh boot whose
//     bundle carries the annotation dev.gvisor.tar.rootfs.upper (with the
//     runsc flag --allow-rootfs-tar-annotation) naming a hard link of the
//     archive in the new sandbox's own directory: runsc opens it and the new
//     sandbox's sentry builds its upper layer from it, inside the sandbox.
//     A symlink in the layer therefore resolves inside the new sandbox, a
//     setuid file is setuid for gVisor's root only, and no name in the
//     archive reaches a host path. The link stays with the sandbox (a
//     pause's resume opens it again), so deleting the snapshot is safe.
//   - Volumes, /tmp, /dev/shm and the agent's directories are other mounts:
//     not in the upper layer, so not in the snapshot.

const (
	// layerFile is a files-only snapshot's archive, in its directory and in
	// the directory of a sandbox booted from it.
	layerFile = "rootfs-upper.tar"
	// modeFiles is snapshotMeta.Mode of a files-only snapshot.
	modeFiles = "filesystem"
	// rootfsTarAnnotation makes runsc start the root's upper layer from a
	// tar archive; runsc honours it only with rootfsTarFlag.
	rootfsTarAnnotation = "dev.gvisor.tar.rootfs.upper"
	rootfsTarFlag       = "--allow-rootfs-tar-annotation"
	// layerHeaderSlack is what the archive may hold beyond the sandbox's
	// disk size: tar headers (512 bytes to a few KiB an entry).
	layerHeaderSlack = 256 << 20
)

// SnapshotFiles implements driver.FileSnapshotter.
func (d *Driver) SnapshotFiles(ctx context.Context, id string, raw []byte, snapID string) (driver.Image, error) {
	if !validSnapshotID(snapID) {
		return driver.Image{}, fmt.Errorf("gvisor files snapshot %s: invalid snapshot id %q", id, snapID)
	}
	st, err := pausable(raw)
	if err != nil {
		return driver.Image{}, fmt.Errorf("gvisor files snapshot %s: %w", id, err)
	}
	diskBytes, err := overlaySize(st.Flags)
	if err != nil {
		return driver.Image{}, fmt.Errorf("gvisor files snapshot %s: %w", id, err)
	}
	if _, busy := d.snapshotting.LoadOrStore(snapID, true); busy {
		return driver.Image{}, fmt.Errorf("gvisor files snapshot %s: snapshot %s is already being written", id, snapID)
	}
	defer d.snapshotting.Delete(snapID)
	root := d.snapshotsRoot()
	tmp := filepath.Join(root, snapshotNewPrefix+snapID)
	if err := freshDir(root, tmp); err != nil {
		return driver.Image{}, fmt.Errorf("gvisor files snapshot %s: %w", id, err)
	}
	fail := func(err error) (driver.Image, error) {
		_ = os.RemoveAll(tmp)
		return driver.Image{}, fmt.Errorf("gvisor files snapshot %s: %w", id, err)
	}
	need, err := d.upperBytes(id)
	if err != nil {
		need = diskBytes // a memory-backed layer: at most its size
	}
	if err := checkSpace(tmp, need); err != nil {
		return fail(err)
	}
	meta := snapshotMeta{ID: snapID, Source: id, Mode: modeFiles, Runsc: d.runscVersion(ctx)}
	if src, err := readBundle(d.sandboxDir(id)); err == nil {
		meta.RootFS = src.Root.Path
	}
	if err := d.tarLayer(ctx, id, filepath.Join(tmp, layerFile), diskBytes+layerHeaderSlack); err != nil {
		if cerr := checkSpace(tmp, 0); cerr != nil {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return fail(err)
	}
	size, err := fileBlocks(filepath.Join(tmp, layerFile))
	if err != nil {
		return fail(err)
	}
	if err := d.commitSnapshot(root, tmp, meta); err != nil {
		return fail(err)
	}
	return driver.Image{Bytes: size}, nil
}

// tarLayer writes sandbox id's upper layer, checked by copyLayer, to path
// (at most limit bytes of archive). runsc writes the archive into a FIFO
// beside path (-file; on stdout the archive would follow a line of runsc's
// own), which copyLayer reads as it comes: nothing of it reaches the host's
// disk unchecked, and past limit runsc is killed. (A sparse file inside is
// written whole, so a file-backed raw copy could grow far past the
// sandbox's disk.) The FIFO is opened read-write, so that the open never
// waits for runsc; the archive's own end marker ends the read, and a runsc
// that fails first closes it.
func (d *Driver) tarLayer(ctx context.Context, id, path string, limit int64) error {
	fifo := path + ".fifo"
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		return fmt.Errorf("the root layer's pipe: %w", err)
	}
	defer os.Remove(fifo)
	in, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("the root layer's pipe: %w", err)
	}
	var closeOnce sync.Once
	closeIn := func() { closeOnce.Do(func() { in.Close() }) }
	defer closeIn()
	out, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	argv := []string{"--root", filepath.Join(d.cfg.StateDir, "runsc"), "tar", "rootfs-upper", "-file", fifo, id}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkpointTimeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, d.cfg.Runsc, argv...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("runsc tar: %w", err)
	}
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		exited <- err
		if err != nil {
			closeIn() // the archive will not end: stop the read
			return
		}
		// Written whole: what is left in the pipe is read in moments.
		select {
		case <-tctx.Done():
		case <-time.After(time.Minute):
		}
		closeIn()
	}()
	w := bufio.NewWriterSize(out, 1<<20)
	_, cerr := copyLayer(w, io.LimitReader(in, limit+1), limit)
	if cerr == nil {
		cerr = w.Flush()
	}
	if cerr != nil {
		_ = cmd.Process.Kill()
	}
	werr := <-exited
	cancel()
	switch {
	case werr != nil && cerr == nil:
		return fmt.Errorf("runsc tar rootfs-upper: %w: %s", werr, strings.TrimSpace(output.String()))
	case cerr != nil && werr != nil && !errors.Is(cerr, errLayer):
		// The read stopped because runsc failed: its message says why.
		return fmt.Errorf("runsc tar rootfs-upper: %w: %s", werr, strings.TrimSpace(output.String()))
	case cerr != nil:
		return fmt.Errorf("the sandbox's root layer: %w", cerr)
	}
	return out.Sync()
}

// errLayer says a root layer's archive is not what gVisor writes.
var errLayer = errors.New("unexpected root layer archive")

// layerStats counts what copyLayer kept and dropped.
type layerStats struct {
	Kept, Dropped int
}

// copyLayer copies the tar archive of a sandbox's root layer from src to
// dst, keeping only what is safe to hand to another sandbox (see the note
// at the top of this file): dropped entries are counted, a name that is
// not a clean path under "./", an unknown entry type or an archive over
// limit bytes is an error wrapping errLayer.
func copyLayer(dst io.Writer, src io.Reader, limit int64) (layerStats, error) {
	var stats layerStats
	cw := &countWriter{w: dst, limit: limit}
	tr := tar.NewReader(src)
	tw := tar.NewWriter(cw)
	files := map[string]bool{} // kept non-directories, for hard links
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return stats, fmt.Errorf("%w: %v", errLayer, err)
		}
		if err := checkLayerName(h.Name, h.Typeflag == tar.TypeDir); err != nil {
			return stats, err
		}
		out := &tar.Header{Name: h.Name, Typeflag: h.Typeflag, Mode: h.Mode & 0o7777, Uid: h.Uid, Gid: h.Gid,
			ModTime: h.ModTime, Format: tar.FormatPAX, PAXRecords: layerRecords(h.PAXRecords)}
		switch h.Typeflag {
		case tar.TypeDir, tar.TypeFifo:
		case tar.TypeReg:
			out.Size = h.Size
		case tar.TypeSymlink:
			if h.Linkname == "" || strings.IndexByte(h.Linkname, 0) >= 0 {
				return stats, fmt.Errorf("%w: symlink %q has a bad target", errLayer, h.Name)
			}
			out.Linkname = h.Linkname
		case tar.TypeLink:
			if !files[h.Linkname] {
				stats.Dropped++ // to something dropped, or not before it
				continue
			}
			out.Linkname = h.Linkname
		case tar.TypeChar, tar.TypeBlock:
			if h.Typeflag == tar.TypeBlock || h.Devmajor != 0 || h.Devminor != 0 {
				stats.Dropped++ // a device node: never handed on
				continue
			}
			// Character device 0:0 is an overlay whiteout (a deleted file).
		default:
			return stats, fmt.Errorf("%w: %q has entry type %q", errLayer, h.Name, h.Typeflag)
		}
		if err := tw.WriteHeader(out); err != nil {
			return stats, layerErr(cw, err)
		}
		if out.Size > 0 {
			if _, err := io.CopyN(tw, tr, out.Size); err != nil {
				return stats, layerErr(cw, err)
			}
		}
		if h.Typeflag != tar.TypeDir {
			files[h.Name] = true
		}
		stats.Kept++
	}
	if err := tw.Close(); err != nil {
		return stats, layerErr(cw, err)
	}
	return stats, nil
}

// layerErr is err from writing a layer's archive: errLayer when the cap
// was passed.
func layerErr(cw *countWriter, err error) error {
	if cw.over {
		return fmt.Errorf("%w: %w: its root layer's archive passed %d bytes, more than its disk holds (a sparse file is archived at its full size)", errLayer, driver.ErrNotSavable, cw.limit)
	}
	return err
}

// layerRecords keeps of a header's PAX records the extended attributes and
// ACLs gVisor reads back (SCHILY.xattr.*).
func layerRecords(in map[string]string) map[string]string {
	var out map[string]string
	for k, v := range in {
		if strings.HasPrefix(k, "SCHILY.xattr.") && v != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// checkLayerName checks a layer entry's name: "./" for the root, else
// "./" then clean components (a directory's ends in "/").
func checkLayerName(name string, dir bool) error {
	if name == "./" {
		return nil
	}
	rest, ok := strings.CutPrefix(name, "./")
	if dir {
		rest, ok = strings.CutSuffix(rest, "/")
	}
	if !ok || rest == "" || strings.IndexByte(rest, 0) >= 0 {
		return fmt.Errorf("%w: entry name %q", errLayer, name)
	}
	for c := range strings.SplitSeq(rest, "/") {
		if c == "" || c == "." || c == ".." {
			return fmt.Errorf("%w: entry name %q", errLayer, name)
		}
	}
	return nil
}

// countWriter writes to w, failing past limit bytes.
type countWriter struct {
	w     io.Writer
	n     int64
	limit int64
	over  bool
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.n+int64(len(p)) > c.limit {
		c.over = true
		return 0, fmt.Errorf("%w: archive over %d bytes", errLayer, c.limit)
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// overlaySize is the disk size in the --overlay2 flag among flags.
func overlaySize(flags []string) (int64, error) {
	f := flagWith(flags, overlayPrefix)
	_, size, ok := strings.Cut(f, ",size=")
	n, err := strconv.ParseInt(size, 10, 64)
	if !ok || err != nil || n <= 0 {
		return 0, fmt.Errorf("the sandbox's flags have no %s with a size", overlayPrefix)
	}
	return n, nil
}

// fileBlocks is the disk space file path takes.
func fileBlocks(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fi.Size(), nil
	}
	return st.Blocks * 512, nil
}

// bootFiles prepares the boot of a sandbox in dir whose root starts with
// files-only snapshot snapID's layer: links the archive into dir, and
// returns the runsc flag and sets oci's annotation that make runsc read it.
// driver.ErrNotFound (wrapped) when there is no such snapshot;
// driver.ErrNotRestorable for a snapshot that is not files-only.
func (d *Driver) bootFiles(snapID, dir string, oci *specs.Spec) (string, error) {
	meta, err := d.readSnapshot(snapID)
	if err != nil {
		return "", err
	}
	if meta.Mode != modeFiles {
		return "", fmt.Errorf("%w: snapshot %s holds memory and processes, not files alone", driver.ErrNotRestorable, snapID)
	}
	dst := filepath.Join(dir, layerFile)
	if err := linkOrCopy(filepath.Join(d.snapshotDir(snapID), layerFile), dst); err != nil {
		return "", fmt.Errorf("snapshot %s: %w", snapID, err)
	}
	if oci.Annotations == nil {
		oci.Annotations = map[string]string{}
	}
	oci.Annotations[rootfsTarAnnotation] = dst
	return rootfsTarFlag, nil
}
