// Command withruntime is Runtime in one binary: the sandbox server (`serve`)
// and its CLI (`sandbox`, `template`, `keys`). With no server configured the
// CLI runs an embedded server in-process on the local data directory.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"withruntime.dev/runtime/internal/version"
)

// exitRuntimeError is the exit status when Runtime itself fails (not the
// command in the sandbox), as `docker run` uses 125.
const exitRuntimeError = 125

// exitError carries a command's exit status out of cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// signalled is why the CLI stops early: a SIGINT, SIGTERM or SIGHUP, or a
// write to a closed stdout or stderr (EPIPE, reported as SIGPIPE). It ends the
// commands' context, so `sandbox run` can destroy its sandbox, and makes the
// CLI exit 128+N as a process killed by signal N would.
type signalled struct{ sig syscall.Signal }

func (s signalled) Error() string { return "interrupted by " + unix.SignalName(s.sig) }

func (s signalled) exitCode() int { return 128 + int(s.sig) }

// abort ends the commands' context with a cause (see signalled); main sets
// it. Output writers call it when stdout is gone.
var abort context.CancelCauseFunc = func(error) {}

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	abort = cancel
	sigs := make(chan os.Signal, 4)
	// SIGPIPE is caught so that a write to a closed stdout fails with EPIPE
	// (which the writers handle) instead of killing the CLI before it can
	// clean up. The signal itself is not acted on: with SIGPIPE caught, Go
	// delivers it for a broken socket of the embedded server too.
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	go func() {
		for s := range sigs {
			if s != syscall.SIGPIPE {
				cancel(signalled{s.(syscall.Signal)})
			}
		}
	}()
	err := newRoot().ExecuteContext(ctx)
	os.Exit(exitStatus(ctx, err))
}

// exitStatus is the CLI's exit status for a command's error, printing the
// error on stderr when it is Runtime's own failure.
func exitStatus(ctx context.Context, err error) int {
	var ee exitError
	var sig signalled
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &sig):
		return sig.exitCode() // the command said what it did about it
	case errors.Is(err, syscall.EPIPE):
		return signalled{syscall.SIGPIPE}.exitCode() // as a program killed by SIGPIPE: silently
	case errors.As(context.Cause(ctx), &sig):
		// The command failed because a signal ended its context.
		if sig.sig != syscall.SIGPIPE {
			fmt.Fprintf(os.Stderr, "withruntime: %s\n", interruptedText(sig.sig))
		}
		return sig.exitCode()
	}
	fmt.Fprintln(os.Stderr, "withruntime:", cliHints.Replace(err.Error()))
	return exitRuntimeError
}

// interruptedText says which signal stopped the CLI.
func interruptedText(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "interrupted"
	case syscall.SIGTERM:
		return "terminated (SIGTERM)"
	case syscall.SIGHUP:
		return "hung up (SIGHUP)"
	}
	return "interrupted by " + unix.SignalName(sig)
}

// interruption returns why ctx ended early: a signalled error, or the error
// that stopped the output (see streamOutput).
func interruption(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return ctx.Err()
}
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "withruntime",
		Short: "Runtime: isolated sandboxes for LLM code execution",
		Long: `Runtime runs a model's commands in gVisor sandboxes and hands back exit codes and output.

With WITHRUNTIME_URL (and WITHRUNTIME_API_KEY) set, or a config file at
~/.config/withruntime/config.json ({"url": ..., "apiKey": ...}), the CLI talks to
that server. Otherwise it runs an embedded server in-process on the local data
directory (WITHRUNTIME_DATA_DIR, default /var/lib/withruntime; templates in
WITHRUNTIME_TEMPLATES_DIR, default DATA_DIR/templates), which needs root.`,
		Version:       version.Get().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("withruntime {{.Version}}\n")
	root.AddCommand(newVersionCmd(), newServeCmd(), newSandboxCmd(), newTemplateCmd(), newKeysCmd(), newUsageCmd(), newMCPCmd(), newSecretsCmd(), newVolumeCmd(), newLoginCmd(), newLogoutCmd(), newSnapshotCmd())
	explainUsage(root)
	return root
}
