package gvisor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// settleTimeout bounds how long List waits for runsc commands that another
// process left running on this state directory: as long as a create of
// this driver would let `runsc run` take.
const settleTimeout = runTimeout

// settle waits until no runsc command of this driver's state directory runs
// that this process did not start: the `runsc run`, `delete` or `kill` a
// server killed mid-create (kill -9, a crash) left behind, which goes on
// without it and would make a container appear, or vanish, after the next
// server has looked. They are never killed: a runsc killed between creating
// a sandbox and recording it leaves a sandbox no runsc command knows.
// Sandbox and gofer processes (runsc-sandbox, runsc-gofer) are the
// sandboxes themselves and are not waited for. After settleTimeout it gives
// up with an error naming the commands.
func (d *Driver) settle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	for {
		pids := d.strayCommands()
		if len(pids) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("runsc commands of another process still run on %s (pids %v): %w", d.cfg.StateDir, pids, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// strayCommands returns the pids of runsc commands on this driver's runsc
// root whose parent is not this process.
func (d *Driver) strayCommands() []int {
	root := filepath.Join(d.cfg.StateDir, "runsc")
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !isRunscCommand(cmdline, d.cfg.Runsc, root) {
			continue
		}
		if ppid, alive := parentOf(pid); alive && ppid != self {
			pids = append(pids, pid)
		}
	}
	return pids
}

// isRunscCommand reports whether a /proc cmdline is `<runsc> ... --root
// <root> ...`, as this driver runs runsc (see Driver.runsc and start); the
// binary is this driver's or any named runsc (the last server may have been
// configured with another path).
func isRunscCommand(cmdline []byte, runsc, root string) bool {
	args := bytes.Split(bytes.TrimSuffix(cmdline, []byte{0}), []byte{0})
	if len(args) < 3 || string(args[0]) != runsc && filepath.Base(string(args[0])) != "runsc" {
		return false
	}
	for i := 1; i+1 < len(args); i++ {
		if string(args[i]) == "--root" && string(args[i+1]) == root {
			return true
		}
	}
	return false
}

// parentOf returns a process's parent pid, and whether it is alive (not a
// zombie).
func parentOf(pid int) (int, bool) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	// "pid (comm) state ppid ...": the command name may hold spaces and
	// parentheses, so parse after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 2 || f[0][0] == 'Z' || f[0][0] == 'X' {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	return ppid, err == nil
}
