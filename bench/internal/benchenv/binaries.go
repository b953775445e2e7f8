// Package benchenv is what bench/suite and bench/scale both need around
// the servers they measure: the runsc and agent binaries, an in-process
// server serving on loopback, the leak checks and sweeps of what a run
// leaves on the host, and a few host figures (/proc, getrusage).
package benchenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// FindRunsc returns the runsc to use: $WITHRUNTIME_RUNSC, or runsc on
// PATH; an error says how to get one.
func FindRunsc() (string, error) {
	if runsc := os.Getenv("WITHRUNTIME_RUNSC"); runsc != "" {
		return runsc, nil
	}
	p, err := exec.LookPath("runsc")
	if err != nil {
		return "", errors.New("runsc not found: set WITHRUNTIME_RUNSC or run scripts/install.sh")
	}
	return p, nil
}

// BuildAgent returns the agent binary the sandboxes run:
// $WITHRUNTIME_AGENT, or the agent built from this checkout (go build,
// CGO off, run in the module's directory) as binDir/withruntime-agent, so
// that the sandboxes run the same code as the in-process server.
func BuildAgent(ctx context.Context, binDir string) (string, error) {
	if agent := os.Getenv("WITHRUNTIME_AGENT"); agent != "" {
		return agent, nil
	}
	agent := filepath.Join(binDir, "withruntime-agent")
	build := exec.CommandContext(ctx, "go", "build", "-o", agent, "withruntime.dev/runtime/cmd/withruntime-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the agent: %w: %s", err, out)
	}
	return agent, nil
}

// BaseRootfs returns the root filesystem of the base template under
// templates, checked to hold /usr/bin/python3; an error says how to build it.
func BaseRootfs(templates string) (string, error) {
	tpl := filepath.Join(templates, "base", "rootfs")
	if _, err := os.Stat(filepath.Join(tpl, "usr", "bin", "python3")); err != nil {
		return "", fmt.Errorf("template base not built under %s (scripts/install.sh builds it): %w", templates, err)
	}
	return tpl, nil
}
