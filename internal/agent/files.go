package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"withruntime.dev/runtime/internal/agentapi"
)

// Patterns of the temporary files that writes rename into place: short
// and independent of the target's name, so that names up to NAME_MAX stay
// usable.
const (
	tempUpload = ".upload-"
	tempMove   = ".move-"
)

// handlePutFile streams the body into a temporary file next to the target
// and renames it into place, so a failed or aborted upload leaves nothing.
// Missing parents are created and owned by the sandbox user. A new file is
// 0644 and owned by the sandbox user; a replaced file keeps its mode and
// owner. A symlink at the path is followed when its target can be resolved.
// Devices, FIFOs and sockets (also behind a symlink) are refused.
func (s *Server) handlePutFile(w http.ResponseWriter, r *http.Request) error {
	path, err := s.queryPath(r, "")
	if err != nil {
		return err
	}
	acct, err := s.lookupAccount("")
	if err != nil {
		return err
	}
	if err := checkTarget(path); err != nil {
		return err
	}
	meta, err := agentapi.ParseMetadata(r.URL.Query().Get("metadata"))
	if err != nil {
		return badRequest("%v", err)
	}
	mode, uid, gid := fs.FileMode(0o644), acct.Uid, acct.Gid
	existed := false
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&fs.ModeSymlink != 0 {
			if target, err := filepath.EvalSymlinks(path); err == nil {
				path = target
				st, _ = os.Lstat(path)
			}
		}
		if st.IsDir() {
			return badRequest("%s is a directory; give a file path such as %s", path, filepath.Join(path, "NAME"))
		}
		if st.Mode().IsRegular() {
			existed = true
			mode = st.Mode().Perm()
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				uid, gid = int(sys.Uid), int(sys.Gid)
			}
		}
	}
	dir := filepath.Dir(path)
	created, err := mkdirAllOwned(dir, acct)
	if err != nil {
		return err
	}
	// A short name of its own (O_EXCL), whatever the target's length: a
	// 255-byte name stays writable.
	tmp, err := s.temps.create(dir, tempUpload, path, existed)
	if err != nil {
		removeCreated(created)
		return fsErr(err, path)
	}
	defer s.temps.done(tmp.Name())
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
			removeCreated(created)
		}
	}()
	if _, err := io.Copy(tmp, r.Body); err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return fsErr(err, path)
		}
		return badRequest("upload of %s was interrupted (%v); nothing was written, send it again", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return fsErr(err, path)
	}
	if err := tmp.Chown(uid, gid); err != nil {
		return fmt.Errorf("chown %s: %w", path, err)
	}
	if err := setMetadata(tmp, meta); err != nil {
		return fsErr(err, path)
	}
	if err := tmp.Close(); err != nil {
		return fsErr(err, path)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fsErr(err, path)
	}
	ok = true
	fi, err := fileInfo(path)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, fi)
	return nil
}

// handleStatFile describes one path (a symlink itself, not its target).
func (s *Server) handleStatFile(w http.ResponseWriter, r *http.Request) error {
	path, err := s.queryPath(r, "")
	if err != nil {
		return err
	}
	fi, err := fileInfo(path)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, fi)
	return nil
}

// handleMkdir creates a directory owned by the sandbox user. With parents it
// behaves like mkdir -p (an existing directory is fine).
func (s *Server) handleMkdir(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.MkdirRequest
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	path, err := s.resolve(req.Path)
	if err != nil {
		return err
	}
	acct, err := s.lookupAccount("")
	if err != nil {
		return err
	}
	if err := checkTarget(path); err != nil {
		return err
	}
	if req.Parents {
		if st, err := os.Stat(path); err == nil && !st.IsDir() {
			return conflict("%s already exists and is not a directory", path)
		}
		if _, err := mkdirAllOwned(path, acct); err != nil {
			return err
		}
	} else {
		if err := os.Mkdir(path, 0o755); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return notFound("parent directory %s does not exist; pass \"parents\": true to create it too", filepath.Dir(path))
			}
			return fsErr(err, path)
		}
		if err := os.Lchown(path, acct.Uid, acct.Gid); err != nil {
			return fmt.Errorf("chown %s: %w", path, err)
		}
	}
	fi, err := fileInfo(path)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, fi)
	return nil
}

// handleDeleteFile removes a file, a symlink, an empty directory, or with
// recursive=true a directory and its contents. / and the workspace itself
// are refused.
func (s *Server) handleDeleteFile(w http.ResponseWriter, r *http.Request) error {
	path, err := s.queryPath(r, "")
	if err != nil {
		return err
	}
	recursive := false
	if v := r.URL.Query().Get("recursive"); v != "" {
		if recursive, err = strconv.ParseBool(v); err != nil {
			return badRequest("recursive=%q is not a boolean; use true or false", v)
		}
	}
	if path == "/" || path == s.cfg.Workspace {
		return badRequest("refusing to delete %s itself; delete the entries inside it instead", path)
	}
	st, err := os.Lstat(path)
	if err != nil {
		return fsErr(err, path)
	}
	if st.IsDir() && recursive {
		err = os.RemoveAll(path)
	} else {
		err = os.Remove(path)
	}
	if err != nil {
		return fsErr(err, path)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleRename moves From to To, creating To's missing parents (owned by the
// sandbox user). Across filesystems a regular file is copied and removed.
func (s *Server) handleRename(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.RenameRequest
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	from, err := s.resolve(req.From)
	if err != nil {
		return err
	}
	to, err := s.resolve(req.To)
	if err != nil {
		return err
	}
	if from == "/" || from == s.cfg.Workspace {
		return badRequest("refusing to move %s itself: commands start there; move the entries inside it instead", from)
	}
	st, err := os.Lstat(from)
	if err != nil {
		return fsErr(err, from)
	}
	acct, err := s.lookupAccount("")
	if err != nil {
		return err
	}
	if err := checkTarget(to); err != nil {
		return err
	}
	if tst, err := os.Lstat(to); err == nil && tst.IsDir() && from != to {
		return conflict("cannot move %s to %s: the destination is an existing directory; to move into it give %s, or delete it first",
			from, to, filepath.Join(to, filepath.Base(from)))
	}
	if _, err := mkdirAllOwned(filepath.Dir(to), acct); err != nil {
		return err
	}
	if err := os.Rename(from, to); err != nil {
		if !errors.Is(err, syscall.EXDEV) {
			var errno syscall.Errno
			if errors.As(err, &errno) {
				switch errno {
				case syscall.EISDIR, syscall.ENOTDIR:
					return badRequest("cannot move %s to %s: a file cannot replace a directory, nor a directory a file", from, to)
				case syscall.EEXIST, syscall.ENOTEMPTY:
					return conflict("cannot move %s to %s: the destination is an existing directory; delete it first or pick another name", from, to)
				}
			}
			return fsErr(err, from)
		}
		if !st.Mode().IsRegular() {
			return badRequest("cannot move %s to %s: they are on different filesystems and only regular files can be moved across; use exec with mv", from, to)
		}
		if err := s.copyAcross(from, to, st); err != nil {
			return err
		}
	}
	fi, err := fileInfo(to)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, fi)
	return nil
}

// copyAcross moves a regular file between filesystems: copy to a temporary
// file beside to, rename it into place, then remove from.
func (s *Server) copyAcross(from, to string, st fs.FileInfo) error {
	src, err := os.Open(from)
	if err != nil {
		return fsErr(err, from)
	}
	defer src.Close()
	_, terr := os.Lstat(to)
	tmp, err := s.temps.create(filepath.Dir(to), tempMove, to, terr == nil)
	if err != nil {
		return fsErr(err, to)
	}
	defer s.temps.done(tmp.Name())
	_, err = io.Copy(tmp, src)
	if err == nil {
		err = tmp.Chmod(st.Mode().Perm())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && err == nil {
		err = tmp.Chown(int(sys.Uid), int(sys.Gid))
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), to)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fsErr(err, to)
	}
	if err := os.Remove(from); err != nil {
		return fsErr(err, from)
	}
	return nil
}
