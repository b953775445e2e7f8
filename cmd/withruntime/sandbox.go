package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/agent"
	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/client"
)

func newSandboxCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sandbox", Short: "Create, use and destroy sandboxes"}
	cmd.AddCommand(newRunCmd(), newCreateCmd(), newExecCmd(), newShellCmd(), newAttachCmd(), newLsCmd(), newKillCmd(), newPauseCmd(), newResumeCmd(), newCpCmd(),
		newSnapshotSandboxCmd(), newForkCmd())
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
	onEnd    string
	pauseAs  string
	volumes  []string
	snapshot string
	// cmd is the command the flags are on (was --template given?).
	cmd *cobra.Command
}

func (f *createFlags) add(cmd *cobra.Command) {
	f.cmd = cmd
	cmd.Flags().StringVar(&f.template, "template", "base", "template to boot")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 300*time.Second, "lease: the sandbox is destroyed after this long")
	cmd.Flags().Float64Var(&f.cpu, "cpu", 0, "vCPUs (default 1)")
	cmd.Flags().Int64Var(&f.memory, "memory", 0, "memory in MiB (default 512)")
	cmd.Flags().Int64Var(&f.disk, "disk", 0, "disk in MiB (default 2048)")
	cmd.Flags().StringArrayVarP(&f.env, "env", "e", nil, "environment variable KEY=VALUE (repeatable)")
	cmd.Flags().StringArrayVar(&f.metadata, "metadata", nil, "label KEY=VALUE (repeatable)")
	cmd.Flags().StringArrayVar(&f.volumes, "volume", nil, "mount the volume NAME at PATH, NAME:PATH or NAME:PATH:ro for read-only (see: withruntime volume; repeatable)")
	cmd.Flags().StringVar(&f.onEnd, "on-lease-end", "", `what the lease end does: "stop" (default: destroy) or "pause" (keep it paused; any request resumes it)`)
	cmd.Flags().StringVar(&f.pauseAs, "pause-mode", "", `what a lease-end pause saves: "full" (default: processes, memory, files) or "filesystem" (the root filesystem's files alone; the resume boots fresh)`)
	cmd.Flags().StringVar(&f.snapshot, "snapshot", "", "start from this snapshot (id or name; 'withruntime snapshot ls') instead of booting the template: its processes run on where it was taken")
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
		MemoryMiB: f.memory, DiskMiB: f.disk, Env: env, Metadata: meta, OnLeaseEnd: f.onEnd, PauseMode: f.pauseAs,
		Snapshot: f.snapshot}
	if f.snapshot != "" && !f.cmd.Flags().Changed("template") {
		req.Template = "" // the snapshot's
	}
	for _, v := range f.volumes {
		m, err := parseVolumeFlag(v)
		if err != nil {
			return api.CreateSandboxRequest{}, err
		}
		req.Volumes = append(req.Volumes, m)
	}
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
func execRequest(words []string, timeoutSeconds float64) (agentapi.ExecRequest, error) {
	switch {
	case len(words) == 1 && strings.TrimSpace(words[0]) == "":
		return agentapi.ExecRequest{}, fmt.Errorf("the command after -- is empty; give one, e.g. -- 'ls -l' or -- python3 -V")
	case len(words) > 1 && words[0] == "":
		return agentapi.ExecRequest{}, fmt.Errorf("the program after -- is an empty word; the first word after -- names the program to run")
	case len(words) == 1:
		return agentapi.ExecRequest{Command: words[0], TimeoutSeconds: timeoutSeconds}, nil
	}
	return agentapi.ExecRequest{Argv: words, TimeoutSeconds: timeoutSeconds}, nil
}

// streamOutput writes a command's output to this process's stdout/stderr.
// When a write fails (EPIPE: the reader of a pipe has gone) it ends the CLI's
// context, as SIGPIPE would end a program that does not clean up; the rest of
// the output is dropped.
func streamOutput(stream string, data []byte) {
	f := os.Stdout
	if stream == "stderr" {
		f = os.Stderr
	}
	if _, err := f.Write(data); err != nil {
		if errors.Is(err, syscall.EPIPE) {
			abort(signalled{syscall.SIGPIPE})
		} else {
			abort(fmt.Errorf("writing the command's %s: %w", stream, err))
		}
	}
}

func newRunCmd() *cobra.Command {
	var f createFlags
	var noStdin, trial, interactive, tty bool
	cmd := &cobra.Command{
		Use:   "run [-it] [flags] -- CMD [ARGS...]",
		Short: "Run one command in a fresh sandbox, stream its output, exit with its code",
		Long: `Creates a sandbox, runs CMD in it streaming stdout and stderr, destroys the
sandbox (also on Ctrl-C, SIGTERM, SIGHUP, or when stdout is a closed pipe)
and exits with CMD's exit code. Runtime's own messages go to stderr only. One
word after -- is run by bash (pipes work); several words are run as a
program and its arguments. ` + stdinHelp,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := f.request()
			if err != nil {
				return err
			}
			ereq, err := execRequest(args, float64(req.TimeoutSeconds))
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if tty {
				return runOnTerminal(ctx, req, ereq, interactive && !noStdin)
			}
			if ereq.Stdin, err = commandStdin(ctx, os.Stdin, noStdin); err != nil {
				return err
			}
			if trial && !configured() {
				// First run: get a key by device login, then go on with it.
				if _, err := login(ctx, loginURL(""), true, os.Stderr); err != nil {
					return err
				}
			}
			s, err := connect(ctx, req.Template)
			if err != nil {
				return err
			}
			defer s.Close()
			req.Exec = &ereq
			id, res, err := createAndRun(ctx, s, req)
			if id == "" {
				return err
			}
			defer destroy(ctx, s, id)
			if ctx.Err() != nil {
				return interrupted(ctx, "; sandbox destroyed")
			}
			if err != nil {
				return whyStreamEnded(ctx, s, id, err, "the sandbox", "after "+shortDuration(time.Duration(req.TimeoutSeconds)*time.Second)+" (--timeout); give a longer --timeout")
			}
			return resultExit(res)
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVarP(&noStdin, "no-stdin", "n", false, "do not read stdin (the command reads end-of-file), as ssh -n")
	cmd.Flags().BoolVarP(&interactive, "interactive", "i", false, "with -t: send this terminal's keys to CMD")
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "run CMD on a terminal in the sandbox, as docker run -it (see sandbox exec -it); the sandbox is destroyed when CMD ends or the CLI detaches")
	cmd.Flags().BoolVar(&trial, "trial", false, "with no server and key configured, first log in (withruntime login --trial) to WITHRUNTIME_URL or this host's server and ask for a trial key")
	return cmd
}

// runOnTerminal is `sandbox run -it`: a sandbox, CMD on a terminal in it
// joined to this one (startOnTerminal), and the sandbox destroyed however
// that ends (CMD's exit, a signal, the detach keys).
func runOnTerminal(ctx context.Context, req api.CreateSandboxRequest, ereq agentapi.ExecRequest, input bool) error {
	s, err := connect(ctx, req.Template)
	if err != nil {
		return err
	}
	defer s.Close()
	sb, err := createForRun(ctx, s, req)
	if err != nil {
		return err
	}
	defer destroy(ctx, s, sb.ID)
	return startOnTerminal(ctx, s, sb.ID, ereq, input)
}

// createAndRun creates run's sandbox with its command as the first
// (one request: the server runs it as soon as the sandbox is ready) and streams the
// command's output. As with createForRun, a signal does not cancel the
// create: the CLI waits (up to 30 s) for the sandbox to exist, so that it
// can destroy it, then ends the command. id is "" when no sandbox was made.
func createAndRun(ctx context.Context, s *session, req api.CreateSandboxRequest) (id string, res agentapi.ExecResult, err error) {
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	created := make(chan string, 1)
	type outcome struct {
		res agentapi.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		_, res, err := s.CreateAndExecStream(cctx, req, func(sb api.Sandbox) { created <- sb.ID }, streamOutput)
		done <- outcome{res, err}
	}()
	interrupt := ctx.Done()
	var grace <-chan time.Time
	for {
		select {
		case id = <-created:
			if interrupt == nil { // interrupted while the sandbox was being created
				cancel()
			}
		case o := <-done:
			select {
			case id = <-created:
			default:
			}
			if o.err != nil && id == "" && ctx.Err() != nil {
				return "", o.res, interrupted(ctx, "")
			}
			return id, o.res, o.err
		case <-interrupt:
			interrupt = nil
			if id != "" {
				cancel() // the command is killed; the caller destroys the sandbox
			} else {
				grace = time.After(30 * time.Second)
			}
		case <-grace:
			cancel()
			return "", res, interrupted(ctx, "; the sandbox being created may run until its lease ends")
		}
	}
}

// createForRun creates run's (or create's) sandbox. The create is not cancelled by a
// signal, since the server could finish it after the CLI had gone and leave
// the sandbox running for its lease: when ctx ends, it still waits (up to
// 30 s) for the sandbox to destroy it.
func createForRun(ctx context.Context, s *session, req api.CreateSandboxRequest) (api.Sandbox, error) {
	type created struct {
		sb  api.Sandbox
		err error
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	ch := make(chan created, 1)
	go func() {
		sb, err := s.CreateSandbox(cctx, req)
		ch <- created{sb, err}
	}()
	var c created
	select {
	case c = <-ch:
	case <-ctx.Done():
		select {
		case c = <-ch:
		case <-time.After(30 * time.Second):
			return api.Sandbox{}, interrupted(ctx, "; the sandbox being created may run until its lease ends")
		}
	}
	if c.err != nil && ctx.Err() != nil {
		return api.Sandbox{}, interrupted(ctx, "")
	}
	return c.sb, c.err
}

// destroy destroys run's sandbox, also when ctx has ended.
func destroy(ctx context.Context, s *session, id string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := s.DeleteSandbox(dctx, id); err != nil {
		fmt.Fprintf(os.Stderr, "withruntime: destroying %s: %v\n", id, err)
	}
}

// stdinHelp is the part of run's and exec's help about stdin.
const stdinHelp = `When stdin is a pipe or a file, it is read to its end and given
to CMD as its stdin (at most 16 MiB of UTF-8 text; base64-encode binary
data); when it is a terminal, or with --no-stdin, CMD reads end-of-file.`

// interrupted reports (on stderr) that a signal stopped the CLI while a
// command ran, with what was done about it, and returns the error that
// makes main exit with the signal's status. A closed stdout (SIGPIPE) is
// not reported, as it kills other programs silently.
func interrupted(ctx context.Context, done string) error {
	err := interruption(ctx)
	var sig signalled
	if errors.As(err, &sig) {
		if sig.sig != syscall.SIGPIPE {
			fmt.Fprintf(os.Stderr, "withruntime: %s%s\n", interruptedText(sig.sig), done)
		}
		return sig
	}
	fmt.Fprintf(os.Stderr, "withruntime: %v%s\n", err, done)
	return exitError{exitRuntimeError}
}

// Exit statuses for a sandbox that stopped while a command ran in it.
const (
	exitLeaseEnded  = 124 // as a command killed by its own timeout
	exitOutOfMemory = 137 // as a process killed (SIGKILL) for memory
)

// whyStreamEnded explains an exec stream that ended before the command's
// exit: it asks the server what became of sandbox id and says so. what names
// the sandbox in messages; leaseHint ends the message for a lease end.
// Errors other than a broken stream are returned as they are.
func whyStreamEnded(ctx context.Context, s *session, id string, err error, what, leaseHint string) error {
	var se *client.StreamError
	if !errors.As(err, &se) {
		return err
	}
	sb, ok := stoppedSandbox(ctx, s, id)
	if !ok {
		return err
	}
	msg, code := "", exitRuntimeError
	switch sb.EndReason {
	case "lease_ended":
		msg, code = fmt.Sprintf("%s's lease ended %s", what, leaseHint), exitLeaseEnded
	case "out_of_memory":
		msg, code = fmt.Sprintf("%s went over its memory (%d MiB) and was stopped; a larger --memory gives a sandbox more", what, sb.MemoryMiB), exitOutOfMemory
	case "spending_limit":
		msg = what + " was stopped: its API key reached its daily spending limit (see `withruntime usage`)"
	case "failed":
		msg = what + " failed (it ended on its own, not by its lease or a request) and was stopped"
	case "deleted":
		msg = what + " was destroyed while the command ran"
	default:
		msg = fmt.Sprintf("%s stopped while the command ran (%s)", what, sb.EndReason)
	}
	fmt.Fprintln(os.Stderr, "withruntime: "+msg)
	return exitError{code}
}

// stoppedSandbox waits briefly for sandbox id to show as stopped (the server
// marks a sandbox stopped before it destroys it, but one that died on its
// own is noticed a moment later). A running sandbox whose lease has passed
// counts as stopped by its lease. ok is false when the sandbox still runs
// or the server cannot tell.
func stoppedSandbox(ctx context.Context, s *session, id string) (api.Sandbox, bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for {
		sb, err := s.GetSandbox(ctx, id)
		switch {
		case err != nil:
			return sb, false
		case sb.State == "stopped":
			return sb, true
		case !sb.LeaseEndsAt.After(time.Now()):
			sb.EndReason = "lease_ended"
			return sb, true
		}
		select {
		case <-ctx.Done():
			return sb, false
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// shortDuration prints d without zero trailing units: 5m, 1h30m, 3s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
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
			s, err := connect(cmd.Context(), req.Template)
			if err != nil {
				return err
			}
			defer s.Close()
			ctx := cmd.Context()
			sb, err := createForRun(ctx, s, req)
			if err != nil {
				return err
			}
			if ctx.Err() != nil { // interrupted while it was being created: nobody got its id
				destroy(ctx, s, sb.ID)
				return interrupted(ctx, "; sandbox destroyed")
			}
			if _, err := fmt.Println(sb.ID); err != nil {
				// Nobody got its id (stdout is closed): don't leave it running.
				dctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 30*time.Second)
				defer cancel()
				_ = s.DeleteSandbox(dctx, sb.ID)
				return err
			}
			if s.embedded != nil {
				fmt.Fprintf(os.Stderr, "withruntime: %s runs until %s, its lease end; with no server running, the sandbox ends itself about %s later and the next withruntime command records it as lease_ended\n",
					sb.ID, sb.LeaseEndsAt.Local().Format(time.TimeOnly), shortDuration(agent.LeaseGrace))
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
	var noStdin, interactive, tty bool
	var user string
	cmd := &cobra.Command{
		Use:   "exec [-it] ID -- CMD [ARGS...]",
		Short: "Run a command in a running sandbox, streaming its output (-it: on a terminal)",
		Long: `Runs CMD in sandbox ID streaming stdout and stderr, and exits with CMD's exit
code. On Ctrl-C (or SIGTERM, SIGHUP) CMD is killed; the sandbox keeps
running. One word after -- is run by bash (pipes work); several words are run
as a program and its arguments. ` + stdinHelp + `

With -t (--tty) CMD runs on a terminal in the sandbox instead, as with
docker exec -it: with -i this terminal's keys go to it in raw mode (Ctrl-C
is the program's), the window size follows this window, and a signal that
ends the CLI sends CMD SIGHUP. --timeout then defaults to none.
` + detachHelp,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			envMap, err := pairs("--env", env)
			if err != nil {
				return err
			}
			req, err := execRequest(args[1:], timeout.Seconds())
			if err != nil {
				return err
			}
			req.Cwd, req.Env, req.User = cwd, envMap, user
			ctx := cmd.Context()
			if tty {
				s, err := connect(ctx, "")
				if err != nil {
					return err
				}
				defer s.Close()
				return startOnTerminal(ctx, s, args[0], req, interactive && !noStdin)
			}
			if req.Stdin, err = commandStdin(ctx, os.Stdin, noStdin); err != nil {
				return err
			}
			s, err := connect(ctx, "")
			if err != nil {
				return err
			}
			defer s.Close()
			id := args[0]
			res, err := s.ExecStream(ctx, id, req, streamOutput)
			if ctx.Err() != nil {
				return interrupted(ctx, "; the command was killed (sandbox "+id+" keeps running)")
			}
			if err != nil {
				return whyStreamEnded(ctx, s, id, err, "sandbox "+id, "and it was stopped; create one with a longer --timeout")
			}
			return resultExit(res)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "kill the command after this long (default 120s)")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory (default /workspace)")
	cmd.Flags().StringArrayVarP(&env, "env", "e", nil, "environment variable KEY=VALUE (repeatable)")
	cmd.Flags().BoolVarP(&noStdin, "no-stdin", "n", false, "do not read stdin (the command reads end-of-file), as ssh -n")
	cmd.Flags().BoolVarP(&interactive, "interactive", "i", false, "with -t: send this terminal's keys to CMD (without -t, piped stdin is always sent)")
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "run CMD on a terminal in the sandbox (see above)")
	cmd.Flags().StringVarP(&user, "user", "u", "", `run as "user" (default) or "root"`)
	return cmd
}

func newLsCmd() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List running and paused sandboxes (--all for stopped ones too)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			sbs, err := s.ListSandboxes(cmd.Context(), "")
			if err != nil {
				return err
			}
			if !all {
				sbs = slices.DeleteFunc(sbs, func(sb api.Sandbox) bool { return sb.State == "stopped" })
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

// stateText is the STATE column: the state, why it ended, or what a paused
// sandbox's image holds when it is files only (a resume boots it fresh).
func stateText(sb api.Sandbox) string {
	switch {
	case sb.EndReason != "":
		return sb.State + " (" + sb.EndReason + ")"
	case sb.State == "paused" && sb.ImageMode == "filesystem":
		return "paused (files only)"
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

// maxStdinBytes caps the stdin that run and exec read and send: the API
// carries stdin as text inside the exec request.
const maxStdinBytes = 16 << 20

// commandStdin is what run and exec give the command as its stdin: all of
// f when it is a pipe or a file (read to its end), nothing when it is a
// terminal or skip is set. It refuses input over maxStdinBytes and input
// that is not UTF-8 (a JSON string cannot carry it) rather than alter it.
// A signal while it waits for input ends the wait.
func commandStdin(ctx context.Context, f *os.File, skip bool) (string, error) {
	if skip || isTerminal(f) {
		return "", nil
	}
	type result struct {
		data string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		data, err := readStdin(f)
		ch <- result{data, err}
	}()
	select {
	case r := <-ch:
		return r.data, r.err
	case <-ctx.Done():
		return "", interrupted(ctx, " while reading stdin")
	}
}

// readStdin reads r to its end as a command's stdin (see commandStdin).
func readStdin(r io.Reader) (string, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxStdinBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading stdin: %w (use --no-stdin to give the command none)", err)
	}
	if len(data) > maxStdinBytes {
		return "", fmt.Errorf("stdin is more than %d MiB, the most the CLI sends as a command's stdin; "+
			"put large input in a file in the sandbox instead (the API's file upload), or pass --no-stdin to give the command none", maxStdinBytes>>20)
	}
	if !utf8.Valid(data) {
		i := 0
		for i < len(data) {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return "", fmt.Errorf("stdin is not UTF-8 text (at byte offset %d), and a command's stdin travels as text; "+
			"send binary data base64-encoded and decode it in the sandbox, e.g. base64 < FILE | withruntime sandbox run -- 'base64 -d | CMD'", i)
	}
	return string(data), nil
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
