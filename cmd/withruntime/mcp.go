package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	withruntime "withruntime.dev/runtime/sdk/go"
	"withruntime.dev/runtime/sdk/go/tools"
)

func newMCPCmd() *cobra.Command {
	var template, httpAddr string
	var allowOrigins, volumeFlags []string
	var lease time.Duration
	var pauseIdle, checkpoints bool
	var pauseMode string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the four sandbox tools over MCP (stdio, or streamable HTTP with --http)",
		Long: `Serves runtime_exec, runtime_read_file, runtime_write_file and runtime_list_files
over the Model Context Protocol, so that any MCP client (a desktop assistant, an
IDE agent) can run code in a Runtime sandbox. With --template code-interpreter it
also serves runtime_run_code (Python in a Jupyter kernel that keeps variables
between calls; charts come back as MCP image content).

Each MCP session gets its own sandbox, created on its first tool call and
destroyed when the session ends. The sandbox's lease (--lease) is renewed while
the session uses it; a sandbox left idle for a whole lease is destroyed, and the
next call gets a new, empty one (the result says so). With --pause-idle it is
paused instead (saved whole: processes, memory, files; billed only for its
image) and the session's next call resumes it where it was. With
--pause-mode filesystem as well, the pause saves its files alone (a smaller
image, no memory held): the next call boots it fresh with its files, and the
processes it ran are gone.

With --volume NAME:PATH (NAME:PATH:ro for read-only; repeatable) each
session's sandbox mounts that volume (withruntime volume create) at PATH, a
directory of the template such as /data: its files outlive the session and its
sandboxes, and every session sees the same files. The volume is resolved among
the volumes of the key a session runs under (over HTTP, a session opened with a
Runtime API key uses that key's). The model is told where the volumes are.

With --checkpoints the session also gets runtime_checkpoint (save its sandbox,
running processes and memory included; files only when volumes are mounted)
and runtime_rollback (continue in a copy of one of the session's checkpoints,
destroying the current sandbox): try a risky change, go back if it failed. A
session keeps its last 8 checkpoints; they are deleted when it ends.

By default the server speaks MCP on stdin/stdout (one session), for clients that
start it as a command; with --http ADDR it serves streamable HTTP at
http://ADDR/mcp (a session per client). The Runtime server is found as for every
other command (WITHRUNTIME_URL, the config file, else an embedded server).

Over HTTP every request needs ` + "`Authorization: Bearer TOKEN`" + `: the MCP token
(` + envMCPToken + `, else one generated at start and printed on stderr) or a
Runtime API key, whose sessions then run their sandboxes under that key. A
non-loopback ADDR needs ` + envMCPToken + ` set. Requests from a web page of
another origin are refused (403) unless allowed with --allow-origin.

runtime_exec runs a command on pipes, not on a terminal: a model reads its
output as text, once, with the exit code. A program that must be driven on a
terminal (a REPL, tmux, vim) is for an agent built on an SDK's terminals
(sbx.pty.create, CreateTerminal) or for a person (withruntime sandbox shell).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if lease < time.Second {
				return fmt.Errorf("--lease must be at least 1s; got %s", lease)
			}
			var mounts []withruntime.VolumeMount
			for _, v := range volumeFlags {
				m, err := parseVolumeFlag(v)
				if err != nil {
					return usageError{err: err, cmd: cmd}
				}
				mounts = append(mounts, m)
			}
			ctx := cmd.Context()
			s, err := connect(ctx, template)
			if err != nil {
				return err
			}
			defer s.Close()
			if s.embedded != nil {
				// An MCP session lasts as long as its client: CLI commands
				// on this data directory meanwhile use this server rather
				// than wait for it.
				if err := s.embedded.Advertise(s.BaseURL); err != nil {
					return err
				}
			}
			newClient := func(apiKey string) (*withruntime.Client, error) {
				opts := []withruntime.ClientOption{withruntime.WithBaseURL(s.BaseURL), withruntime.WithAPIKey(apiKey)}
				if s.HTTP != nil {
					opts = append(opts, withruntime.WithHTTPClient(s.HTTP))
				}
				return withruntime.NewClient(opts...)
			}
			c, err := newClient(s.APIKey)
			if err != nil {
				return err
			}
			if err := checkMCPVolumes(ctx, c, mounts); err != nil {
				return err
			}
			sbxOpts := withruntime.Options{Template: template, TimeoutSeconds: int64(lease / time.Second), Volumes: mounts}
			switch {
			case pauseMode != withruntime.PauseFull && pauseMode != withruntime.PauseFilesystem:
				return fmt.Errorf("--pause-mode %q: say %q (processes, memory and files) or %q (files alone)", pauseMode, withruntime.PauseFull, withruntime.PauseFilesystem)
			case cmd.Flags().Changed("pause-mode") && !pauseIdle:
				return errors.New("--pause-mode says what an idle pause saves: give --pause-idle too")
			}
			if pauseIdle {
				// The lease end pauses; any request resumes (autoResume).
				sbxOpts.OnLeaseEnd, sbxOpts.PauseMode = "pause", pauseMode
			}
			m := newMCPSandboxes(c, newClient, sbxOpts)
			m.code = template == withruntime.CodeInterpreterTemplate
			m.checkpoints = checkpoints
			defer m.closeAll()
			srv := m.server()
			if httpAddr == "" {
				err := srv.Run(ctx, &mcp.StdioTransport{})
				if errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
					return nil
				}
				return err
			}
			return serveMCPHTTP(ctx, srv, mcpHTTPConfig{addr: httpAddr, idle: lease, token: os.Getenv(envMCPToken),
				allowOrigins: allowOrigins, newClient: newClient})
		},
	}
	cmd.Flags().StringVar(&template, "template", "base", "template of the sandboxes")
	cmd.Flags().DurationVar(&lease, "lease", 30*time.Minute, "sandbox lease, renewed while the session uses it; also the idle timeout of an HTTP session")
	cmd.Flags().BoolVar(&pauseIdle, "pause-idle", false, "pause a session's sandbox when it has been idle for a whole lease, and resume it on the session's next call, instead of destroying it")
	cmd.Flags().StringVar(&pauseMode, "pause-mode", withruntime.PauseFull, `with --pause-idle, what the pause saves: "full" (processes, memory, files) or "filesystem" (files alone; the next call boots it fresh)`)
	cmd.Flags().StringVar(&httpAddr, "http", "", "serve streamable HTTP on this address (such as 127.0.0.1:7781) instead of stdio")
	cmd.Flags().StringArrayVar(&volumeFlags, "volume", nil, "mount the volume NAME at PATH in each session's sandbox, NAME:PATH or NAME:PATH:ro for read-only (see: withruntime volume; repeatable)")
	cmd.Flags().BoolVar(&checkpoints, "checkpoints", false, "add the tools runtime_checkpoint (save the session's sandbox, processes and memory included) and runtime_rollback (continue in a copy of a checkpoint, discarding the current sandbox)")
	cmd.Flags().StringArrayVar(&allowOrigins, "allow-origin", nil, "with --http, also accept requests from web pages of this origin (such as http://localhost:6274; repeatable)")
	return cmd
}

// mcpSandboxes holds one sandbox per MCP session.
type mcpSandboxes struct {
	// c is the client of sessions without a key of their own; newClient
	// makes the client of a session opened with a Runtime API key.
	c         *withruntime.Client
	newClient func(apiKey string) (*withruntime.Client, error)
	opts      withruntime.Options
	log       *slog.Logger
	// code adds runtime_run_code (the sandboxes have kernels).
	code bool
	// checkpoints adds runtime_checkpoint and runtime_rollback (mcpfork.go).
	checkpoints bool

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*sessionSandbox
	closed   bool
	// releasing counts the destroys release has under way: closeAll waits
	// for them, or a stdio session's end (which both release and closeAll
	// see) could exit the process in the middle of its sandbox's DELETE
	// and leave the sandbox running.
	releasing sync.WaitGroup
}

// sessionSandbox is a session's sandbox, created on first use.
type sessionSandbox struct {
	// c creates and runs the sandbox: the client of the key the session
	// was opened with.
	c   *withruntime.Client
	err error // the client could not be made

	mu  sync.Mutex
	sbx *withruntime.Sandbox
	// replaced says the session's previous sandbox was lost (lease ended);
	// the next result tells the model.
	replaced bool
	done     bool
	// checkpoints are the session's checkpoints (snapshot ids), oldest
	// first (mcpfork.go).
	checkpoints []string
}

func newMCPSandboxes(c *withruntime.Client, newClient func(string) (*withruntime.Client, error), opts withruntime.Options) *mcpSandboxes {
	return &mcpSandboxes{c: c, newClient: newClient, opts: opts, sessions: map[*mcp.ServerSession]*sessionSandbox{},
		log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
}

// server returns an MCP server with the four tools.
func (m *mcpSandboxes) server() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "withruntime", Title: "Runtime sandbox", Version: "0.1.0"},
		&mcp.ServerOptions{
			Instructions: "Tools that run commands and read, write and list files in an isolated Linux sandbox " +
				"(one per session, created on first use). Relative paths resolve under /workspace." + volumesNote(m.opts.Volumes),
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		})
	defs := tools.Definitions()
	if m.code {
		defs = append(defs, tools.CodeDefinitions()...)
	}
	if m.checkpoints {
		m.addCheckpointTools(srv)
	}
	for _, d := range defs {
		name := d.Name
		srv.AddTool(&mcp.Tool{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return m.call(ctx, req.Session, req.Extra, name, req.Params.Arguments), nil
			})
	}
	return srv
}

// call runs one tool call in the session's sandbox. Every failure is a
// result the model sees; the sandbox being gone also drops it, so the next
// call gets a new one.
func (m *mcpSandboxes) call(ctx context.Context, ss *mcp.ServerSession, extra *mcp.RequestExtra, name string, args json.RawMessage) *mcp.CallToolResult {
	entry := m.entry(ss, extra)
	get := func(ctx context.Context) (*withruntime.Sandbox, error) { return m.sandbox(ctx, ss, entry) }
	ts := tools.Bind(get)
	if m.code {
		ts = append(ts, tools.BindCodeInterpreter(get)...)
	}
	res, err := tools.Dispatch(ctx, ts, name, args)
	text := res.Text
	if err != nil {
		m.log.Warn("mcp tool call failed", "tool", name, "err", err)
		if isGone(err) {
			entry.mu.Lock()
			entry.sbx, entry.replaced = nil, true
			entry.mu.Unlock()
			text += "\nThe next call runs in a new, empty sandbox."
		}
	}
	entry.mu.Lock()
	if entry.replaced && entry.sbx != nil && err == nil {
		text = "note: the previous sandbox's lease ended after a pause and its files are gone" + keptOn(m.opts.Volumes) +
			"; this call ran in a new, empty sandbox.\n" + text
		entry.replaced = false
	}
	entry.mu.Unlock()
	content := []mcp.Content{&mcp.TextContent{Text: text}}
	for _, img := range res.Images {
		// Checked by the tools package: they decode as their type, within
		// its caps, whatever the sandbox sent.
		content = append(content, &mcp.ImageContent{Data: img.Data, MIMEType: img.MIMEType})
	}
	return &mcp.CallToolResult{Content: content, IsError: res.IsError}
}

// entry returns the session's sandbox entry, made on its first call with
// the client of the key in extra's token, if any (the MCP SDK keeps a
// session to the token that opened it).
func (m *mcpSandboxes) entry(ss *mcp.ServerSession, extra *mcp.RequestExtra) *sessionSandbox {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.sessions[ss]
	if !ok {
		e = &sessionSandbox{c: m.c}
		if extra != nil && extra.TokenInfo != nil {
			if key, _ := extra.TokenInfo.Extra[apiKeyExtra].(string); key != "" {
				e.c, e.err = m.newClient(key)
			}
		}
		m.sessions[ss] = e
		if ss != nil && !m.closed {
			go func() {
				_ = ss.Wait()
				m.release(ss)
			}()
		}
	}
	return e
}

// sandbox returns the session's sandbox, creating it on first use and
// renewing its lease when less than half is left.
func (m *mcpSandboxes) sandbox(ctx context.Context, ss *mcp.ServerSession, e *sessionSandbox) (*withruntime.Sandbox, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return nil, errors.New("the MCP session has ended")
	}
	if e.err != nil {
		return nil, e.err
	}
	if e.sbx == nil {
		sbx, err := e.c.Create(ctx, m.opts)
		if err != nil {
			return nil, err
		}
		e.sbx = sbx
		return sbx, nil
	}
	lease := time.Duration(m.opts.TimeoutSeconds) * time.Second
	if time.Until(e.sbx.Info().LeaseEndsAt) >= lease/2 {
		return e.sbx, nil
	}
	err := e.sbx.SetTimeout(ctx, m.opts.TimeoutSeconds)
	if !isGone(err) {
		return e.sbx, err
	}
	// The lease ended while the session was idle: carry on in a new
	// sandbox, and tell the model (see call).
	sbx, err := e.c.Create(ctx, m.opts)
	if err != nil {
		e.sbx = nil
		return nil, err
	}
	e.sbx, e.replaced = sbx, true
	return sbx, nil
}

func isGone(err error) bool {
	return errors.Is(err, withruntime.ErrLeaseEnded) || errors.Is(err, withruntime.ErrSandboxStopped)
}

// release destroys a session's sandbox when the session ends.
func (m *mcpSandboxes) release(ss *mcp.ServerSession) {
	m.mu.Lock()
	e := m.sessions[ss]
	delete(m.sessions, ss)
	if e != nil {
		m.releasing.Add(1)
	}
	m.mu.Unlock()
	if e != nil {
		defer m.releasing.Done()
		m.destroy(e)
	}
}

func (m *mcpSandboxes) destroy(e *sessionSandbox) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.done = true
	m.dropCheckpoints(e)
	if e.sbx != nil {
		if err := e.sbx.Close(); err != nil {
			m.log.Warn("destroying sandbox", "id", e.sbx.ID(), "err", err)
		}
		e.sbx = nil
	}
}

// closeAll destroys every session's sandbox (at exit), and waits for the
// destroys of sessions that ended on their own.
func (m *mcpSandboxes) closeAll() {
	m.mu.Lock()
	m.closed = true
	entries := make([]*sessionSandbox, 0, len(m.sessions))
	for ss, e := range m.sessions {
		entries = append(entries, e)
		delete(m.sessions, ss)
	}
	m.mu.Unlock()
	for _, e := range entries {
		m.destroy(e)
	}
	m.releasing.Wait()
}

// checkMCPVolumes makes sure each volume to mount is one of the key's, so
// that a wrong name is said at start rather than in every session's first
// tool call.
func checkMCPVolumes(ctx context.Context, c *withruntime.Client, mounts []withruntime.VolumeMount) error {
	for _, m := range mounts {
		if _, err := c.Volume(ctx, m.Name); err != nil {
			if errors.Is(err, withruntime.ErrNotFound) {
				return fmt.Errorf("--volume %s:%s: this key has no volume %q; make it with `withruntime volume create %s --size-mib N` (withruntime volume ls lists them)", m.Name, m.Path, m.Name, m.Name)
			}
			return fmt.Errorf("--volume %s:%s: %w", m.Name, m.Path, err)
		}
	}
	return nil
}

// volumesNote tells the model where the session's volumes are.
func volumesNote(mounts []withruntime.VolumeMount) string {
	if len(mounts) == 0 {
		return ""
	}
	var parts []string
	for _, m := range mounts {
		p := m.Path
		if m.ReadOnly {
			p += " (read-only)"
		}
		parts = append(parts, p)
	}
	return " Persistent storage is mounted at " + strings.Join(parts, ", ") +
		": files there outlive the sandbox and are shared with other sessions; everything else is lost when the sandbox ends."
}

// keptOn says which files survived a lost sandbox: those on its volumes.
func keptOn(mounts []withruntime.VolumeMount) string {
	if len(mounts) == 0 {
		return ""
	}
	var paths []string
	for _, m := range mounts {
		paths = append(paths, m.Path)
	}
	return " (but not those under " + strings.Join(paths, ", ") + ", which are on volumes)"
}
