package gvisor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/driver"
)

// The agent channel. The agent listens on a unix socket in a host directory
// that is mounted into the sandbox read-write (runsc --host-uds=create
// creates the host socket there), so root inside the sandbox can rename,
// delete or replace that socket: with a symlink to another sandbox's socket
// or to any host socket, a server that dialed the path would follow it.
//
// The host therefore trusts nothing in that directory:
//
//  1. the socket is opened without following links: the directory with
//     O_PATH|O_NOFOLLOW, then agent.sock relative to it with O_PATH|
//     O_NOFOLLOW, and the inode must be a socket (a symlink, FIFO, file or
//     directory is refused). The connect goes through /proc/self/fd/N, the
//     very inode just checked, so no swap between check and connect helps.
//  2. the listening end must belong to this sandbox: SO_PEERCRED gives the
//     pid of the process that listens on the host side (runsc's gofer for
//     this sandbox), and that process must be in the sandbox's own host
//     cgroup (/withruntime/<id>), which nothing inside a sandbox can change.
//
// What root inside can still do is break its own agent channel (delete the
// socket, listen on a socket of its own in the directory): then it talks
// to itself, which it could anyway. The directory is a tmpfs of
// socketDirBytes (see mountSocketDir), so filling it costs the host nothing.

// socketName is the agent's socket in the sandbox's socket directory.
const socketName = "agent.sock"

// agentDialer dials one sandbox's agent, and only it.
type agentDialer struct {
	id      string
	sockDir string // host path of the socket directory (created by the host)
	cgroup  string // the sandbox's host cgroup path, e.g. /withruntime/<id>
}

func newAgentDialer(id, sockDir string) *agentDialer {
	return &agentDialer{id: id, sockDir: sockDir, cgroup: cgroupPath(id)}
}

// dial connects to the agent after the checks above. Every refusal wraps
// driver.ErrChannel.
func (a *agentDialer) dial(ctx context.Context) (net.Conn, error) {
	fd, err := a.openSocket()
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
	if err != nil {
		return nil, fmt.Errorf("agent of %s: %w", a.id, err)
	}
	if err := a.checkPeer(conn.(*net.UnixConn)); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// openSocket returns an O_PATH descriptor of the socket inode at
// sockDir/agent.sock, never following a link.
func (a *agentDialer) openSocket() (int, error) {
	dir, err := unix.Open(a.sockDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("agent of %s: socket directory: %w", a.id, err)
	}
	defer unix.Close(dir)
	fd, err := unix.Openat(dir, socketName, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		// Normal while the agent boots; afterwards only root inside
		// removes it (the agent never does).
		return -1, fmt.Errorf("agent of %s: %w: %w: %s is missing", a.id, driver.ErrChannel, os.ErrNotExist, socketName)
	}
	if err != nil {
		return -1, fmt.Errorf("agent of %s: %w", a.id, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("agent of %s: %w", a.id, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		unix.Close(fd)
		return -1, a.refuse("%s is a %s, not a socket (replaced from inside the sandbox)", socketName, fileKind(st.Mode))
	}
	return fd, nil
}

// checkPeer refuses a connection whose listening end is not in the
// sandbox's own host cgroup.
func (a *agentDialer) checkPeer(conn *net.UnixConn) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("agent of %s: %w", a.id, err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return fmt.Errorf("agent of %s: %w", a.id, err)
	}
	if credErr != nil {
		return fmt.Errorf("agent of %s: peer credentials: %w", a.id, credErr)
	}
	ok, err := inCgroup(int(cred.Pid), a.cgroup)
	if err != nil {
		return a.refuse("the socket's listener (pid %d) cannot be checked: %v", cred.Pid, err)
	}
	if !ok {
		return a.refuse("the socket's listener (pid %d) is not part of this sandbox", cred.Pid)
	}
	return nil
}

func (a *agentDialer) refuse(format string, args ...any) error {
	return fmt.Errorf("agent of %s: %w: %s", a.id, driver.ErrChannel, fmt.Sprintf(format, args...))
}

// inCgroup reports whether process pid is in the host cgroup path (in any
// v1 hierarchy or in the v2 one), from /proc/<pid>/cgroup.
func inCgroup(pid int, path string) (bool, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 && parts[2] == path {
			return true, nil
		}
	}
	return false, sc.Err()
}

func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "device"
	}
	return "file of another kind"
}

// socketDirBytes is the size of the tmpfs over each sandbox's socket
// directory: room for the socket and nothing more, so that writing there
// from inside (root can) fills a few pages of host memory, not the host's
// disk. socketDirInodes caps the number of entries likewise.
const (
	socketDirBytes  = 64 << 10
	socketDirInodes = 16
)

// Modes of the socket directory. The sandbox user may pass through it
// (socketDirMode, no listing, no writing) to the host directory mounted
// inside (mountHostDir), whose files /etc links to; the agent's socket is
// root's alone (mode 0600, agent.Listen), so the user cannot reach the
// agent. A sandbox booted before the host directory existed has an agent
// that makes its socket 0666: its directory stays closed
// (socketDirModeOld) when a restore mounts it again.
const (
	socketDirMode    = "0711"
	socketDirModeOld = "0700"
)

// mountSocketDir mounts a small tmpfs of mode on dir, the host directory
// that becomes the sandbox's socket directory.
func mountSocketDir(dir, mode string) error {
	opts := "size=" + strconv.Itoa(socketDirBytes) + ",nr_inodes=" + strconv.Itoa(socketDirInodes) + ",mode=" + mode
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("mount the socket directory %s: %w", dir, err)
	}
	return nil
}

// unmountSocketDir undoes mountSocketDir; a directory with nothing mounted
// (a sandbox of an older version, or a create that failed first) is fine.
func unmountSocketDir(dir string) error {
	err := unix.Unmount(dir, unix.MNT_DETACH)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("unmount the socket directory %s: %w", dir, err)
}
