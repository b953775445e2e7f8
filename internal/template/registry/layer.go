package registry

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"
)

// capabilityXattr is the one extended attribute a layer carries: file
// capabilities (e.g. ping's cap_net_raw), which runtimes apply on unpack.
const capabilityXattr = "security.capability"

// DirLayer is the image layer of the tree under root, as writeTar writes
// it (read again each time the layer is read). Errors are tarball's.
func DirLayer(root string, opts ...tarball.LayerOption) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeTar(pw, root)) }()
		return pr, nil
	}, opts...)
}

// writeTar writes the tree under root as a tar stream, the same bytes for
// the same tree: entries in lexical order; each one's numeric owner, mode
// (setuid, setgid and sticky bits included), modification time (whole
// seconds, no access or change time) and file capabilities; no user or
// group names (the image's own /etc/passwd gives them meaning); hard links
// as links to the first name. Device nodes, sockets and FIFOs are left out:
// the runtime gives the container its own /dev.
func writeTar(w io.Writer, root string) error {
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
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no stat", rel)
		}
		hdr := &tar.Header{
			Name:    filepath.ToSlash(rel),
			Mode:    int64(st.Mode & 0o7777),
			Uid:     int(st.Uid),
			Gid:     int(st.Gid),
			ModTime: time.Unix(st.Mtim.Sec, 0).UTC(),
			Format:  tar.FormatPAX,
		}
		mode := info.Mode()
		switch {
		case mode.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		case mode&fs.ModeSymlink != 0:
			hdr.Typeflag = tar.TypeSymlink
			if hdr.Linkname, err = os.Readlink(path); err != nil {
				return err
			}
		case mode.IsRegular():
			hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
			if st.Nlink > 1 {
				k := [2]uint64{st.Dev, st.Ino}
				if first, ok := links[k]; ok {
					hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
					return tw.WriteHeader(hdr)
				}
				links[k] = hdr.Name
			}
		default:
			return nil // devices, sockets, FIFOs
		}
		if mode&fs.ModeSymlink == 0 {
			if caps, err := getxattr(path, capabilityXattr); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			} else if caps != nil {
				hdr.PAXRecords = map[string]string{"SCHILY.xattr." + capabilityXattr: string(caps)}
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		// A file that changes size under us would make a corrupt layer:
		// the tar writer refuses a short or long copy.
		if _, err := io.Copy(tw, f); err != nil {
			return fmt.Errorf("%s: %w (is the template being changed?)", rel, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// getxattr is the value of attribute attr of path, nil when it has none.
func getxattr(path, attr string) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Getxattr(path, attr, buf)
		switch {
		case errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP):
			return nil, nil
		case errors.Is(err, unix.ERANGE) && len(buf) < 64<<10:
			buf = make([]byte, 4*len(buf))
			continue
		case err != nil:
			return nil, fmt.Errorf("getxattr %s: %w", attr, err)
		}
		return buf[:n], nil
	}
}
