package agent

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/sdk/go/wire"
)

// openPty opens a new pseudo-terminal of size: the master, non-blocking and
// polled by Go's poller (so that reads take deadlines, as a command's pipes
// do: see outStream), and the slave, a plain blocking descriptor for the
// child. Both are close-on-exec. When cred is set the slave is given to
// that user (mode 0620), as login(1) and sshd do, so that a program that
// reopens its tty by name (ssh, sudo, tmux) can.
//
// github.com/creack/pty opens the same way but reaches the master's
// descriptor through os.File.Fd, which puts it back into blocking mode and
// takes it off the poller: its reads could then not be given up on after
// the command ends (a daemon holding the terminal would hold the answer
// open), so the few ioctls are done here with golang.org/x/sys.
func openPty(size wire.PtySize, cred *syscall.Credential) (master, slave *os.File, err error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	fail := func(err error) (*os.File, *os.File, error) {
		unix.Close(mfd)
		return nil, nil, err
	}
	n, err := unix.IoctlGetUint32(mfd, unix.TIOCGPTN)
	if err != nil {
		return fail(fmt.Errorf("the terminal's number (TIOCGPTN): %w", err))
	}
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		return fail(fmt.Errorf("unlock the terminal (TIOCSPTLCK): %w", err))
	}
	if err := unix.IoctlSetWinsize(mfd, unix.TIOCSWINSZ, winsize(size)); err != nil {
		return fail(fmt.Errorf("set the terminal's size: %w", err))
	}
	name := "/dev/pts/" + strconv.FormatUint(uint64(n), 10)
	sfd, err := unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("open %s: %w", name, err))
	}
	if cred != nil {
		// Best effort: a devpts that refuses leaves the slave root's, which
		// the command still uses through the descriptor it inherits.
		_ = unix.Fchown(sfd, int(cred.Uid), int(cred.Gid))
		_ = unix.Fchmod(sfd, 0o620)
	}
	// os.NewFile polls a descriptor it finds non-blocking.
	return os.NewFile(uintptr(mfd), "/dev/ptmx"), os.NewFile(uintptr(sfd), name), nil
}

// winsize is size as the kernel takes it.
func winsize(size wire.PtySize) *unix.Winsize {
	return &unix.Winsize{Row: uint16(size.Rows), Col: uint16(size.Cols)}
}

// setPtySize resizes the terminal whose master is m; the kernel sends
// SIGWINCH to its foreground process group. It goes through the file's
// reference count (SyscallConn), so a master closed meanwhile is an error,
// never an ioctl on a descriptor number reused by something else.
func setPtySize(m *os.File, size wire.PtySize) error {
	rc, err := m.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) { ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, winsize(size)) }); err != nil {
		return err
	}
	return ierr
}

// checkPtySize refuses a size out of wire's bounds; what names the field.
func checkPtySize(what string, size wire.PtySize) error {
	if size.Cols < 1 || size.Cols > wire.MaxPtyCols || size.Rows < 1 || size.Rows > wire.MaxPtyRows {
		return badRequest("%s must have cols from 1 to %d and rows from 1 to %d, got cols %d, rows %d",
			what, wire.MaxPtyCols, wire.MaxPtyRows, size.Cols, size.Rows)
	}
	return nil
}

// withTerm adds TERM=wire.DefaultTerm to env unless it sets TERM.
func withTerm(env []string) []string {
	for _, kv := range env {
		if len(kv) >= 5 && kv[:5] == "TERM=" {
			return env
		}
	}
	return append(env[:len(env):len(env)], "TERM="+wire.DefaultTerm)
}
