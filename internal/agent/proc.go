package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/sdk/go/wire"
)

// procSpec is a resolved, validated command ready to start.
type procSpec struct {
	path  string   // absolute program path
	args  []string // argv, args[0] included
	dir   string
	env   []string
	cred  *syscall.Credential // nil: run as the agent's own user
	stdin string
	// stdinOpen gives the command a stdin pipe that stays open for
	// proc.writeStdin until proc.closeStdin (background processes).
	stdinOpen bool
	// pty runs the command on a terminal of this size: stdin, stdout and
	// stderr are the terminal (stderr's stream is nil).
	pty     *wire.PtySize
	timeout time.Duration // 0: none
	// hostKillNote says why a process died of a SIGKILL the agent did not
	// send, when the sandbox's memory is, or just was, at its limit
	// (guard.hostKillNote), and is "" otherwise; nil: never.
	hostKillNote func() string
}

// proc is one running (or finished) command: its own session and process
// group, with stdout and stderr on pipes the agent created, or on a
// terminal.
type proc struct {
	pid     int
	cmd     *exec.Cmd
	cg      *cgroup  // the command's own cgroup; nil: none (see cgroups)
	cgs     *cgroups // where cg is released once the command is done
	started time.Time
	streams [2]*outStream
	exited  chan struct{} // the main process has exited and been reaped
	done    chan struct{} // exited, and both streams at EOF or given up on

	mu        sync.Mutex
	reaped    bool // once true, pid may be reused: never signal -pid again
	killed    bool // the agent sent SIGKILL while the main process ran
	timedOut  bool
	oomKilled bool // the guard killed it for the sandbox's memory
	pidKilled bool // the guard killed it for the sandbox's process limit
	timer     *time.Timer
	ended     time.Time
	// hostKillNote is procSpec.hostKillNote.
	hostKillNote func() string
	// note is the line the agent appends to the command's stderr to say
	// why it killed it ("": none).
	note string

	// stdin is the write end of an open stdin pipe (procSpec.stdinOpen);
	// nil once closed. stdinMu serialises writes and the close.
	stdinMu sync.Mutex
	stdin   *os.File

	// pty is the terminal's master for a command started on one (also
	// streams[stdout]'s reader, which closes it at the terminal's end);
	// nil: pipes. ptyMu serialises input writes.
	ptyMu sync.Mutex
	pty   *os.File
}

// startProc starts spec with output going to sk, in a cgroup of its own
// when cgs is not nil. The caller owns the result and learns of its end
// through done.
func startProc(spec procSpec, sk sink, cgs *cgroups) (*proc, error) {
	cio, err := newChildIO(spec)
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path:   spec.path,
		Args:   spec.args,
		Dir:    spec.dir,
		Env:    spec.env,
		Stdin:  cio.stdin, // *os.File: the child gets the fd, exec starts no copier
		Stdout: cio.stdout,
		Stderr: cio.stderr,
		SysProcAttr: &syscall.SysProcAttr{
			Setsid:     true, // own session and process group, pgid == pid
			Credential: spec.cred,
			// On a terminal: it becomes the session's controlling tty
			// (the child's fd 0).
			Setctty: cio.pty != nil,
		},
	}
	var cg *cgroup
	if cgs != nil {
		if cg, err = cgs.create(); err != nil {
			cgs.log.Warn("the command runs without a cgroup of its own", "err", err)
		}
	}
	// Registered with the reaper as it starts, so that PID 1's orphan
	// reaping never takes this command's exit status.
	err = reap.start(func() (int, error) {
		var err error
		if cg, err = forkIn(cmd, cgs, cg); err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	})
	cio.closeChildEnds()
	if err != nil {
		cio.closeAgentEnds()
		if cg != nil {
			cgs.release(cg)
		}
		if errors.Is(err, fs.ErrPermission) {
			return nil, &apiError{status: 403, code: agentapi.CodeForbidden,
				msg: fmt.Sprintf("permission denied starting %s: %v; check that the program is executable by the user it runs as", spec.path, err)}
		}
		return nil, fmt.Errorf("start %s: %w", spec.path, err)
	}
	var openStdin *os.File
	if cio.inW != nil && spec.stdinOpen {
		openStdin = cio.inW
	} else if inW := cio.inW; inW != nil {
		go func() {
			// EPIPE if the command exits without reading it all: fine.
			_, _ = io.WriteString(inW, spec.stdin)
			inW.Close()
		}()
	}
	p := &proc{
		pid:     cmd.Process.Pid,
		cmd:     cmd,
		cg:      cg,
		cgs:     cgs,
		started: time.Now(),
		exited:  make(chan struct{}),
		done:    make(chan struct{}),
		stdin:   openStdin,
		pty:     cio.pty,

		hostKillNote: spec.hostKillNote,
	}
	p.streams[stdout] = newOutStream(stdout, cio.outR, sk)
	if cio.errR != nil {
		p.streams[stderr] = newOutStream(stderr, cio.errR, sk)
	}
	for _, s := range p.streams {
		if s != nil {
			go s.run()
		}
	}
	if spec.timeout > 0 {
		p.mu.Lock()
		p.timer = time.AfterFunc(spec.timeout, p.onTimeout)
		p.mu.Unlock()
	}
	go p.wait()
	return p, nil
}

// noteStream is where the agent's note goes: stderr, or the terminal.
func (p *proc) noteStream() *outStream {
	if s := p.streams[stderr]; s != nil {
		return s
	}
	return p.streams[stdout]
}

// forkIn starts cmd in cg (see cgroups.startIn) and returns cg, or nil if
// the command was started without a cgroup.
func forkIn(cmd *exec.Cmd, cgs *cgroups, cg *cgroup) (*cgroup, error) {
	if cg == nil {
		return nil, cmd.Start()
	}
	contained, err := cgs.startIn(cg, cmd.Start)
	if !contained {
		cgs.release(cg)
		return nil, err
	}
	return cg, err
}

// wait reaps the main process, then waits for the output streams.
func (p *proc) wait() {
	// Wait for the exit without reaping, so that a concurrent kill holding
	// p.mu can still address the process group safely: the zombie keeps the
	// pid (and pgid) from being reused until the reap below.
	waitExitNoReap(p.pid)
	p.mu.Lock()
	p.ended = time.Now()
	p.reaped = true
	_ = p.cmd.Wait() // the status is in cmd.ProcessState
	p.noteHostOOMKill()
	reap.reaped(p.pid)
	if p.timer != nil {
		p.timer.Stop()
	}
	grace := lingerGrace
	if p.killed {
		grace = killedGrace
	}
	if p.note != "" {
		p.noteStream().setEpilogue([]byte(p.note))
	}
	p.mu.Unlock()
	close(p.exited)
	p.closeStdin()
	for _, s := range p.streams {
		if s != nil {
			s.mainExited(grace)
		}
	}
	for _, s := range p.streams {
		if s != nil {
			<-s.done
		}
	}
	close(p.done)
	if p.cg != nil {
		// Kept while daemons the command left still run, so that a kill
		// of a finished background process still reaches them.
		p.cgs.release(p.cg)
	}
}

// waitExitNoReap blocks until pid has exited, leaving it a zombie.
func waitExitNoReap(pid int) {
	const (
		pPID    = 1
		wExited = 0x4
		wNoWait = 0x1000000
	)
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}

func (p *proc) onTimeout() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return
	}
	if !p.oomKilled && !p.pidKilled {
		p.timedOut = true
	}
	p.signalLocked(syscall.SIGKILL)
}

// noteHostOOMKill marks as out of memory a main process that died of a
// SIGKILL the agent did not send while the sandbox's memory was at its
// limit. That is the host's OOM killer: when a command outgrows the guard
// (on a loaded host the guard may not get the CPU in time), the host kills
// the command's systrap stub at the sandbox's host limit, and gVisor ends
// the command with SIGKILL. A shell reports a child killed so as its exit
// status 137, which counts the same. A `kill -9` from inside at that very
// moment is reported the same way. Called with p.mu held, once reaped.
func (p *proc) noteHostOOMKill() {
	if p.killed || p.timedOut || p.pidKilled || p.hostKillNote == nil || !diedOfSIGKILL(p.cmd.ProcessState) {
		return
	}
	if note := p.hostKillNote(); note != "" {
		p.oomKilled, p.note = true, note
	}
}

// diedOfSIGKILL reports whether st is a death by SIGKILL, or the exit
// status 137 (128 + SIGKILL) with which a shell reports its child's.
func diedOfSIGKILL(st *os.ProcessState) bool {
	ws, _ := st.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return ws.Signal() == syscall.SIGKILL
	}
	return ws.Exited() && ws.ExitStatus() == 128+int(syscall.SIGKILL)
}

// kill kills the command's whole tree for the guard. A kill for memory
// that reaches the main process makes the result an out-of-memory kill;
// note, the guard's reason, then ends its stderr.
func (p *proc) kill(why killReason, note string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped && !p.timedOut && !p.oomKilled && !p.pidKilled {
		p.oomKilled = why == byMemory
		p.pidKilled = why == byProcs
		p.note = note
	}
	p.signalLocked(syscall.SIGKILL)
}

// signal sends sig to everything the command started: every process in
// its cgroup, whatever session or parent it moved to, also after the main
// process has exited. Without a cgroup: its process group, its session,
// and every descendant found through /proc PPid links (which may have
// moved to another session), and after the main process has exited only
// the leftovers of its group and session.
func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.signalLocked(sig)
}

func (p *proc) signalLocked(sig syscall.Signal) {
	if !p.reaped && sig == syscall.SIGKILL {
		p.killed = true
	}
	if p.cg != nil {
		p.cg.signal(sig)
		return
	}
	if !p.reaped {
		signalTree(p.pid, sig, true)
		return
	}
	// Reaped: if the pid exists again it was reused by someone else, whose
	// group and session must not be touched. Otherwise no new session or
	// group can have this id, and whatever still has it is ours.
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", p.pid)); err == nil {
		return
	}
	signalTree(p.pid, sig, false)
}

// result is the command's status; output fields are left to the caller.
// Valid once exited is closed.
func (p *proc) result() agentapi.ExecResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := agentapi.ExecResult{
		DurationMs:  p.ended.Sub(p.started).Milliseconds(),
		StdoutBytes: p.streams[stdout].count(),
	}
	if s := p.streams[stderr]; s != nil {
		r.StderrBytes = s.count()
	}
	var ws syscall.WaitStatus
	if st := p.cmd.ProcessState; st != nil {
		ws, _ = st.Sys().(syscall.WaitStatus)
	}
	switch {
	case ws.Signaled():
		r.ExitCode = 128 + int(ws.Signal())
		r.Signal = signalName(ws.Signal())
	default:
		r.ExitCode = ws.ExitStatus()
	}
	switch {
	case p.timedOut:
		r.TimedOut = true
		r.ExitCode = agentapi.TimeoutExitCode
	case p.oomKilled, p.pidKilled:
		r.OOMKilled, r.ProcessLimitKilled = p.oomKilled, p.pidKilled
		r.ExitCode = 128 + int(syscall.SIGKILL)
		r.Signal = signalName(syscall.SIGKILL)
	}
	return r
}

// errStdinClosed says a process's stdin is not open (never was, closed, or
// the process ended).
var errStdinClosed = errors.New("stdin is closed")

// stdinWriteWait bounds how long a write to a process that does not read
// its stdin may block.
const stdinWriteWait = 10 * time.Second

// writeStdin writes b to the open stdin pipe. A process that reads none of
// it within stdinWriteWait fails the write with os.ErrDeadlineExceeded.
func (p *proc) writeStdin(b []byte) error {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return errStdinClosed
	}
	_ = p.stdin.SetWriteDeadline(time.Now().Add(stdinWriteWait))
	_, err := p.stdin.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		return errStdinClosed
	}
	return err
}

// closeStdin closes the open stdin pipe, if any: the process reads EOF.
func (p *proc) closeStdin() {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
}
