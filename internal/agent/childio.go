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

// childIO is a command's standard streams: the ends the child gets and the
// agent's.
type childIO struct {
	stdin, stdout, stderr *os.File // the child's (stdin may be the shared /dev/null)
	// outR and errR are the agent's read ends; errR is nil on a terminal,
	// where stderr is the terminal too.
	outR, errR *os.File
	inW        *os.File // the agent's end of a stdin pipe; nil: none
	pty        *os.File // the terminal's master (also outR); nil: pipes
	childEnds  []*os.File
}

// newChildIO makes spec's streams: a terminal (spec.pty), or pipes for
// stdout and stderr and, for given or open stdin, a pipe for stdin, else
// /dev/null.
func newChildIO(spec procSpec) (*childIO, error) {
	c := &childIO{}
	if spec.pty != nil {
		master, slave, err := openPty(*spec.pty, spec.cred)
		if err != nil {
			return nil, err
		}
		c.stdin, c.stdout, c.stderr = slave, slave, slave
		c.outR, c.pty = master, master
		c.childEnds = []*os.File{slave}
		return c, nil
	}
	ok := false
	defer func() {
		if !ok {
			c.closeChildEnds()
			c.closeAgentEnds()
		}
	}()
	null, err := nullStdin()
	if err != nil && spec.stdin == "" && !spec.stdinOpen {
		return nil, fmt.Errorf("the null device for the command's stdin: %w", err)
	}
	c.stdin = null // *os.File: the child gets /dev/null, a read sees EOF at once
	if c.outR, c.stdout, err = childPipe(false); err != nil {
		return nil, fmt.Errorf("create stdout pipe: %w", err)
	}
	c.childEnds = append(c.childEnds, c.stdout)
	if c.errR, c.stderr, err = childPipe(false); err != nil {
		return nil, fmt.Errorf("create stderr pipe: %w", err)
	}
	c.childEnds = append(c.childEnds, c.stderr)
	if spec.stdin != "" || spec.stdinOpen {
		if c.inW, c.stdin, err = childPipe(true); err != nil {
			return nil, fmt.Errorf("create stdin pipe: %w", err)
		}
		c.childEnds = append(c.childEnds, c.stdin)
	}
	ok = true
	return c, nil
}

// closeChildEnds closes the child's ends the agent made: once the child has
// its copies they must go, or EOF would never come.
func (c *childIO) closeChildEnds() {
	for _, f := range c.childEnds {
		f.Close()
	}
	c.childEnds = nil
}

// closeAgentEnds closes the agent's ends (a start that failed).
func (c *childIO) closeAgentEnds() {
	for _, f := range []*os.File{c.outR, c.errR, c.inW} {
		if f != nil {
			f.Close()
		}
	}
}
