// Command imagereg serves the E2B compatibility suite an OCI registry on a
// loopback port holding one small linux/amd64 image, so that the suite's
// Template.build(Template().from_image(...)) pulls a real image without
// reaching any other host.
//
// The image is made from a root filesystem on this host (the base
// template's): a shell, coreutils, find, tar and the few tools the tests
// run, each with the shared libraries it needs (found from the ELF files'
// DT_NEEDED entries), plus /etc and the user "user"'s home, about 10 MiB.
// It prints the image's reference on its first line of stdout, then serves
// until it is killed.
//
// Usage: imagereg -rootfs DIR
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// tools are the programs the image holds (under /usr/bin).
var tools = []string{"bash", "sh", "dash", "cat", "ls", "echo", "mkdir", "cp", "mv", "rm", "chmod", "chown", "id", "env",
	"find", "tar", "grep", "sed", "head", "tail", "wc", "sleep", "touch", "stat", "ln", "true", "false", "printf",
	"sort", "tr", "cut", "date", "basename", "dirname", "readlink", "xargs", "whoami", "uname", "test", "[", "pwd", "gzip"}

// libDirs are where DT_NEEDED libraries are looked for, inside the root.
var libDirs = []string{"usr/lib/x86_64-linux-gnu", "usr/lib", "usr/lib64", "lib/x86_64-linux-gnu", "lib"}

func main() {
	rootfs := flag.String("rootfs", "", "the root filesystem to take the image's files from (the base template's)")
	flag.Parse()
	if *rootfs == "" {
		log.Fatal("imagereg: give -rootfs DIR")
	}
	layer, err := makeLayer(*rootfs)
	if err != nil {
		log.Fatalf("imagereg: %v", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		log.Fatalf("imagereg: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		log.Fatalf("imagereg: %v", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = v1.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "COMPAT_IMAGE=small"}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		log.Fatalf("imagereg: %v", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatalf("imagereg: %v", err)
	}
	go func() {
		srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
		log.Fatal(srv.Serve(ln))
	}()
	ref := fmt.Sprintf("%s/compat/small:1", ln.Addr())
	r, err := name.ParseReference(ref)
	if err != nil {
		log.Fatalf("imagereg: %v", err)
	}
	if err := remote.Write(r, img); err != nil {
		log.Fatalf("imagereg: push %s: %v", ref, err)
	}
	fmt.Println(ref)
	select {} // until killed
}

// makeLayer is the image's one layer: the tools, their libraries and the
// links to them, /etc, and the user's home.
func makeLayer(root string) (v1.Layer, error) {
	l := &layer{root: root, seen: map[string]bool{}}
	for _, d := range []string{"bin", "sbin", "lib", "lib64"} {
		if err := l.add(d); err != nil {
			return nil, err
		}
	}
	for _, t := range tools {
		if err := l.add("usr/bin/" + t); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"etc", "home/user", "tmp", "root"} {
		if err := l.addTree(d); err != nil {
			return nil, err
		}
	}
	sort.Strings(l.order)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range l.order {
		if err := l.write(tw, p); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

type layer struct {
	root  string
	seen  map[string]bool
	order []string
}

// add takes the path rel (relative to the root) with its parents, and what
// it needs: a symbolic link's target, an ELF file's interpreter and
// libraries.
func (l *layer) add(rel string) error { return l.addPath(rel, true) }

// addPath is add; with follow false, a symbolic link's target is left out
// (the links of /etc to the alternatives of programs the image lacks).
func (l *layer) addPath(rel string, follow bool) error {
	rel, err := l.canonical(path.Clean(rel))
	if err != nil {
		return err
	}
	if rel == "." || l.seen[rel] {
		return nil
	}
	st, err := os.Lstat(filepath.Join(l.root, rel))
	if err != nil {
		return err
	}
	l.seen[rel] = true
	l.order = append(l.order, rel)
	if err := l.add(path.Dir(rel)); err != nil {
		return err
	}
	switch {
	case st.Mode()&fs.ModeSymlink != 0 && follow:
		target, err := os.Readlink(filepath.Join(l.root, rel))
		if err != nil {
			return err
		}
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(rel), target)
		}
		return l.add(strings.TrimPrefix(path.Clean(target), "/"))
	case st.Mode().IsRegular():
		return l.addNeeded(rel)
	}
	return nil
}

// canonical is rel with the symbolic links among its parents resolved
// inside the root (a layer may not write through a link: /lib/x is
// usr/lib/x), each link taken into the layer too.
func (l *layer) canonical(rel string) (string, error) {
	out := ""
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		next := path.Join(out, p)
		if i == len(parts)-1 {
			return next, nil
		}
		for hops := 0; ; hops++ {
			st, err := os.Lstat(filepath.Join(l.root, next))
			if err != nil || st.Mode()&fs.ModeSymlink == 0 {
				break
			}
			if hops > 16 {
				return "", fmt.Errorf("%s: too many symbolic links", rel)
			}
			if err := l.addPath(next, false); err != nil {
				return "", err
			}
			target, err := os.Readlink(filepath.Join(l.root, next))
			if err != nil {
				return "", err
			}
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(next), target)
			}
			next = strings.TrimPrefix(path.Clean("/"+target), "/")
		}
		out = next
	}
	return out, nil
}

// addNeeded adds what ELF file rel loads.
func (l *layer) addNeeded(rel string) error {
	f, err := elf.Open(filepath.Join(l.root, rel))
	if err != nil {
		return nil // not an ELF file
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return err
			}
			if err := l.add(strings.TrimPrefix(strings.TrimRight(string(b), "\x00"), "/")); err != nil {
				return err
			}
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil
	}
	for _, lib := range libs {
		found := false
		for _, d := range libDirs {
			if _, err := os.Lstat(filepath.Join(l.root, d, lib)); err == nil {
				if err := l.add(d + "/" + lib); err != nil {
					return err
				}
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%s needs %s, which is not in %s", rel, lib, l.root)
		}
	}
	return nil
}

// addTree adds the directory rel and everything under it.
func (l *layer) addTree(rel string) error {
	return filepath.WalkDir(filepath.Join(l.root, rel), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, err := filepath.Rel(l.root, p)
		if err != nil {
			return err
		}
		return l.addPath(filepath.ToSlash(r), false)
	})
}

// write adds rel to the layer as it is in the root (owner, mode, link).
func (l *layer) write(tw *tar.Writer, rel string) error {
	full := filepath.Join(l.root, rel)
	st, err := os.Lstat(full)
	if err != nil {
		return err
	}
	link := ""
	if st.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(full); err != nil {
			return err
		}
	}
	h, err := tar.FileInfoHeader(st, link)
	if err != nil {
		return err
	}
	h.Name = rel
	if st.IsDir() {
		h.Name += "/"
	}
	h.Uname, h.Gname = "", ""
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		h.Uid, h.Gid = int(sys.Uid), int(sys.Gid)
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if st.Mode().IsRegular() {
		f, err := os.Open(full)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	}
	return nil
}
