package main

import (
	"os/exec"
	"time"

	"withruntime.dev/runtime/bench/internal/bare"
)

// hostFirstOutput times the host's own python3 (the floor): start to first
// byte of output.
func hostFirstOutput(python string, argv []string, want string) (time.Duration, error) {
	cmd := exec.Command(python, argv[1:]...)
	cmd.Env = benchEnv
	return bare.FirstOutput(cmd, want)
}

// benchEnv is the environment of the host and bubblewrap baselines.
var benchEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "PYTHONUNBUFFERED=1"}

// bwrapFirstOutput times bubblewrap running argv over the template's root
// (read-only), with fresh /proc, /dev and /tmp and every namespace
// unshared: a container without gVisor.
func bwrapFirstOutput(bwrap, rootfs string, argv []string, want string) (time.Duration, error) {
	args := append([]string{"--ro-bind", rootfs, "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--unshare-all", "--die-with-parent", "--chdir", "/workspace", "--"}, argv...)
	cmd := exec.Command(bwrap, args...)
	cmd.Env = benchEnv
	return bare.FirstOutput(cmd, want)
}
