package main

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/client"
)

// newCpCmd is `sandbox cp SRC DST`, as `docker cp`: one side is ID:PATH, the
// other a path on this host. A file goes through the file API, streamed; a
// directory as a tar stream (modes and symlinks kept, extracted by tar
// inside the sandbox, or here under an os.Root so that nothing in the
// archive reaches outside the destination). Symlinks are copied as links,
// never followed on this host.
//
// Where the copy lands, as docker cp: onto DST when DST does not exist;
// into DST (as DST/NAME) when DST is an existing directory.
func newCpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy files and directories between this host and a sandbox (ID:PATH on one side)",
		Long: `Copy a file or a directory between this host and a sandbox, as docker cp does.
One of SRC and DST is ID:PATH (a relative PATH is under /workspace), the other
a path here (write ./a:b for a local name with a colon). A directory is copied
whole, with its modes and symlinks; files land owned by the sandbox's user.
Progress is shown when stderr is a terminal.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, dst := parseCpEnd(args[0]), parseCpEnd(args[1])
			if (src.id == "") == (dst.id == "") {
				return usageError{errors.New("one of SRC and DST must be a sandbox path, ID:PATH, and the other a path on this host"), cmd}
			}
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			p := newProgress(os.Stderr)
			defer p.done()
			if dst.id != "" {
				return copyIn(cmd.Context(), s.Client, src.path, dst, p)
			}
			return copyOut(cmd.Context(), s.Client, src, dst.path, p)
		},
	}
}

// cpEnd is one side of a copy: a sandbox path (id set) or a host path.
type cpEnd struct{ id, path string }

// parseCpEnd reads ID:PATH (ID has no '/') or a host path.
func parseCpEnd(s string) cpEnd {
	if id, p, ok := strings.Cut(s, ":"); ok && id != "" && !strings.Contains(id, "/") {
		if !path.IsAbs(p) {
			p = path.Join("/workspace", p)
		}
		return cpEnd{id: id, path: p}
	}
	return cpEnd{path: s}
}

// copyIn copies the host path src into the sandbox.
func copyIn(ctx context.Context, c *client.Client, src string, dst cpEnd, p *progress) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	target, dstIsDir, err := sandboxTarget(ctx, c, dst, filepath.Base(src))
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is %s: only files and directories are copied (a symlink inside a copied directory is copied as a link)", src, modeName(fi.Mode()))
		}
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := c.UploadFile(ctx, dst.id, target, p.reader(f)); err != nil {
			return err
		}
		if mode := fi.Mode().Perm(); mode != 0o644 {
			return sandboxRun(ctx, c, dst.id, "chmod", strconv.FormatUint(uint64(mode), 8), "--", target)
		}
		return nil
	}
	// A directory: tar it here, upload the archive beside the destination,
	// and extract it there with the sandbox's tar. Into an existing
	// directory it lands as DIR/NAME (the archive holds NAME/...); onto a
	// new path the archive holds the directory's contents.
	extractIn, prefix := target, "."
	if dstIsDir {
		extractIn, prefix = dst.path, filepath.Base(src)
	}
	tmp := path.Join(path.Dir(extractIn), ".withruntime-cp-"+randHex()+".tar")
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, src, prefix)) }()
	err = c.UploadFile(ctx, dst.id, tmp, p.reader(pr))
	pr.CloseWithError(err)
	if err != nil {
		return err
	}
	return sandboxRun(ctx, c, dst.id, "bash", "-c", `trap 'rm -f -- "$2"' EXIT; mkdir -p -- "$1" && tar -x --no-same-owner -f "$2" -C "$1"`, "cp", extractIn, tmp)
}

// sandboxTarget is where a copy into the sandbox lands (see newCpCmd), and
// whether dst is an existing directory.
func sandboxTarget(ctx context.Context, c *client.Client, dst cpEnd, name string) (string, bool, error) {
	fi, err := c.StatFile(ctx, dst.id, dst.path)
	var ae *client.APIError
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		return dst.path, false, nil
	case err != nil:
		return "", false, err
	case fi.Type == "dir":
		return path.Join(dst.path, name), true, nil
	}
	return dst.path, false, nil
}

// writeTar writes the tree at root to w, entry names under prefix. Symlinks
// are stored as links (never followed); devices, sockets and pipes are
// left out.
func writeTar(w io.Writer, root, prefix string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case !fi.Mode().IsRegular() && !fi.IsDir():
			return nil
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		hdr.Name = filepath.ToSlash(filepath.Join(prefix, rel))
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// copyOut copies the sandbox path src to the host path dst.
func copyOut(ctx context.Context, c *client.Client, src cpEnd, dst string, p *progress) error {
	fi, err := c.StatFile(ctx, src.id, src.path)
	if err != nil {
		return err
	}
	hostFi, statErr := os.Stat(dst)
	dstIsDir := statErr == nil && hostFi.IsDir()
	if fi.Type != "dir" {
		if fi.Type != "file" {
			return fmt.Errorf("%s:%s is a %s: only files and directories are copied", src.id, src.path, fi.Type)
		}
		target := dst
		if dstIsDir {
			target = filepath.Join(dst, path.Base(src.path))
		}
		body, err := c.DownloadFile(ctx, src.id, src.path)
		if err != nil {
			return err
		}
		defer body.Close()
		mode, _ := strconv.ParseUint(fi.Mode, 8, 32)
		return writeFileAtomic(target, p.reader(body), fs.FileMode(mode)&0o777)
	}
	// A directory: the sandbox's tar writes it to stdout, which the exec
	// stream carries byte for byte; it is extracted here under an os.Root.
	into := dst
	if dstIsDir {
		into = filepath.Join(dst, path.Base(src.path))
	}
	if err := os.MkdirAll(into, 0o755); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	var stderr strings.Builder
	go func() {
		res, err := c.ExecStream(ctx, src.id, // As root, to read every file (the key may run anything as root anyway).
			agentapi.ExecRequest{Argv: []string{"tar", "-c", "-C", src.path, "."}, User: "root", TimeoutSeconds: 24 * 3600},
			func(stream string, data []byte) {
				if stream == "stdout" {
					_, _ = pw.Write(data)
				} else if stderr.Len() < 4096 {
					stderr.Write(data)
				}
			})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("tar in the sandbox exited %d: %s", res.ExitCode, strings.TrimSpace(stderr.String()))
		}
		pw.CloseWithError(err)
	}()
	err = extractTar(p.reader(pr), into)
	pr.CloseWithError(err)
	return err
}

// extractTar writes the archive r into the directory dir. Every name is
// resolved under an os.Root of dir, so that no entry (a "../x", an absolute
// name, a path through a symlink the archive made) writes outside it; the
// archive comes from inside a sandbox and is hostile. Modes are kept
// without setuid, setgid or sticky bits; devices and FIFOs are refused.
func extractTar(r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the archive: %w", err)
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		if name == "." {
			continue
		}
		mode := fs.FileMode(hdr.Mode) & 0o777
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return err
			}
			if err := root.Chmod(name, mode|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
				return err
			}
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			_ = root.Remove(name)
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s in the archive is not a file, directory or symlink (type %q): refused", hdr.Name, hdr.Typeflag)
		}
	}
}

// writeFileAtomic writes r to path through a temporary file beside it, so
// that a copy that fails leaves no half-written file.
func writeFileAtomic(target string, r io.Reader, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), target)
}

// sandboxRun runs argv in the sandbox and fails unless it exits 0.
func sandboxRun(ctx context.Context, c *client.Client, id string, argv ...string) error {
	var stderr strings.Builder
	res, err := c.ExecStream(ctx, id, agentapi.ExecRequest{Argv: argv, TimeoutSeconds: 3600}, func(stream string, data []byte) {
		if stream == "stderr" && stderr.Len() < 4096 {
			stderr.Write(data)
		}
	})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%s in the sandbox exited %d: %s", argv[0], res.ExitCode, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// modeName says what kind of file mode is, for an error.
func modeName(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeSymlink != 0:
		return "a symlink"
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

func randHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// progress shows the bytes copied on a terminal, at most five times a
// second; elsewhere it shows nothing.
type progress struct {
	out   *os.File
	on    bool
	n     int64
	shown time.Time
}

func newProgress(out *os.File) *progress { return &progress{out: out, on: isTerminal(out)} }

func (p *progress) reader(r io.Reader) io.Reader {
	if !p.on {
		return r
	}
	return readerFunc(func(b []byte) (int, error) {
		n, err := r.Read(b)
		p.n += int64(n)
		if time.Since(p.shown) > 200*time.Millisecond {
			p.shown = time.Now()
			fmt.Fprintf(p.out, "\rcopied %.1f MiB", float64(p.n)/(1<<20))
		}
		return n, err
	})
}

func (p *progress) done() {
	if p.on && p.n > 0 {
		fmt.Fprintf(p.out, "\rcopied %.1f MiB\n", float64(p.n)/(1<<20))
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }
