package agent

import (
	"os"
	"sync"
	"syscall"
	"time"
)

// LeaseGrace is how long after its lease end a sandbox ends itself. The
// server stops a sandbox at its lease end; the agent's own timer is the
// backstop for when no server is there to do it (the embedded server of a
// CLI that has exited, a server that is down), so it waits long enough for
// a live server always to act first.
const LeaseGrace = 10 * time.Second

// lease ends the sandbox at a time the host sets: every process is killed
// and the agent exits, and with it PID 1 and the sandbox.
type lease struct {
	mu    sync.Mutex
	timer *time.Timer
	at    time.Time // the lease end armed (zero: none)
	end   func()
}

// set arms the lease to end LeaseGrace after at; a zero at disarms it.
func (l *lease) set(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.at = at
	if at.IsZero() {
		return
	}
	l.timer = time.AfterFunc(time.Until(at.Add(LeaseGrace)), l.end)
}

// disarm stops the lease and returns the end it had (zero: none).
func (l *lease) disarm() time.Time {
	l.mu.Lock()
	at := l.at
	l.mu.Unlock()
	l.set(time.Time{})
	return at
}

// endSandbox kills every process the agent can signal (all but PID 1 and
// itself) and exits; PID 1 then exits with the agent's status and the
// sandbox stops. Only PID 1 of its own PID namespace (a sandbox) kills
// everything: an agent that is not (on a host, in a test) would kill
// every process of the machine, so it kills only its own commands.
func (s *Server) endSandbox() {
	s.log.Warn("the lease ended and no server stopped the sandbox; ending it")
	if IsPID1() {
		_ = syscall.Kill(-1, syscall.SIGKILL)
	} else {
		s.Close()
	}
	os.Exit(0)
}

// SetLease makes the sandbox end itself LeaseGrace after at (zero: never).
func (s *Server) SetLease(at time.Time) { s.lease.set(at) }
