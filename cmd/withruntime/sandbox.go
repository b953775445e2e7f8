package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

func newSandboxCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sandbox", Short: "Create, use and destroy sandboxes"}
	cmd.AddCommand(newRunCmd(), newCreateCmd(), newExecCmd(), newLsCmd(), newKillCmd())
	return cmd
}

// createFlags are the sandbox settings shared by run and create.
type createFlags struct {
	template string
	timeout  time.Duration
	cpu      float64
	memory   int64
	disk     int64
	env      []string
	metadata []string
	net      networkFlags
}

func (f *createFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.template, "template", "base", "template to boot")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 300*time.Second, "lease: the sandbox is destroyed after this long")
	cmd.Flags().Float64Var(&f.cpu, "cpu", 0, "vCPUs (default 1)")
	cmd.Flags().Int64Var(&f.memory, "memory", 0, "memory in MiB (default 512)")
	cmd.Flags().Int64Var(&f.disk, "disk", 0, "disk in MiB (default 2048)")
	cmd.Flags().StringArrayVarP(&f.env, "env", "e", nil, "environment variable KEY=VALUE (repeatable)")
	cmd.Flags().StringArrayVar(&f.metadata, "metadata", nil, "label KEY=VALUE (repeatable)")
	f.net.add(cmd)
}

func (f *createFlags) request() (api.CreateSandboxRequest, error) {
	env, err := pairs("--env", f.env)
	if err != nil {
		return api.CreateSandboxRequest{}, err
	}
	meta, err := pairs("--metadata", f.metadata)
	if err != nil {
		return api.CreateSandboxRequest{}, err
	}
	secs := int64(f.timeout / time.Second)
	if secs < 1 {
		return api.CreateSandboxRequest{}, fmt.Errorf("--timeout must be at least 1s; got %s", f.timeout)
	}
	req := api.CreateSandboxRequest{Template: f.template, TimeoutSeconds: secs, CPU: f.cpu,
		MemoryMiB: f.memory, DiskMiB: f.disk, Env: env, Metadata: meta}
	return req, f.net.apply(&req)
}

func pairs(flag string, kvs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s %q: want KEY=VALUE", flag, kv)
		}
		out[k] = v
	}
	return out, nil
}

// execRequest turns the words after "--" into a request: one word is a shell
// command line (so pipes work), several are an argv run without a shell.
func execRequest(words []string, timeoutSeconds float64) agentapi.ExecRequest {
	if len(words) == 1 {
		return agentapi.ExecRequest{Command: words[0], TimeoutSeconds: timeoutSeconds}
	}
	return agentapi.ExecRequest{Argv: words, TimeoutSeconds: timeoutSeconds}
}

// streamOutput writes a command's output to this process's stdout/stderr.
func streamOutput(stream string, data []byte) {
	if stream == "stderr" {
		_, _ = os.Stderr.Write(data)
		return
	}
	_, _ = os.Stdout.Write(data)
}

func newRunCmd() *cobra.Command {
	var f createFlags
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD [ARGS...]",
		Short: "Run one command in a fresh sandbox, stream its output, exit with its code",
		Long: `Creates a sandbox, runs CMD in it streaming stdout and stderr, destroys the
sandbox (also on Ctrl-C) and exits with CMD's exit code. Runtime's own
messages go to stderr only. One word after -- is run by bash (pipes work);
several words are run as a program and its arguments.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := f.request()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			s, err := connect(ctx, f.template)
			if err != nil {
				return err
			}
			defer s.Close()
			sb, err := s.CreateSandbox(ctx, req)
			if err != nil {
				return err
			}
			defer func() {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				if err := s.DeleteSandbox(dctx, sb.ID); err != nil {
					fmt.Fprintf(os.Stderr, "withruntime: destroying %s: %v\n", sb.ID, err)
				}
			}()
			res, err := s.ExecStream(ctx, sb.ID, execRequest(args, float64(req.TimeoutSeconds)), streamOutput)
			if ctx.Err() != nil {
				fmt.Fprintln(os.Stderr, "withruntime: interrupted; sandbox destroyed")
				return exitError{130}
			}
			if err != nil {
				return err
			}
			return resultExit(res)
		},
	}
	f.add(cmd)
	return cmd
}

// resultExit reports how the command ended (on stderr) and passes its code on.
func resultExit(res agentapi.ExecResult) error {
	switch {
	case res.TimedOut:
		fmt.Fprintf(os.Stderr, "withruntime: command timed out after %.1fs and was killed\n", float64(res.DurationMs)/1000)
	case res.OOMKilled:
		fmt.Fprintln(os.Stderr, "withruntime: command was killed: the sandbox ran out of memory")
	case res.ProcessLimitKilled:
		fmt.Fprintln(os.Stderr, "withruntime: command was killed: it kept the sandbox at its process limit")
	}
	if res.ExitCode != 0 {
		return exitError{res.ExitCode}
	}
	return nil
}

func newCreateCmd() *cobra.Command {
	var f createFlags
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a sandbox and print its id",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := f.request()
			if err != nil {
				return err
			}
			s, err := connect(cmd.Context(), f.template)
			if err != nil {
				return err
			}
			defer s.Close()
			sb, err := s.CreateSandbox(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Println(sb.ID)
			if s.embedded != nil {
				fmt.Fprintf(os.Stderr, "withruntime: %s runs until %s; with no server running, its lease is enforced by the next withruntime command (run `withruntime serve` to enforce it on time)\n",
					sb.ID, sb.LeaseEndsAt.Local().Format(time.TimeOnly))
			}
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

func newExecCmd() *cobra.Command {
	var timeout time.Duration
	var cwd string
	var env []string
	cmd := &cobra.Command{
		Use:   "exec ID -- CMD [ARGS...]",
		Short: "Run a command in a running sandbox, streaming its output",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			envMap, err := pairs("--env", env)
			if err != nil {
				return err
			}
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			req := execRequest(args[1:], timeout.Seconds())
			req.Cwd, req.Env = cwd, envMap
			res, err := s.ExecStream(cmd.Context(), args[0], req, streamOutput)
			if err != nil {
				return err
			}
			return resultExit(res)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "kill the command after this long (default 120s)")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory (default /workspace)")
	cmd.Flags().StringArrayVarP(&env, "env", "e", nil, "environment variable KEY=VALUE (repeatable)")
	return cmd
}

func newLsCmd() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List running sandboxes (--all for stopped ones too)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			state := "running"
			if all {
				state = ""
			}
			sbs, err := s.ListSandboxes(cmd.Context(), state)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tTEMPLATE\tCPU\tMEMORY\tCREATED\tLEASE ENDS")
			for _, sb := range sbs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%g\t%dMiB\t%s\t%s\n", sb.ID, stateText(sb), sb.Template, sb.CPU, sb.MemoryMiB,
					sb.CreatedAt.Local().Format(time.DateTime), sb.LeaseEndsAt.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVarP(&all, "all", "a", false, "include stopped sandboxes")
	return cmd
}

func stateText(sb api.Sandbox) string {
	if sb.EndReason != "" {
		return sb.State + " (" + sb.EndReason + ")"
	}
	return sb.State
}

func newKillCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "kill ID [ID...]",
		Short: "Destroy sandboxes",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			var errs []error
			for _, id := range args {
				if err := s.DeleteSandbox(cmd.Context(), id); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", id, err))
				}
			}
			return errors.Join(errs...)
		},
	}
}
