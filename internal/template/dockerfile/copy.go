package dockerfile

import (
	"archive/tar"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/template/rootfs"
)

// ContextDockerfile is where a client puts a Dockerfile that lies outside
// its build context; COPY and ADD leave it out.
const ContextDockerfile = ".withruntime.Dockerfile"

// Context is a build context: a tar stream (the caller's upload) that COPY
// and ADD read from, from the start each time.
type Context struct {
	R    io.ReaderAt
	Size int64
}

func (c Context) reader() *tar.Reader { return tar.NewReader(io.NewSectionReader(c.R, 0, c.Size)) }

// entry is a context entry with its cleaned name.
type entry struct {
	name string
	hdr  *tar.Header
}

// source is one COPY source as found in the context.
type source struct {
	name string // cleaned; "" is the context's root
	dir  bool
}

var archiveSuffixes = []string{".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst"}

// copyTar writes to w a tar of what `COPY srcs... dst` (or ADD) puts into
// the image, names relative to the root, owned by uid:gid. dst is absolute
// (made so with the WORKDIR). mode, when not -1, is every file's and
// directory's mode (--chmod). It returns how many entries it wrote.
func (c Context) copyTar(w io.Writer, cmd string, srcs []string, dst string, uid, gid int, mode int64) (int, error) {
	var pats []string
	glob := false
	for _, s := range srcs {
		if cmd == "ADD" && strings.Contains(s, "://") {
			return 0, errs.New(errs.Invalid, "ADD %s: adding from a URL is not supported; download it with RUN (curl) instead", s)
		}
		if cmd == "ADD" {
			for _, suf := range archiveSuffixes {
				if strings.HasSuffix(s, suf) {
					return 0, errs.New(errs.Invalid, "ADD %s: ADD does not unpack archives here; COPY it and unpack it with RUN tar", s)
				}
			}
		}
		p, err := rootfs.Clean(s)
		if err != nil {
			return 0, errs.New(errs.Invalid, "%s %s: the source is outside the build context", cmd, s)
		}
		if strings.ContainsAny(p, "*?[") {
			glob = true
		}
		pats = append(pats, p)
	}
	toDir := strings.HasSuffix(dst, "/") || len(srcs) > 1 || glob
	dst = path.Clean(dst)

	// Pass 1: what each pattern names.
	var sources []source
	seen := map[string]bool{}
	matched := make([]bool, len(pats))
	tr := c.reader()
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, errs.New(errs.Invalid, "the build context is not a valid tar: %v", err)
		}
		name, err := rootfs.Clean(hdr.Name)
		if err != nil {
			return 0, errs.New(errs.Invalid, "the build context holds %q, outside the context", hdr.Name)
		}
		for i, p := range pats {
			top := prefixOf(name, depth(p))
			if p == "" {
				top = ""
			}
			ok := top == p
			if !ok && strings.ContainsAny(p, "*?[") {
				ok, _ = path.Match(p, top)
			}
			if !ok || (name == "" && p != "") {
				continue
			}
			matched[i] = true
			isDir := top != name || hdr.Typeflag == tar.TypeDir
			key := top
			if seen[key] {
				if isDir {
					for j := range sources {
						if sources[j].name == key {
							sources[j].dir = true
						}
					}
				}
				continue
			}
			seen[key] = true
			sources = append(sources, source{name: top, dir: isDir})
		}
	}
	for i, ok := range matched {
		if !ok {
			return 0, errs.New(errs.Invalid, "%s %s: no such file or directory in the build context", cmd, srcs[i])
		}
	}
	if len(sources) > 1 {
		toDir = true
	}

	// Pass 2: write the entries at their destinations.
	tw := tar.NewWriter(w)
	n := 0
	written := map[string]bool{}
	emit := func(h *tar.Header, name string, data io.Reader) error {
		if written[name] {
			return nil
		}
		written[name] = true
		out := &tar.Header{Name: strings.TrimPrefix(name, "/"), Typeflag: h.Typeflag, Mode: h.Mode & 0o7777,
			Uid: uid, Gid: gid, ModTime: h.ModTime, Linkname: h.Linkname, Size: h.Size, Format: tar.FormatPAX}
		if out.Name == "" {
			return nil
		}
		if mode >= 0 && h.Typeflag != tar.TypeSymlink {
			out.Mode = mode
		}
		if h.Typeflag == tar.TypeDir {
			out.Name += "/"
		}
		if err := tw.WriteHeader(out); err != nil {
			return err
		}
		n++
		if data != nil {
			if _, err := io.Copy(tw, data); err != nil {
				return err
			}
		}
		return nil
	}
	tr = c.reader()
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, errs.New(errs.Invalid, "the build context is not a valid tar: %v", err)
		}
		name, _ := rootfs.Clean(hdr.Name)
		if name == ContextDockerfile {
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeDir, tar.TypeSymlink:
		case tar.TypeLink:
			return 0, errs.New(errs.Invalid, "the build context holds the hard link %q; send files instead", hdr.Name)
		default:
			continue // devices, FIFOs: not copied
		}
		for _, s := range sources {
			var to string
			switch {
			case s.dir && s.name == "":
				to = path.Join(dst, name)
			case s.dir && (name == s.name || strings.HasPrefix(name, s.name+"/")):
				to = path.Join(dst, strings.TrimPrefix(strings.TrimPrefix(name, s.name), "/"))
			case !s.dir && name == s.name:
				to = dst
				if toDir {
					to = path.Join(dst, path.Base(name))
				}
			default:
				continue
			}
			var data io.Reader
			if hdr.Typeflag == tar.TypeReg {
				data = tr
			}
			if err := emit(hdr, to, data); err != nil {
				return 0, err
			}
			break
		}
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	return n, nil
}

// depth is the number of components of a cleaned path ("" has none).
func depth(p string) int {
	if p == "" {
		return 0
	}
	return strings.Count(p, "/") + 1
}

// prefixOf is the first k components of name.
func prefixOf(name string, k int) string {
	parts := strings.SplitN(name, "/", k+1)
	if len(parts) > k {
		parts = parts[:k]
	}
	return strings.Join(parts, "/")
}

// parseChown turns --chown's "USER[:GROUP]" into ids: numbers, or the names
// root (0) and user (1000) that every template has.
func parseChown(s string) (uid, gid int, err error) {
	if s == "" {
		return 0, 0, nil
	}
	u, g, hasG := strings.Cut(s, ":")
	if uid, err = idOf(u); err != nil {
		return 0, 0, err
	}
	gid = uid
	if hasG {
		if gid, err = idOf(g); err != nil {
			return 0, 0, err
		}
	}
	return uid, gid, nil
}

func idOf(s string) (int, error) {
	switch s {
	case "root":
		return 0, nil
	case "user":
		return 1000, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 1<<31 {
		return 0, fmt.Errorf("--chown=%s: give numeric ids, or root or user", s)
	}
	return n, nil
}
