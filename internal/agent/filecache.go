package agent

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// fileCache keeps one small file's bytes (the sandbox's /etc/passwd or
// /etc/group) while the file is unchanged, so that every exec does not
// read and parse it again: each read is several traps into gVisor's
// kernel, a stat is one. Safe for concurrent use.
//
// The file is the sandbox's and may change at any time (useradd, an edit
// in place, a rename over it, a bind mount over it), so every get stats
// the path and reads it again unless device, inode, size, mode, mtime and
// ctime all match the read it holds. A change within the same timestamp
// tick as that read could leave all of them equal, so a read is kept only
// when the file's last change (ctime, which no one inside can set back)
// was at least racyWindow before it: any later change then gets a ctime
// of its own. The cached bytes are never older than what a read at the
// time of the stat would return, so a cached lookup gives the same uid as
// a fresh one.
type fileCache struct {
	path string
	now  func() time.Time // the clock; tests move it

	mu    sync.Mutex
	key   fileKey // of the held read, when held
	data  []byte
	held  bool
	reads int // times the file was read (tests)
}

// racyWindow is how long before a read a file's last change must be for
// the read to be kept (see fileCache): well above any file system's
// timestamp tick.
const racyWindow = 2 * time.Second

// fileKey is what a stat says of a file's identity and last change.
type fileKey struct {
	dev, ino     uint64
	size         int64
	mode         uint32
	mtime, ctime syscall.Timespec
}

func keyOf(st *syscall.Stat_t) fileKey {
	return fileKey{dev: st.Dev, ino: st.Ino, size: st.Size, mode: st.Mode, mtime: st.Mtim, ctime: st.Ctim}
}

// newFileCache returns an empty cache of path.
func newFileCache(path string) *fileCache {
	return &fileCache{path: path, now: time.Now}
}

// get returns the file's current bytes, or nil and os.ErrNotExist
// (wrapped) when there is no such file.
func (c *fileCache) get() ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var st syscall.Stat_t
	if err := statRetry(c.path, &st); err != nil {
		c.held, c.data = false, nil
		return nil, &os.PathError{Op: "stat", Path: c.path, Err: err}
	}
	if c.held && keyOf(&st) == c.key {
		return c.data, nil
	}
	c.held, c.data = false, nil
	data, key, err := readWithKey(c.path)
	if err != nil {
		return nil, err
	}
	c.reads++
	changed := time.Unix(key.ctime.Unix())
	if m := time.Unix(key.mtime.Unix()); m.After(changed) {
		changed = m
	}
	if c.now().Sub(changed) >= racyWindow {
		c.key, c.data, c.held = key, data, true
	}
	return data, nil
}

// statRetry is stat(2) of path, again on EINTR.
func statRetry(path string, st *syscall.Stat_t) error {
	for {
		err := syscall.Stat(path, st)
		if err != syscall.EINTR {
			return err
		}
	}
}

// maxCachedFile bounds what readWithKey reads: an account file larger
// than this is refused rather than read into the agent's memory.
const maxCachedFile = 16 << 20

// readWithKey reads path with plain system calls (an os.File would also
// register the descriptor with Go's poller: four more traps under gVisor)
// and returns its bytes with the key of the file it read, taken before
// the read, so a change during the read makes the key stale, never the
// bytes.
func readWithKey(path string) ([]byte, fileKey, error) {
	fd, err := openRetry(path)
	if err != nil {
		return nil, fileKey{}, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, fileKey{}, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, fileKey{}, fmt.Errorf("read %s: not a regular file", path)
	}
	if st.Size > maxCachedFile {
		return nil, fileKey{}, fmt.Errorf("read %s: %d bytes, more than the %d an account file may have", path, st.Size, maxCachedFile)
	}
	buf := make([]byte, 0, st.Size+512)
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= maxCachedFile {
				return nil, fileKey{}, fmt.Errorf("read %s: more than the %d bytes an account file may have", path, maxCachedFile)
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, fileKey{}, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, keyOf(&st), nil
		}
		buf = buf[:len(buf)+n]
	}
}

// openRetry opens path read-only (close-on-exec), again on EINTR. It does
// not block: a FIFO put at the path opens at once and is then refused as
// not a regular file, instead of hanging the agent until a writer comes.
func openRetry(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}
