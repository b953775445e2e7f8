package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"withruntime.dev/runtime/internal/version"
)

// newVersionCmd is `withruntime version`: this CLI's build and, when a
// server is configured, the build of the server it talks to (from GET
// /v1/health), so that a bug report says which builds it came from.
func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the CLI's version and the configured server's",
		Example: "  withruntime version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "client: withruntime %s\n", version.Get())
			url := serverURL()
			if url == "" {
				fmt.Fprintln(out, "server: embedded (this binary; no server configured)")
				return nil
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), defaultVersionWait)
			defer cancel()
			s, err := connect(ctx, "")
			if err != nil {
				return err
			}
			defer s.Close()
			h, err := s.Health(ctx)
			if err != nil {
				fmt.Fprintf(out, "server: %s: %v\n", url, err)
				return exitError{1}
			}
			fmt.Fprintf(out, "server: withruntime %s (%s)\n", h.Version, url)
			return nil
		},
	}
}

// defaultVersionWait bounds `withruntime version`'s question to the server.
const defaultVersionWait = 10 * time.Second

// serverURL is the server the CLI is configured to talk to, "" for none
// (then it embeds one): WITHRUNTIME_URL, else the config file's.
func serverURL() string {
	if url := os.Getenv("WITHRUNTIME_URL"); url != "" {
		return url
	}
	if fc, err := readConfig(); err == nil {
		return fc.URL
	}
	return ""
}
