package main

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/client"
)

// newVolumeCpCmd is `volume cp SRC DST`: `sandbox cp` for a volume, without
// a sandbox. One side is VOLUME:PATH, the other a path on this host; files
// go through the volume file API (PUT/GET /v1/volumes/{name}/files),
// streamed. Where a copy lands is as in `sandbox cp` (docker cp): onto DST
// when DST does not exist, into it (DST/NAME) when it is a directory.
//
// What the volume file API cannot express is said, not faked: an upload
// makes a 0644 file (and the directories it needs), so copying in keeps
// neither modes, symbolic links nor empty directories, and the command says
// what it left (a sandbox that mounts the volume can do those, or `sandbox
// cp` into one). Copying out keeps modes (less setuid, setgid and sticky)
// and symbolic links, extracted here under an os.Root as `sandbox cp`
// extracts a sandbox's archive: the volume's contents were written by
// sandboxes and are hostile.
func newVolumeCpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy files and directories between this host and a volume (VOLUME:PATH on one side), without a sandbox",
		Long: `Copy a file or a directory between this host and a volume, as sandbox cp does
for a sandbox, through the volume file API: no sandbox is started. One of SRC and
DST is VOLUME:PATH (PATH from the volume's root; VOLUME: alone is the root), the
other a path here (write ./a:b for a local name with a colon). A directory is
copied whole, one file at a time.

Into a volume, files land 0644 and owned by the sandbox's user (the API sets no
modes), and symbolic links and empty directories are not copied; the command
says so when it leaves any. Out of a volume, modes (less setuid, setgid and
sticky) and symbolic links are kept.
Progress is shown when stderr is a terminal.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, dst := parseVolumeEnd(args[0]), parseVolumeEnd(args[1])
			if (src.vol == "") == (dst.vol == "") {
				return usageError{errors.New("one of SRC and DST must be a volume path, VOLUME:PATH, and the other a path on this host"), cmd}
			}
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			p := newProgress(os.Stderr)
			defer p.done()
			if dst.vol != "" {
				left, err := volumeCopyIn(cmd.Context(), s.Client, src.path, dst, p)
				left.report(os.Stderr)
				return err
			}
			return volumeCopyOut(cmd.Context(), s.Client, src, dst.path, p)
		},
	}
}

// volumeEnd is one side of a volume copy: a path in a volume (vol set) or a
// path on this host.
type volumeEnd struct{ vol, path string }

// volumeNameRE is a volume's name (api/openapi.yaml CreateVolumeRequest).
var volumeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// parseVolumeEnd reads VOLUME:PATH (VOLUME a volume's name, so without '/')
// or a host path. PATH is from the volume's root.
func parseVolumeEnd(s string) volumeEnd {
	if vol, p, ok := strings.Cut(s, ":"); ok && volumeNameRE.MatchString(vol) {
		return volumeEnd{vol: vol, path: path.Join("/", p)}
	}
	return volumeEnd{path: s}
}

// volumeStat describes the entry at p (a clean absolute path) of the
// volume vol, from its parent's listing (the volume file API has no stat):
// the listing is paged from just before p's name (a cursor names the entry
// a page follows), so this reads one page, rarely more. ok is false when
// there is no such entry; the volume's root is a directory.
func volumeStat(ctx context.Context, c *client.Client, vol, p string) (fi agentapi.FileInfo, ok bool, err error) {
	if p == "/" {
		return agentapi.FileInfo{Name: "/", Path: "/", Type: "dir", Mode: "0755"}, true, nil
	}
	dir, base := path.Dir(p), path.Base(p)
	cursor := ""
	if before := base[:len(base)-1]; before != "" && before != "." && before != ".." {
		cursor = agentapi.ListCursor(path.Join(dir, before))
	}
	for {
		page, err := c.ListVolumeFiles(ctx, vol, dir, cursor, 1000)
		var ae *client.APIError
		if errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusBadRequest) {
			// No parent directory (or a file where it should be): the
			// volume itself missing is said by the call that follows.
			return fi, false, nil
		}
		if err != nil {
			return fi, false, err
		}
		for _, e := range page.Entries {
			if e.Name == base {
				return e, true, nil
			}
			if e.Name > base {
				return fi, false, nil
			}
		}
		if !page.Truncated || page.Next == "" || page.Next == cursor {
			return fi, false, nil
		}
		cursor = page.Next
	}
}

// fileMode reads a FileInfo's octal mode ("0755"), permission bits only.
func fileMode(e agentapi.FileInfo) fs.FileMode {
	var mode uint32
	_, _ = fmt.Sscanf(e.Mode, "%o", &mode)
	return fs.FileMode(mode) & 0o777
}

// leftBehind counts what a copy into a volume could not carry.
type leftBehind struct {
	links, dirs, special int
	modes                int
	example              string // a file whose mode was not 0644
}

func (l leftBehind) report(w io.Writer) {
	if l.modes > 0 {
		fmt.Fprintf(w, "note: %d file(s) are 0644 in the volume, not their mode here (such as %s): the volume file API sets no modes; chmod them in a sandbox that mounts the volume\n", l.modes, l.example)
	}
	if l.links > 0 {
		fmt.Fprintf(w, "note: %d symbolic link(s) were not copied: the volume file API makes only files; copy them with sandbox cp into a sandbox that mounts the volume\n", l.links)
	}
	if l.dirs > 0 {
		fmt.Fprintf(w, "note: %d empty director(ies) were not made: the volume file API makes directories only for the files in them\n", l.dirs)
	}
	if l.special > 0 {
		fmt.Fprintf(w, "note: %d device(s), socket(s) or pipe(s) were left out\n", l.special)
	}
}

// volumeCopyIn copies the host path src into the volume.
func volumeCopyIn(ctx context.Context, c *client.Client, src string, dst volumeEnd, p *progress) (leftBehind, error) {
	var left leftBehind
	fi, err := os.Lstat(src)
	if err != nil {
		return left, err
	}
	target := dst.path
	at, found, err := volumeStat(ctx, c, dst.vol, dst.path)
	if err != nil {
		return left, err
	}
	if found && at.Type == "dir" {
		target = path.Join(dst.path, filepath.Base(src))
	}
	upload := func(local, remote string, mode fs.FileMode) error {
		f, err := os.Open(local)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := c.UploadVolumeFile(ctx, dst.vol, remote, p.reader(f)); err != nil {
			return fmt.Errorf("%s to %s:%s: %w", local, dst.vol, remote, err)
		}
		if mode.Perm() != 0o644 {
			left.modes++
			if left.example == "" {
				left.example = fmt.Sprintf("%s, %04o here", remote, mode.Perm())
			}
		}
		return nil
	}
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() {
			return left, fmt.Errorf("%s is %s: only files and directories are copied", src, modeName(fi.Mode()))
		}
		if target == "/" {
			return left, fmt.Errorf("%s:/ is the volume's root: copy a file to a path such as %s:/%s", dst.vol, dst.vol, filepath.Base(src))
		}
		return left, upload(src, target, fi.Mode())
	}
	err = filepath.WalkDir(src, func(local string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, local)
		remote := path.Join(target, filepath.ToSlash(rel))
		switch t := d.Type(); {
		case t&fs.ModeSymlink != 0:
			left.links++
			return nil
		case d.IsDir():
			if empty, err := emptyDir(local); err == nil && empty {
				left.dirs++
			}
			return nil
		case !t.IsRegular():
			left.special++
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return upload(local, remote, info.Mode())
	})
	return left, err
}

func emptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}

// volumeCopyOut copies the volume path src to the host path dst.
func volumeCopyOut(ctx context.Context, c *client.Client, src volumeEnd, dst string, p *progress) error {
	fi, found, err := volumeStat(ctx, c, src.vol, src.path)
	if err != nil {
		return err
	}
	hostFi, statErr := os.Stat(dst)
	dstIsDir := statErr == nil && hostFi.IsDir()
	if !found || fi.Type != "dir" {
		if found && fi.Type != "file" {
			return fmt.Errorf("%s:%s is a %s: only files and directories are copied", src.vol, src.path, fi.Type)
		}
		target := dst
		if dstIsDir {
			target = filepath.Join(dst, path.Base(src.path))
		}
		// Not found: the download says why (no such volume, or file).
		body, _, err := c.DownloadVolumeFile(ctx, src.vol, src.path)
		if err != nil {
			return err
		}
		defer body.Close()
		mode := fs.FileMode(0o644)
		if found {
			mode = fileMode(fi)
		}
		return writeFileAtomic(target, p.reader(body), mode)
	}
	// A directory: its tree as a tar stream made here from the listing and
	// the downloads, extracted by extractTar (os.Root, modes without
	// setuid, links kept), as sandbox cp extracts a sandbox's archive.
	into := dst
	if dstIsDir {
		into = filepath.Join(dst, path.Base(src.path))
	}
	if err := os.MkdirAll(into, 0o755); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := volumeTar(ctx, c, tw, src.vol, src.path, ".", p)
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	err = extractTar(pr, into)
	pr.CloseWithError(err)
	return err
}

// volumeTar writes the directory dir of the volume vol to tw, entry names
// under prefix, a page of its listing at a time.
func volumeTar(ctx context.Context, c *client.Client, tw *tar.Writer, vol, dir, prefix string, p *progress) error {
	cursor := ""
	for {
		page, err := c.ListVolumeFiles(ctx, vol, dir, cursor, agentapi.ListMaxLimit)
		if err != nil {
			return err
		}
		for _, e := range page.Entries {
			if err := volumeTarEntry(ctx, c, tw, vol, e, path.Join(prefix, e.Name), p); err != nil {
				return err
			}
		}
		if !page.Truncated {
			return nil
		}
		if page.Next == "" || page.Next == cursor {
			return fmt.Errorf("listing %s:%s: a page that does not move the listing forward", vol, dir)
		}
		cursor = page.Next
	}
}

func volumeTarEntry(ctx context.Context, c *client.Client, tw *tar.Writer, vol string, e agentapi.FileInfo, name string, p *progress) error {
	hdr := &tar.Header{Name: name, Mode: int64(fileMode(e)), ModTime: e.ModTime}
	switch e.Type {
	case "dir":
		hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		return volumeTar(ctx, c, tw, vol, e.Path, name, p)
	case "symlink":
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Target
		return tw.WriteHeader(hdr)
	case "file":
	default:
		return nil // sockets, pipes: not copied, as sandbox cp's tar leaves them
	}
	body, size, err := c.DownloadVolumeFile(ctx, vol, e.Path)
	if err != nil {
		return err
	}
	defer body.Close()
	if size < 0 {
		return fmt.Errorf("downloading %s:%s: the server did not say its size", vol, e.Path)
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, size
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.Copy(tw, p.reader(body))
	return err
}
