package agent

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"unsafe"
)

// IsPID1 reports whether this process is PID 1 of its PID namespace, which
// inherits every orphaned process and must reap it.
func IsPID1() bool { return os.Getpid() == 1 }

// InGVisor reports whether the agent runs on gVisor's kernel (its /proc
// has a gvisor directory). PID 1 alone does not make a sandbox: a process
// in a new PID namespace on a host's own filesystem is PID 1 too (the
// Kubernetes tests' test double of a node runs pods so), and what the
// agent changes at boot in /etc must then never be the host's.
func InGVisor() bool {
	_, err := os.Stat("/proc/gvisor")
	return err == nil
}

// The agent is PID 1 itself and reaps orphans in a goroutine. It used to
// re-execute itself as a child of a reaping PID 1 (as Coder's agent does),
// which kept a wait4(-1) loop from stealing commands' exit statuses from
// exec.Cmd.Wait, but under gVisor that second start of a 10 MB Go binary
// cost 25 to 100 ms of every create (measured). The reaper below never takes
// a status that belongs to a command:
//   - it only peeks at exited children (waitid WNOWAIT) and reaps a pid with
//     wait4 only when no command owns it;
//   - commands are started and registered under the reaper's lock, so a
//     command that exits at once cannot be mistaken for an orphan;
//   - while the first zombie it sees is a command's, it waits for that
//     command's own Wait to reap it (a peek always returns the first zombie).
var reap = &reaper{owned: map[int]chan struct{}{}}

type reaper struct {
	mu    sync.Mutex
	owned map[int]chan struct{} // command pid -> closed once its Wait reaped it
}

// StartReaping makes the agent reap every orphan it inherits as PID 1,
// until the process ends. Call it once, first thing, when IsPID1.
func StartReaping() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	go func() {
		for {
			reap.reapOrphans()
			<-sigs
		}
	}()
}

// start runs start (which forks a command) under the reaper's lock and
// registers the pid it returns as a command's.
func (r *reaper) start(start func() (int, error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := start()
	if err == nil {
		r.owned[pid] = make(chan struct{})
	}
	return err
}

// reaped says a command's Wait has reaped pid.
func (r *reaper) reaped(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ch, ok := r.owned[pid]; ok {
		close(ch)
		delete(r.owned, pid)
	}
}

// reapOrphans reaps every exited child that no command owns, waiting for
// commands' own Waits where their zombies come first.
func (r *reaper) reapOrphans() {
	for {
		pid := peekExited()
		if pid <= 0 {
			return
		}
		r.mu.Lock()
		ch, owned := r.owned[pid]
		r.mu.Unlock()
		if owned {
			<-ch
			continue
		}
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err != syscall.EINTR {
				break
			}
		}
	}
}

// peekExited returns the pid of an exited child without reaping it, or 0
// when none has exited (or there are no children).
func peekExited() int {
	const (
		pAll    = 0
		wExited = 0x4
		wNoHang = 0x1
		wNoWait = 0x1000000
	)
	var info [128]byte // siginfo_t; si_pid is the int32 at offset 16 on Linux
	for {
		info = [128]byte{} // si_pid stays 0 when nothing has exited
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pAll, 0,
			uintptr(unsafe.Pointer(&info[0])), wExited|wNoHang|wNoWait, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return 0
		}
		return int(*(*int32)(unsafe.Pointer(&info[16])))
	}
}
