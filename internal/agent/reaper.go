package agent

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// IsPID1 reports whether this process is PID 1 of its PID namespace, which
// inherits every orphaned process and must reap it.
func IsPID1() bool { return os.Getpid() == 1 }

// forwardedSignals are passed from PID 1 to the agent it runs.
var forwardedSignals = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2,
}

// ForkReap is all that PID 1 does. It starts this same executable again
// (with the same arguments and environment) as its child, which, not being
// PID 1, runs the real agent. PID 1 then only forwards termination signals
// to that child and reaps every process that exits, until the child itself
// exits; it returns the exit status to end with (the child's, or 128+N if a
// signal N killed it).
//
// Reaping from a separate process is deliberate (Coder's agent does the
// same): a wait4(-1) loop inside the agent would steal the exit status of
// commands from exec.Cmd.Wait. Orphans are reparented to PID 1, never to
// the agent, so the agent only ever waits for its own children.
func ForkReap() int {
	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs, forwardedSignals...)
	pid, err := syscall.ForkExec("/proc/self/exe", os.Args, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "withruntime-agent: pid 1 cannot start the agent: %v\n", err)
		return 1
	}
	go func() {
		for sig := range sigs {
			_ = syscall.Kill(pid, sig.(syscall.Signal))
		}
	}()
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "withruntime-agent: pid 1 wait: %v\n", err)
			return 1
		}
		if wpid != pid {
			continue // an orphan: reaped, nothing else to do
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}
