package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"withruntime.dev/runtime/internal/agentapi"
)

// Linux's limits on paths, in bytes.
const (
	// nameMax is NAME_MAX: the longest name of one file or directory.
	nameMax = 255
	// pathMax is PATH_MAX less its terminating NUL: the longest path.
	pathMax = 4095
)

// resolve turns a request path into an absolute, clean path: relative paths
// are under the workspace. Empty paths, paths with NUL and paths past
// Linux's limits (a name of more than 255 bytes, a path of more than 4095)
// are refused.
func (s *Server) resolve(p string) (string, error) {
	if p == "" {
		return "", badRequest("path is required; give an absolute path or one relative to %s", s.cfg.Workspace)
	}
	if strings.ContainsRune(p, 0) {
		return "", badRequest("path %q contains a NUL byte, which no file name can hold", p)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.cfg.Workspace, p)
	}
	p = filepath.Clean(p)
	for name := range strings.SplitSeq(p, "/") {
		if len(name) > nameMax {
			return "", badRequest("a name in path %s is %d bytes (%s); a file or directory name may be at most %d bytes (NAME_MAX): shorten it",
				abbrev(p, 80), len(name), abbrev(name, 32), nameMax)
		}
	}
	if len(p) > pathMax {
		return "", badRequest("path %s is %d bytes; a path may be at most %d bytes (PATH_MAX): shorten it", abbrev(p, 80), len(p), pathMax)
	}
	return p, nil
}

// abbrev is s, or its first n bytes or less (never splitting a UTF-8
// character) and "…" when it is longer.
func abbrev(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// checkTarget refuses a write (upload, mkdir, rename) onto path when
// something other than a regular file or a directory is there: a device, a
// FIFO or a socket, also behind symlinks. A write never opens or replaces
// such a node, where it would hang, write through to a device, or break the
// sandbox (/dev/null). A new path, or a dangling symlink, passes; other
// errors are left to the write to report.
func checkTarget(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return nil
	}
	m := st.Mode()
	if m.IsRegular() || m.IsDir() {
		return nil
	}
	const fix = "the file API writes only regular files and directories; delete it first (DELETE /files) or pick another path"
	if lst, err := os.Lstat(path); err == nil && lst.Mode()&fs.ModeSymlink != 0 {
		target, _ := filepath.EvalSymlinks(path)
		return badRequest("%s is a symbolic link to %s, which is %s, not a regular file; %s", path, target, fileKind(m), fix)
	}
	return badRequest("%s is %s, not a regular file; %s", path, fileKind(m), fix)
}

// fileKind names a special file's type, with its article.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a special file (" + m.Type().String() + ")"
}

// queryPath resolves the path query parameter; def is used when it is absent.
func (s *Server) queryPath(r *http.Request, def string) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		p = def
	}
	return s.resolve(p)
}

// fsErr maps a filesystem error about path to an API error with a message
// that says what was wrong. Unknown errors pass through (500).
func fsErr(err error, path string) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err
	}
	switch errno {
	case syscall.ENOENT:
		return notFound("%s does not exist; check the path (GET /files/list shows a directory's contents)", path)
	case syscall.ENOSPC, syscall.EDQUOT:
		return &apiError{status: http.StatusInsufficientStorage, code: agentapi.CodeNoSpace,
			msg: fmt.Sprintf("the sandbox's disk is full while writing %s; delete files to free space or use a larger disk", path)}
	case syscall.EISDIR:
		return badRequest("%s is a directory, but this operation needs a file", path)
	case syscall.ENOTDIR:
		return badRequest("a component of %s is a file, not a directory; check the path", path)
	case syscall.EEXIST:
		return conflict("%s already exists", path)
	case syscall.ENOTEMPTY:
		return conflict("directory %s is not empty; pass recursive=true to delete it with its contents", path)
	case syscall.EACCES, syscall.EPERM:
		return &apiError{status: http.StatusForbidden, code: agentapi.CodeForbidden,
			msg: fmt.Sprintf("permission denied on %s", path)}
	case syscall.EROFS:
		return &apiError{status: http.StatusForbidden, code: agentapi.CodeForbidden,
			msg: fmt.Sprintf("%s is on a read-only filesystem; write under %s instead", path, agentapi.Workspace)}
	case syscall.ENAMETOOLONG:
		return badRequest("path %s is too long: a name may be at most %d bytes (NAME_MAX), a path %d (PATH_MAX)", path, nameMax, pathMax)
	case syscall.ELOOP:
		return badRequest("%s has too many levels of symbolic links", path)
	case syscall.EBUSY:
		return conflict("%s is busy (a mount point or in use)", path)
	case syscall.EINVAL:
		return badRequest("invalid operation on %s (for example moving a directory into itself)", path)
	}
	return err
}

// mkdirAllOwned creates dir and its missing parents, each owned by acct
// (mode 0755), and returns the directories it created, outermost first.
func mkdirAllOwned(dir string, acct account) ([]string, error) {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err == nil {
			if !st.IsDir() {
				return nil, badRequest("%s is a file, so directory %s cannot be created under it", d, dir)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fsErr(err, d)
		}
		missing = append(missing, d)
		if d == "/" {
			break
		}
	}
	var created []string
	for i := len(missing) - 1; i >= 0; i-- {
		d := missing[i]
		if err := os.Mkdir(d, 0o755); err != nil {
			if st, serr := os.Stat(d); serr == nil && st.IsDir() {
				continue // created concurrently
			}
			removeCreated(created)
			return nil, fsErr(err, d)
		}
		created = append(created, d)
		if err := os.Lchown(d, acct.Uid, acct.Gid); err != nil {
			removeCreated(created)
			return nil, fmt.Errorf("chown %s to %s: %w", d, acct.Name, err)
		}
	}
	return created, nil
}

// removeCreated undoes mkdirAllOwned (innermost first; non-empty stay).
func removeCreated(created []string) {
	for i := len(created) - 1; i >= 0; i-- {
		_ = os.Remove(created[i])
	}
}

// fileInfo describes path without following a final symlink.
func fileInfo(path string) (agentapi.FileInfo, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return agentapi.FileInfo{}, fsErr(err, path)
	}
	return toFileInfo(path, st), nil
}

func toFileInfo(path string, st fs.FileInfo) agentapi.FileInfo {
	fi := agentapi.FileInfo{
		Name:    st.Name(),
		Path:    path,
		Size:    st.Size(),
		Mode:    fmt.Sprintf("%04o", st.Mode().Perm()),
		ModTime: st.ModTime().UTC(),
	}
	if path == "/" {
		fi.Name = "/"
	}
	switch m := st.Mode(); {
	case m.IsRegular():
		fi.Type = "file"
		fi.Metadata = readMetadata(path)
	case m.IsDir():
		fi.Type = "dir"
		fi.Metadata = readMetadata(path)
	case m&fs.ModeSymlink != 0:
		fi.Type = "symlink"
		fi.Target, _ = os.Readlink(path)
	default:
		fi.Type = "other"
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		fi.Uid, fi.Gid = int(sys.Uid), int(sys.Gid)
	}
	return fi
}
