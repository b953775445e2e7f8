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
)

// exitRuntimeError is the exit status when Runtime itself fails (not the
// command in the sandbox), as `docker run` uses 125.
const exitRuntimeError = 125

// exitError carries a command's exit status out of cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	stop()
	var ee exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		os.Exit(ee.code)
	default:
		fmt.Fprintln(os.Stderr, "withruntime:", err)
		os.Exit(exitRuntimeError)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "withruntime",
		Short: "Runtime: isolated sandboxes for LLM code execution",
		Long: `Runtime runs a model's commands in gVisor sandboxes and hands back exit codes and output.

With WITHRUNTIME_URL (and WITHRUNTIME_API_KEY) set, or a config file at
~/.config/withruntime/config.json ({"url": ..., "apiKey": ...}), the CLI talks to
that server. Otherwise it runs an embedded server in-process on the local data
directory (WITHRUNTIME_DATA_DIR, default /var/lib/withruntime), which needs root.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(), newSandboxCmd(), newTemplateCmd(), newKeysCmd(), newUsageCmd(), newMCPCmd(), newSecretsCmd())
	return root
}
