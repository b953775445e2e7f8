package api

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/errs"
)

// A volume's files without a sandbox: download, upload and list, on the
// host, through the os.Root of the volume's data directory (so no path, and
// no link a sandbox left in the volume, leads out of it). Paths follow the
// sandbox file API's rules, with the volume's root for /: absolute, or
// relative to the root; no NUL; names of at most 255 bytes, paths of at
// most 4095. Everything in a volume was written by sandboxes and is
// hostile: a download opens only regular files (without blocking on a
// FIFO), an upload writes a new file beside the target and renames it over
// (never writing through whatever is at the path: a symbolic link there is
// replaced, not followed), as the sandbox user (uid 1000).

// volumeUID and volumeGID own what an upload writes: the sandbox user.
const volumeUID, volumeGID = 1000, 1000

func (s *Server) volumeFileRoutes() {
	s.handle("GET", "/v1/volumes/{name}/files", s.getVolumeFile)
	s.handle("PUT", "/v1/volumes/{name}/files", s.putVolumeFile)
	s.handle("GET", "/v1/volumes/{name}/files/list", s.listVolumeFiles)
}

// volumePath checks a volume file path and returns its clean absolute form
// ("/" the root) and its name under the os.Root ("." the root).
func volumePath(p string, required bool) (abs, name string, err error) {
	if p == "" {
		if required {
			return "", "", badRequest("path is required: a path in the volume, absolute (from its root) or relative to its root")
		}
		p = "/"
	}
	if strings.ContainsRune(p, 0) {
		return "", "", badRequest("path %q contains a NUL byte, which no file name can hold", p)
	}
	abs = path.Clean("/" + p)
	for n := range strings.SplitSeq(abs, "/") {
		if len(n) > 255 {
			return "", "", badRequest("a name in path %.80s is %d bytes; a file or directory name may be at most 255 bytes (NAME_MAX): shorten it", abs, len(n))
		}
	}
	if len(abs) > 4095 {
		return "", "", badRequest("path %.80s is %d bytes; a path may be at most 4095 bytes (PATH_MAX): shorten it", abs, len(abs))
	}
	if abs == "/" {
		return abs, ".", nil
	}
	return abs, abs[1:], nil
}

// volumeFileErr explains a failure on the volume file at abs.
func volumeFileErr(err error, volume, abs string) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			// os.Root refuses a path that leaves the volume (through "..", a
			// symbolic link out of it): the volume's content is hostile.
			return badRequest("%s in volume %q cannot be opened inside the volume (%v); a symbolic link on the way may lead out of it", abs, volume, pe.Err)
		}
		return err
	}
	switch errno {
	case syscall.ENOENT:
		return notFound("%s does not exist in volume %q; list it with GET /v1/volumes/%s/files/list", abs, volume, volume)
	case syscall.ENOSPC, syscall.EDQUOT:
		return errs.New(errs.NoSpace, "volume %q is full while writing %s; delete files from it or use a larger volume", volume, abs)
	case syscall.EISDIR:
		return badRequest("%s in volume %q is a directory, but this needs a file", abs, volume)
	case syscall.ENOTDIR:
		return badRequest("a component of %s in volume %q is a file, not a directory", abs, volume)
	case syscall.ELOOP:
		return badRequest("%s in volume %q has too many levels of symbolic links", abs, volume)
	case syscall.ENAMETOOLONG:
		return badRequest("path %s is too long", abs)
	case syscall.EROFS:
		return errs.New(errs.Conflict, "volume %q is read-only on the host (its filesystem found an error and stopped writes); an administrator should check it", volume)
	}
	return err
}

func (s *Server) getVolumeFile(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.RawQuery, map[string]queryRule{"path": pathParam}); err != nil {
		return err
	}
	vol := r.PathValue("name")
	abs, name, err := volumePath(r.URL.Query().Get("path"), true)
	if err != nil {
		return err
	}
	root, err := s.cfg.Manager.OpenVolume(r.Context(), keyFrom(r.Context()).ID, vol)
	if err != nil {
		return err
	}
	defer root.Close()
	// O_NONBLOCK: a FIFO opens at once instead of waiting for a writer, and
	// is refused below.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return volumeFileErr(err, vol, abs)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return volumeFileErr(err, vol, abs)
	}
	if st.IsDir() {
		return badRequest("%s in volume %q is a directory; list it with GET /v1/volumes/%s/files/list?path=%s", abs, vol, vol, abs)
	}
	if !st.Mode().IsRegular() {
		return badRequest("%s in volume %q is not a regular file (%s); only regular files can be downloaded", abs, vol, st.Mode().Type())
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	http.ServeContent(w, r, "", st.ModTime(), f) // Range, If-Range, If-Modified-Since
	return nil
}

func (s *Server) putVolumeFile(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.RawQuery, map[string]queryRule{"path": pathParam}); err != nil {
		return err
	}
	vol := r.PathValue("name")
	abs, name, err := volumePath(r.URL.Query().Get("path"), true)
	if err != nil {
		return err
	}
	if abs == "/" {
		return badRequest("path / is the volume's root, a directory; give a file path such as /data.csv")
	}
	if r.ContentLength > s.cfg.MaxUploadBytes {
		return errs.New(errs.TooLarge, "upload of %d bytes is over the %d-byte cap per file; split it or raise --max-upload-bytes", r.ContentLength, s.cfg.MaxUploadBytes)
	}
	root, err := s.cfg.Manager.OpenVolume(r.Context(), keyFrom(r.Context()).ID, vol)
	if err != nil {
		return err
	}
	defer root.Close()
	if st, err := root.Lstat(name); err == nil && st.IsDir() {
		return badRequest("%s in volume %q is a directory; give a file path such as %s", abs, vol, path.Join(abs, "NAME"))
	}
	dir := path.Dir(name)
	if err := mkdirOwned(root, dir); err != nil {
		return volumeFileErr(err, vol, path.Dir(abs))
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, ".upload-"+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return volumeFileErr(err, vol, abs)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			_ = root.Remove(tmp)
		}
	}()
	if _, err := io.Copy(f, http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes)); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errs.New(errs.TooLarge, "upload is over the %d-byte cap per file; nothing was written", mbe.Limit)
		}
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return volumeFileErr(err, vol, abs)
		}
		return badRequest("upload of %s was interrupted (%v); nothing was written, send it again", abs, err)
	}
	if err := f.Chown(volumeUID, volumeGID); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return volumeFileErr(err, vol, abs)
	}
	if err := root.Rename(tmp, name); err != nil {
		return volumeFileErr(err, vol, abs)
	}
	done = true
	st, err := root.Lstat(name)
	if err != nil {
		return volumeFileErr(err, vol, abs)
	}
	writeJSON(w, http.StatusOK, volumeFileInfo(root, abs, st))
	return nil
}

// mkdirOwned makes dir and its missing parents under root, owned by the
// sandbox user.
func mkdirOwned(root *os.Root, dir string) error {
	if dir == "." {
		return nil
	}
	cur := ""
	for part := range strings.SplitSeq(dir, "/") {
		cur = path.Join(cur, part)
		err := root.Mkdir(cur, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := root.Lchown(cur, volumeUID, volumeGID); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) listVolumeFiles(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.RawQuery, map[string]queryRule{"path": pathParam,
		"limit": intParam(1, agentapi.ListMaxLimit, "entries per page"), "cursor": cursorParam}); err != nil {
		return err
	}
	vol := r.PathValue("name")
	q := r.URL.Query()
	abs, name, err := volumePath(q.Get("path"), false)
	if err != nil {
		return err
	}
	limit := agentapi.ListDefaultLimit
	if v := q.Get("limit"); v != "" {
		limit, _ = strconv.Atoi(v) // checked above
	}
	after := ""
	if c := q.Get("cursor"); c != "" {
		cp, _ := agentapi.ParseListCursor(c) // checked above
		if path.Dir(cp) != abs {
			return badRequest("the cursor names %.200s, which is not in %s: a cursor continues the listing it came from; list %s again without a cursor", cp, abs, abs)
		}
		after = path.Base(cp)
	}
	root, err := s.cfg.Manager.OpenVolume(r.Context(), keyFrom(r.Context()).ID, vol)
	if err != nil {
		return err
	}
	defer root.Close()
	d, err := root.Open(name)
	if err != nil {
		return volumeFileErr(err, vol, abs)
	}
	defer d.Close()
	if st, err := d.Stat(); err != nil || !st.IsDir() {
		if err != nil {
			return volumeFileErr(err, vol, abs)
		}
		return badRequest("%s in volume %q is not a directory", abs, vol)
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return volumeFileErr(err, vol, abs)
	}
	slices.Sort(names)
	total := len(names)
	out := agentapi.FileList{Entries: []agentapi.FileInfo{}, Total: &total}
	for _, n := range names {
		if n <= after {
			continue
		}
		if len(out.Entries) == limit {
			out.Truncated = true
			out.Next = agentapi.ListCursor(out.Entries[len(out.Entries)-1].Path)
			break
		}
		st, err := root.Lstat(path.Join(name, n))
		if err != nil {
			continue // gone meanwhile
		}
		out.Entries = append(out.Entries, volumeFileInfo(root, path.Join(abs, n), st))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// volumeFileInfo describes the entry at abs (its clean path in the volume)
// as the sandbox file API does.
func volumeFileInfo(root *os.Root, abs string, st fs.FileInfo) agentapi.FileInfo {
	fi := agentapi.FileInfo{Name: st.Name(), Path: abs, Size: st.Size(), Mode: fmt.Sprintf("%04o", st.Mode().Perm()), ModTime: st.ModTime().UTC()}
	switch m := st.Mode(); {
	case m.IsRegular():
		fi.Type = "file"
	case m.IsDir():
		fi.Type = "dir"
	case m&fs.ModeSymlink != 0:
		fi.Type = "symlink"
		fi.Target, _ = root.Readlink(strings.TrimPrefix(abs, "/"))
	default:
		fi.Type = "other"
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		fi.Uid, fi.Gid = int(sys.Uid), int(sys.Gid)
	}
	return fi
}
