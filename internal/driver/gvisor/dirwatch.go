package gvisor

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

// socketRecheck bounds a wait for the agent's socket to appear: the
// directory is looked at again after it even if no event came.
const socketRecheck = 50 * time.Millisecond

// dirWatch is an inotify watch of a directory for entries appearing.
type dirWatch struct{ fd int }

// watchDir watches dir for entries created or moved in; on any error the
// watch is inert (wait reports false, and the caller polls).
func watchDir(dir string) dirWatch {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return dirWatch{fd: -1}
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_ONLYDIR); err != nil {
		unix.Close(fd)
		return dirWatch{fd: -1}
	}
	return dirWatch{fd: fd}
}

// wait blocks until an entry appears in the directory, d passes or ctx
// ends, and drains the events. It reports false (without waiting) when the
// watch is inert.
func (w dirWatch) wait(ctx context.Context, d time.Duration) bool {
	if w.fd < 0 {
		return false
	}
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	_, _ = unix.Poll(fds, int(max(d, time.Millisecond)/time.Millisecond))
	var buf [4096]byte
	for {
		if n, err := unix.Read(w.fd, buf[:]); n <= 0 || err != nil {
			break
		}
	}
	return true
}

func (w dirWatch) close() {
	if w.fd >= 0 {
		unix.Close(w.fd)
	}
}
