package gvisor

import (
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// helperNice is the nice value of the runsc commands the driver runs
// (run, delete, state, checkpoint...). They run in the server's own cgroup
// (the sandbox's processes move to the sandbox's cgroup at boot), each a
// 100 MB Go program with threads of its own, and at nice 0 they took the
// host's CPU from the server's threads when many ran at once: with 16
// creates and deletes under way, GET /v1/health answered in 100-250 ms.
// At nice 10 a runsc thread weighs a tenth of a server thread, so the
// server's own work (answering the API, the agent connections) goes first.
// The sandbox's processes (sentry, gofer, stubs) inherit it, which changes
// nothing for them where they run in a cgroup of their own with a CPU
// controller (every host Runtime installs on): the cgroup's weight
// (cpu.shares, cpu.weight) alone sets its share against the rest of the
// host, and inside it they are all alike. Measured with bench/scale (nice
// 0 and 10 interleaved; bench/README.md, scale).
const helperNice = 10

// startNiced starts cmd at helperNice. A child takes the nice value of the
// thread that forks it (Linux keeps one per thread), so cmd is started from
// an OS thread of its own whose nice value is raised first and put back
// after. Where it cannot be put back (no CAP_SYS_NICE) the goroutine ends
// locked to the thread, which ends the thread (or parks it for good, if it
// is the main thread), so no other goroutine ever runs there.
func startNiced(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// who 0 is the calling thread; the raw getpriority answers 20 - nice.
		raw, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
		if err != nil || 20-raw >= helperNice {
			runtime.UnlockOSThread()
			errc <- cmd.Start()
			return
		}
		// A failure leaves the command at the server's own value.
		raised := unix.Setpriority(unix.PRIO_PROCESS, 0, helperNice) == nil
		errc <- cmd.Start()
		if !raised || unix.Setpriority(unix.PRIO_PROCESS, 0, 20-raw) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return <-errc
}

// runNiced is cmd.Run at helperNice.
func runNiced(cmd *exec.Cmd) error {
	if err := startNiced(cmd); err != nil {
		return err
	}
	return cmd.Wait()
}
