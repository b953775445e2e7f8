package realnode

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image is an image made on the host and imported into the node (the
// node's pause image; Runtime's images are pushed to a registry the test
// serves, which Start's plainHTTP lets the node pull from): the directory
// Root as its one layer.
type Image struct {
	// Ref is the image's name as pods use it ("withruntime/agent:test").
	Ref string
	// Root is the directory that becomes the image's filesystem.
	Root string
	// Entrypoint is the image's entrypoint (may be empty).
	Entrypoint []string
}

// writeImage writes img as a `docker save` tarball at path.
func writeImage(img Image, path string) error {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(tarDir(pw, img.Root)) }()
		return pr, nil
	})
	if err != nil {
		return err
	}
	im, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := im.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = v1.Config{Entrypoint: img.Entrypoint, Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}
	if im, err = mutate.ConfigFile(im, cf); err != nil {
		return err
	}
	ref, err := name.NewTag(img.Ref)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(path, ref, im)
}

// tarDir writes the tree under root as a tar stream (files, directories,
// symlinks, hard links; device nodes and sockets are left out).
func tarDir(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode()
		if mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeSocket|fs.ModeNamedPipe) != 0 {
			return nil
		}
		target := ""
		if mode&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(path); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, target)
		if err != nil {
			return err
		}
		hdr.Name = rel
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		if st, ok := info.Sys().(*syscall.Stat_t); ok && mode.IsRegular() && st.Nlink > 1 {
			k := [2]uint64{st.Dev, st.Ino}
			if first, ok := links[k]; ok {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
				return tw.WriteHeader(hdr)
			}
			links[k] = rel
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !mode.IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.Copy(tw, f); err != nil {
			return fmt.Errorf("%s: %w", strings.TrimPrefix(path, root), err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
