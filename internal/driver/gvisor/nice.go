package gvisor

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"

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
// The sandbox's processes inherit it, which changes nothing for them: they
// run in the sandbox's cgroup, whose weight (cpu.shares) alone sets their
// share against the rest of the host, and all of them alike.
var helperNice = envInt("WITHRUNTIME_RUNSC_NICE", 10)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// startNiced starts cmd at helperNice. A child takes the nice value of the
// thread that forks it, so cmd is started from an OS thread of its own
// whose nice value is raised first; the goroutine ends locked to it, which
// ends the thread, so no other goroutine ever runs there.
func startNiced(cmd *exec.Cmd) error {
	if helperNice == 0 {
		return cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		// who 0 is the calling thread (Linux keeps a nice value per
		// thread). A failure leaves the command at the server's own.
		_ = unix.Setpriority(unix.PRIO_PROCESS, 0, helperNice)
		errc <- cmd.Start()
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
