package withruntime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"sync"
	"time"
)

// Options configures a new sandbox. Every field is optional: zero values
// take the server's defaults.
type Options struct {
	// Template names the root filesystem (default "base": Debian with
	// python3, curl, procps).
	Template string
	// TimeoutSeconds is the lease: the server destroys the sandbox this many
	// seconds after creation unless extended with SetTimeout (default 300;
	// the server sets a maximum).
	TimeoutSeconds int64
	// CPU is the number of vCPUs (default 1; fractions allowed, minimum 0.05).
	CPU float64
	// MemoryMiB is the memory size in MiB (default 512).
	MemoryMiB int64
	// DiskMiB caps writes to the root filesystem, in MiB (default 2048).
	DiskMiB int64
	// Env is set in every command's environment.
	Env map[string]string
	// Metadata is free-form labels, returned as given and usable as List
	// filters. Keys are at most 256 bytes, values at most 4096.
	Metadata map[string]string
	// Network is the network policy, enforced on the host (nil: the
	// server's default, {Internet: false}: loopback only). It can change
	// while the sandbox runs (Sandbox.SetNetwork).
	Network *NetworkPolicy
	// Secrets names stored secrets (Client.SetSecret) the sandbox may use:
	// each is an environment variable holding a placeholder that the
	// egress proxy replaces with the value for the secret's hosts. The
	// Network policy must allow those hosts.
	Secrets []string
	// MaxCostMicros makes the server refuse the sandbox (ErrCostCap, 400
	// "cost_cap", whose message gives the worst case and how it was
	// computed) if its first lease could cost more, in micro-dollars
	// (1 USD = 1,000,000; 0: no cap). The worst case is every vCPU busy for
	// the whole lease plus the memory size for the whole lease, at the
	// server's prices (UsagePrices).
	MaxCostMicros int64
	// OnLeaseEnd is what the lease end does: "stop" (default: the server
	// destroys the sandbox) or "pause" (it is saved whole and kept paused,
	// billed only for its image, until resumed or the server's paused
	// retention ends).
	OnLeaseEnd string
	// PauseMode is what a lease-end pause saves: PauseFull ("", the
	// default: memory, processes, files) or PauseFilesystem (the root
	// filesystem's files alone; the resume boots the sandbox fresh).
	PauseMode string
	// AutoResume makes any request to the sandbox while it is paused resume
	// it first (nil: true when OnLeaseEnd is "pause").
	AutoResume *bool
	// Volumes are the key's volumes (Client.CreateVolume) to mount, each
	// at its Path (absolute), read-write unless ReadOnly; at most 8. A
	// volume of another key fails the create with ErrNotFound.
	Volumes []VolumeMount
	// Snapshot, when set, starts the sandbox from that snapshot (its id,
	// or its name among the key's snapshots: Sandbox.Snapshot) instead of
	// booting the template: its processes run on where the snapshot was
	// taken. Template and DiskMiB are then the snapshot's (0 or the same),
	// MemoryMiB at least its memory (0: the same), CPU by default its.
	Snapshot string
}

// ListFilter selects sandboxes for List. Zero values match everything.
type ListFilter struct {
	// State is "starting", "running", "paused" or "stopped" ("" for all).
	State string
	// Metadata matches sandboxes that have every one of these labels.
	Metadata map[string]string
}

// Sandbox is a handle on one sandbox. Its methods are safe for concurrent
// use. Close destroys the sandbox.
type Sandbox struct {
	c  *Client
	id string

	mu   sync.Mutex
	info SandboxInfo

	closeMu sync.Mutex
	closed  bool
}

// Create creates a sandbox on the server configured by NewClient() (see
// there). Close it when done, or its lease ends it.
func Create(ctx context.Context, opts Options) (*Sandbox, error) {
	c, err := NewClient()
	if err != nil {
		return nil, err
	}
	return c.Create(ctx, opts)
}

// Connect returns a handle on an existing sandbox, on the server configured
// by NewClient().
func Connect(ctx context.Context, id string) (*Sandbox, error) {
	c, err := NewClient()
	if err != nil {
		return nil, err
	}
	return c.Connect(ctx, id)
}

// List lists sandboxes on the server configured by NewClient().
func List(ctx context.Context, f ListFilter) ([]SandboxInfo, error) {
	c, err := NewClient()
	if err != nil {
		return nil, err
	}
	return c.List(ctx, f)
}

// Create creates a sandbox and returns once it runs. Errors: ErrBadRequest
// (invalid options, an unknown template or secret), ErrCostCap (over
// Options.MaxCostMicros), ErrSpendingLimit (the key's daily limit is
// reached), ErrUnavailable (no capacity), ErrUnauthorized.
func (c *Client) Create(ctx context.Context, opts Options) (*Sandbox, error) {
	req := opts.request()
	var info SandboxInfo
	if err := c.doJSON(waitFor(ctx, bootWait), "POST", "/v1/sandboxes", req, &info); err != nil {
		return nil, err
	}
	return &Sandbox{c: c, id: info.ID, info: info}, nil
}

// request is the create request of opts.
func (opts Options) request() CreateSandboxRequest {
	return CreateSandboxRequest{
		Template: opts.Template, TimeoutSeconds: opts.TimeoutSeconds, CPU: opts.CPU,
		MemoryMiB: opts.MemoryMiB, DiskMiB: opts.DiskMiB, Env: opts.Env, Metadata: opts.Metadata,
		MaxCostMicros: opts.MaxCostMicros, Network: opts.Network, Secrets: opts.Secrets,
		OnLeaseEnd: opts.OnLeaseEnd, PauseMode: opts.PauseMode, AutoResume: opts.AutoResume, Volumes: opts.Volumes,
		Snapshot: opts.Snapshot,
	}
}

// CreateAndExec creates a sandbox and runs req in it, in one request: the
// server runs the command as soon as the sandbox is ready, with no round
// trip between the two. It returns the sandbox (close it when done) and the
// command's collected result (capped as Exec's is). Errors: those of Create,
// with a nil Sandbox (nothing was made, bad input in req included:
// ErrBadRequest); when the sandbox was made but the command could not run
// (a cwd that does not exist, an unknown program), the Sandbox with an
// *APIError.
func (c *Client) CreateAndExec(ctx context.Context, opts Options, req ExecRequest) (*Sandbox, ExecResult, error) {
	creq := opts.request()
	creq.Exec = &req
	b, err := json.Marshal(creq)
	if err != nil {
		return nil, ExecResult{}, fmt.Errorf("withruntime: encoding request: %w", err)
	}
	resp, err := c.request(waitFor(ctx, bootWait+execWait(req.TimeoutSeconds)), "POST", "/v1/sandboxes", bytes.NewReader(b), "application/json", "application/json")
	if err != nil {
		return nil, ExecResult{}, err
	}
	defer resp.Body.Close()
	var out SandboxWithResult
	if err := json.NewDecoder(newCapReader(resp.Body, maxAgentAnswerBytes)).Decode(&out); err != nil || out.Sandbox.ID == "" {
		return nil, ExecResult{}, fmt.Errorf("withruntime: decoding the create's answer: %v", err)
	}
	sbx := &Sandbox{c: c, id: out.Sandbox.ID, info: out.Sandbox}
	switch {
	case out.Error != nil:
		return sbx, ExecResult{}, &APIError{Status: statusOfCode(out.Error.Code), Code: out.Error.Code, Message: out.Error.Message}
	case out.Result == nil:
		return sbx, ExecResult{}, errors.New("withruntime: the create's answer has neither a result nor an error")
	}
	return sbx, *out.Result, nil
}

// RunOnce is the one-shot: it creates a sandbox with req as its first
// command (CreateAndExec), destroys the sandbox, and returns the command's
// result. Errors are CreateAndExec's, or the destroy's.
func (c *Client) RunOnce(ctx context.Context, opts Options, req ExecRequest) (ExecResult, error) {
	sbx, res, err := c.CreateAndExec(ctx, opts, req)
	if sbx != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := sbx.Destroy(dctx); derr != nil && err == nil {
			err = derr
		}
	}
	return res, err
}

// RunOnce runs req in a new sandbox on the server configured by NewClient()
// and destroys the sandbox (Client.RunOnce).
func RunOnce(ctx context.Context, opts Options, req ExecRequest) (ExecResult, error) {
	c, err := NewClient()
	if err != nil {
		return ExecResult{}, err
	}
	return c.RunOnce(ctx, opts, req)
}

// Connect returns a handle on the sandbox id, resuming it first when it is
// paused. Errors: ErrNotFound; ErrLeaseEnded or ErrSandboxStopped when it
// is no longer running; those of Resume.
func (c *Client) Connect(ctx context.Context, id string) (*Sandbox, error) {
	s := &Sandbox{c: c, id: id}
	info, err := s.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	if info.State == "paused" {
		if err := s.Resume(ctx, 0); err != nil && !errors.Is(err, ErrConflict) { // resumed meanwhile: fine
			return nil, err
		}
		return s, nil
	}
	if info.State == "stopped" {
		code := "sandbox_stopped"
		if info.EndReason == "lease_ended" {
			code = "lease_ended"
		}
		return nil, &APIError{Status: 410, Code: code,
			Message: fmt.Sprintf("sandbox %s is stopped (%s); create a new sandbox", id, info.EndReason)}
	}
	return s, nil
}

// List lists sandboxes, newest first as the server orders them.
func (c *Client) List(ctx context.Context, f ListFilter) ([]SandboxInfo, error) {
	q := url.Values{}
	if f.State != "" {
		q.Set("state", f.State)
	}
	keys := make([]string, 0, len(f.Metadata))
	for k := range f.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		q.Set("metadata."+k, f.Metadata[k])
	}
	path := "/v1/sandboxes"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out SandboxList
	if err := c.doJSON(ctx, "GET", path, nil, &out); err != nil {
		return nil, err
	}
	return out.Sandboxes, nil
}

// ID is the sandbox's id.
func (s *Sandbox) ID() string { return s.id }

// Client is the client the sandbox was created or connected with.
func (s *Sandbox) Client() *Client { return s.c }

// Info is the sandbox's record as last seen by this handle (at Create,
// Connect, Refresh or SetTimeout).
func (s *Sandbox) Info() SandboxInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

// Refresh fetches the sandbox's record from the server. Errors: ErrNotFound.
func (s *Sandbox) Refresh(ctx context.Context) (SandboxInfo, error) {
	var info SandboxInfo
	if err := s.c.doJSON(ctx, "GET", s.path(""), nil, &info); err != nil {
		return SandboxInfo{}, err
	}
	s.mu.Lock()
	s.info = info
	s.mu.Unlock()
	return info, nil
}

// Pause saves the running sandbox whole (processes with their memory,
// files) on the server's host and stops it; it is billed only for its
// image until Resume (or Connect, or a request if it has AutoResume).
// Commands running at the pause end with ErrPaused; background processes
// run on after the resume. Errors: ErrConflict (not running; already
// paused), ErrNoSpace (no room on the host; it runs on), ErrLeaseEnded,
// ErrSandboxStopped.
func (s *Sandbox) Pause(ctx context.Context) error {
	return s.post(waitFor(ctx, checkpointWait), "/pause", nil)
}

// Pause modes (PauseFiles, Options.PauseMode, ForkOptions.Mode).
const (
	// PauseFull saves memory, processes and files.
	PauseFull = "full"
	// PauseFilesystem saves the root filesystem's files alone.
	PauseFilesystem = "filesystem"
)

// PauseFiles saves the running sandbox's root filesystem files alone (what
// it wrote, changed and deleted over its template; not /tmp, /dev/shm or
// volumes) and stops it: its processes end and its memory is freed at
// once. Resume then boots it fresh with the same id and those files; no
// process of before runs. Info().ImageMode is "filesystem" while it is
// paused. Errors as Pause, and ErrConflict when the files' archive would
// pass the sandbox's disk size (a sparse file; it runs on).
func (s *Sandbox) PauseFiles(ctx context.Context) error {
	return s.post(waitFor(ctx, checkpointWait), "/pause", PauseRequest{Mode: PauseFilesystem})
}

// Resume boots the paused sandbox where it was, with a lease of seconds
// (0: the lease it was last given). Errors: ErrConflict (not paused),
// ErrUnavailable, ErrSpendingLimit (it stays paused), ErrSandboxStopped
// (it could not be resumed and was destroyed).
func (s *Sandbox) Resume(ctx context.Context, seconds int64) error {
	return s.post(waitFor(ctx, checkpointWait), "/resume", ResumeRequest{TimeoutSeconds: seconds})
}

// post sends a control request about the sandbox and keeps the record it
// answers.
func (s *Sandbox) post(ctx context.Context, path string, body any) error {
	var info SandboxInfo
	if err := s.c.doJSON(ctx, "POST", s.path(path), body, &info); err != nil {
		return err
	}
	s.mu.Lock()
	s.info = info
	s.mu.Unlock()
	return nil
}

// SetTimeout moves the end of the sandbox's lease to seconds from now (at
// least 1; the server sets a maximum). Errors: ErrBadRequest,
// ErrLeaseEnded, ErrSandboxStopped.
func (s *Sandbox) SetTimeout(ctx context.Context, seconds int64) error {
	var info SandboxInfo
	if err := s.c.doJSON(ctx, "POST", s.path("/timeout"), SetTimeoutRequest{TimeoutSeconds: seconds}, &info); err != nil {
		return err
	}
	s.mu.Lock()
	s.info = info
	s.mu.Unlock()
	return nil
}

// Close destroys the sandbox, waiting at most 30 seconds. It is safe to
// call more than once and from several goroutines: after the first
// successful call it returns nil at once. A sandbox that is already gone
// (its lease ended, or another client destroyed it) counts as closed.
func (s *Sandbox) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Destroy(ctx)
}

// Destroy is Close with a context of the caller's.
func (s *Sandbox) Destroy(ctx context.Context) error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	err := s.c.doJSON(ctx, "DELETE", s.path(""), nil, nil)
	if err != nil && !isGone(err) {
		return err
	}
	s.closed = true
	return nil
}

func isGone(err error) bool {
	ae, ok := err.(*APIError)
	return ok && ae.Status == 410
}

// path is the sandbox's API path plus suffix.
func (s *Sandbox) path(suffix string) string {
	return "/v1/sandboxes/" + url.PathEscape(s.id) + suffix
}
