package agent

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

// A command's standard streams, made with fewer system calls than os.Pipe
// and exec.Cmd's own /dev/null: under gVisor each is a trap into the
// sandbox's kernel (bench/README.md, agent). os.Pipe registers both ends
// with Go's poller and exec.Cmd then sets the child's end back to
// blocking and deregisters it at close: seven calls per child end where
// two do. The agent's end stays non-blocking and polled, so reading it
// holds no thread.

// childPipe returns a pipe whose parent end (read, or write when
// parentWrites) is non-blocking and polled and whose child end is a plain
// blocking descriptor. Both are close-on-exec; exec.Cmd dups the child end
// into the child.
func childPipe(parentWrites bool) (parent, child *os.File, err error) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("pipe2: %w", err)
	}
	p, c := fds[0], fds[1]
	if parentWrites {
		p, c = c, p
	}
	if err := syscall.SetNonblock(p, true); err != nil {
		syscall.Close(p)
		syscall.Close(c)
		return nil, nil, fmt.Errorf("set the pipe non-blocking: %w", err)
	}
	// os.NewFile polls a descriptor it finds non-blocking, and leaves a
	// blocking one alone.
	return os.NewFile(uintptr(p), "|0"), os.NewFile(uintptr(c), "|1"), nil
}

var devNull struct {
	once sync.Once
	f    *os.File
	err  error
}

// nullStdin returns /dev/null open for reading, opened once and shared by
// every command that has no stdin (the child gets a dup of it). New opens
// it at the agent's start, before any command runs, so it is the null
// device runsc made even if root inside replaces /dev/null later.
func nullStdin() (*os.File, error) {
	devNull.once.Do(func() {
		fd, err := syscall.Open(os.DevNull, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			devNull.err = &os.PathError{Op: "open", Path: os.DevNull, Err: err}
			return
		}
		devNull.f = os.NewFile(uintptr(fd), os.DevNull)
	})
	return devNull.f, devNull.err
}
