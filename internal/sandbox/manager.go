// Package sandbox is the sandbox manager: it creates sandboxes through a
// driver, records them in the store, enforces their leases (a timer per
// sandbox, re-armed after a server restart), and hands the API a connection
// to each sandbox's agent. It owns the lifecycle; the store owns the records.
package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// Templates resolves a template name to its root filesystem directory.
type Templates interface {
	RootFS(name string) (string, error)
}

// Limits bounds what a create may ask for, with the defaults it gets.
type Limits struct {
	DefaultTimeout   time.Duration // lease when timeoutSeconds is 0 (300 s)
	MaxTimeout       time.Duration // longest lease (24 h)
	DefaultCPU       float64       // vCPUs (1)
	MaxCPU           float64       // vCPUs (8)
	DefaultMemoryMiB int64         // 512
	MaxMemoryMiB     int64         // 16384
	DefaultDiskMiB   int64         // 2048
	MaxDiskMiB       int64         // 65536
	TmpMiB           int64         // size of /tmp (256)
	PidsLimit        int64         // processes and threads per sandbox (1024)
	MaxSandboxes     int           // running at once on this host (0 = no limit)
}

// DefaultLimits are the limits a server starts with.
func DefaultLimits() Limits {
	return Limits{
		DefaultTimeout:   300 * time.Second,
		MaxTimeout:       24 * time.Hour,
		DefaultCPU:       1,
		MaxCPU:           8,
		DefaultMemoryMiB: 512,
		MaxMemoryMiB:     16384,
		DefaultDiskMiB:   2048,
		MaxDiskMiB:       65536,
		TmpMiB:           256,
		PidsLimit:        1024,
	}
}

// Manager runs sandboxes. Safe for concurrent use.
type Manager struct {
	driver    driver.Driver
	store     *store.Store
	templates Templates
	limits    Limits
	log       *slog.Logger
	now       func() time.Time

	mu sync.Mutex
	// live holds the running sandboxes this server tracks; pending counts
	// creates in flight, so capacity holds under a burst.
	live    map[string]*liveSandbox
	pending int
}

// liveSandbox is a running sandbox this server holds a handle to.
type liveSandbox struct {
	handle    *driver.Handle
	transport *http.Transport
	lease     *time.Timer
}

// New returns a manager. Call Recover before serving requests.
func New(d driver.Driver, st *store.Store, t Templates, limits Limits, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.Default()
	}
	return &Manager{driver: d, store: st, templates: t, limits: limits, log: log,
		now: time.Now, live: map[string]*liveSandbox{}}
}

// CreateParams is what a caller asks for; zero values take the defaults.
type CreateParams struct {
	KeyID          string
	Template       string
	TimeoutSeconds int64
	CPU            float64
	MemoryMiB      int64
	DiskMiB        int64
	Env            map[string]string
	Metadata       map[string]string
}

// Create boots a sandbox and returns its record once its agent answers.
// Errors: errs.Invalid for bad parameters or an unknown template,
// errs.Capacity when the host is full, otherwise a driver failure.
func (m *Manager) Create(ctx context.Context, p CreateParams) (store.Sandbox, error) {
	if err := m.applyDefaults(&p); err != nil {
		return store.Sandbox{}, err
	}
	rootfs, err := m.templates.RootFS(p.Template)
	if err != nil {
		return store.Sandbox{}, errs.New(errs.Invalid, "template %q: %v", p.Template, err)
	}
	if err := m.reserve(); err != nil {
		return store.Sandbox{}, err
	}
	defer m.unreserve()
	now := m.now().UTC()
	sb := store.Sandbox{
		ID: newID(), KeyID: p.KeyID, Template: p.Template, State: store.StateStarting,
		CPU: p.CPU, MemoryMiB: p.MemoryMiB, DiskMiB: p.DiskMiB, Env: p.Env, Metadata: p.Metadata,
		CreatedAt: now, LeaseEndsAt: now.Add(time.Duration(p.TimeoutSeconds) * time.Second),
		Driver: m.driver.Name(),
	}
	if err := m.store.InsertSandbox(ctx, sb); err != nil {
		return store.Sandbox{}, err
	}
	h, err := m.driver.Create(ctx, driver.Spec{
		ID: sb.ID, RootFS: rootfs, CPU: p.CPU,
		MemoryBytes: p.MemoryMiB << 20, DiskBytes: p.DiskMiB << 20, TmpBytes: m.limits.TmpMiB << 20,
		PidsLimit: m.limits.PidsLimit, Env: envList(p.Env),
	})
	if err != nil {
		_ = m.store.MarkStopped(context.WithoutCancel(ctx), sb.ID, "failed", m.now())
		return store.Sandbox{}, fmt.Errorf("create sandbox: %w", err)
	}
	if err := m.store.MarkRunning(ctx, sb.ID, h.State); err != nil {
		_ = m.driver.Destroy(context.WithoutCancel(ctx), sb.ID)
		return store.Sandbox{}, err
	}
	m.adopt(sb.ID, h, sb.LeaseEndsAt)
	sb.State, sb.DriverState = store.StateRunning, h.State
	return sb, nil
}

func (m *Manager) applyDefaults(p *CreateParams) error {
	l := m.limits
	if p.Template == "" {
		p.Template = "base"
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = int64(l.DefaultTimeout / time.Second)
	}
	if p.TimeoutSeconds < 1 || p.TimeoutSeconds > int64(l.MaxTimeout/time.Second) {
		return errs.New(errs.Invalid, "timeoutSeconds must be between 1 and %d (the server's maximum lease); got %d",
			int64(l.MaxTimeout/time.Second), p.TimeoutSeconds)
	}
	if p.CPU == 0 {
		p.CPU = l.DefaultCPU
	}
	if p.CPU < 0.05 || p.CPU > l.MaxCPU {
		return errs.New(errs.Invalid, "cpu must be between 0.05 and %g vCPUs; got %g", l.MaxCPU, p.CPU)
	}
	if p.MemoryMiB == 0 {
		p.MemoryMiB = l.DefaultMemoryMiB
	}
	if p.MemoryMiB < 64 || p.MemoryMiB > l.MaxMemoryMiB {
		return errs.New(errs.Invalid, "memoryMiB must be between 64 and %d; got %d", l.MaxMemoryMiB, p.MemoryMiB)
	}
	if p.DiskMiB == 0 {
		p.DiskMiB = l.DefaultDiskMiB
	}
	if p.DiskMiB < 16 || p.DiskMiB > l.MaxDiskMiB {
		return errs.New(errs.Invalid, "diskMiB must be between 16 and %d; got %d", l.MaxDiskMiB, p.DiskMiB)
	}
	for k := range p.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return errs.New(errs.Invalid, "env: %q is not a valid variable name (no '=' or NUL, not empty)", k)
		}
		if strings.Contains(p.Env[k], "\x00") {
			return errs.New(errs.Invalid, "env: the value of %q contains a NUL byte", k)
		}
	}
	return nil
}

// reserve takes a slot for a new sandbox, or fails with errs.Capacity.
func (m *Manager) reserve() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.limits.MaxSandboxes > 0 && len(m.live)+m.pending >= m.limits.MaxSandboxes {
		return errs.New(errs.Capacity, "this server runs its maximum of %d sandboxes; delete one or retry later", m.limits.MaxSandboxes)
	}
	m.pending++
	return nil
}

func (m *Manager) unreserve() {
	m.mu.Lock()
	m.pending--
	m.mu.Unlock()
}

// adopt starts tracking a running sandbox and arms its lease timer.
func (m *Manager) adopt(id string, h *driver.Handle, leaseEnd time.Time) {
	tr := &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return h.Dial(ctx) },
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	ls := &liveSandbox{handle: h, transport: tr}
	ls.lease = time.AfterFunc(leaseEnd.Sub(m.now()), func() { m.leaseEnded(id) })
	m.mu.Lock()
	m.live[id] = ls
	m.mu.Unlock()
}

func (m *Manager) leaseEnded(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := m.store.GetSandbox(ctx, id)
	if err == nil && sb.State != store.StateStopped && sb.LeaseEndsAt.After(m.now().Add(50*time.Millisecond)) {
		return // the lease moved after the timer fired; SetTimeout re-armed it
	}
	m.log.Info("lease ended", "sandbox", id)
	if err := m.stop(ctx, id, "lease_ended"); err != nil {
		m.log.Error("stop at lease end", "sandbox", id, "err", err)
	}
}

// Get returns one sandbox's record; errs.NotFound if there is none.
func (m *Manager) Get(ctx context.Context, id string) (store.Sandbox, error) {
	sb, err := m.store.GetSandbox(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Sandbox{}, errs.New(errs.NotFound, "no sandbox %q; list yours with GET /v1/sandboxes", id)
	}
	return sb, err
}

// List returns the records that match f, newest first.
func (m *Manager) List(ctx context.Context, f store.SandboxFilter) ([]store.Sandbox, error) {
	return m.store.ListSandboxes(ctx, f)
}

// Destroy stops a sandbox at a caller's request. Destroying a stopped
// sandbox is not an error.
func (m *Manager) Destroy(ctx context.Context, id string) error {
	if _, err := m.Get(ctx, id); err != nil {
		return err
	}
	return m.stop(ctx, id, "deleted")
}

// stop destroys the sandbox in the driver and records why. The record is
// marked stopped first, so a concurrent call sees it gone at once.
func (m *Manager) stop(ctx context.Context, id, reason string) error {
	m.mu.Lock()
	ls := m.live[id]
	delete(m.live, id)
	m.mu.Unlock()
	if ls != nil {
		ls.lease.Stop()
		ls.transport.CloseIdleConnections()
	}
	if err := m.store.MarkStopped(ctx, id, reason, m.now()); err != nil {
		return err
	}
	if err := m.driver.Destroy(ctx, id); err != nil {
		return fmt.Errorf("destroy sandbox %s: %w", id, err)
	}
	return nil
}

// SetTimeout moves the lease end of a running sandbox to now+seconds.
func (m *Manager) SetTimeout(ctx context.Context, id string, seconds int64) (store.Sandbox, error) {
	if seconds < 1 || seconds > int64(m.limits.MaxTimeout/time.Second) {
		return store.Sandbox{}, errs.New(errs.Invalid, "timeoutSeconds must be between 1 and %d; got %d",
			int64(m.limits.MaxTimeout/time.Second), seconds)
	}
	if _, err := m.Running(ctx, id); err != nil {
		return store.Sandbox{}, err
	}
	end := m.now().Add(time.Duration(seconds) * time.Second).UTC()
	if err := m.store.SetLeaseEnd(ctx, id, end); err != nil {
		return store.Sandbox{}, err
	}
	m.mu.Lock()
	if ls := m.live[id]; ls != nil {
		ls.lease.Reset(end.Sub(m.now()))
	}
	m.mu.Unlock()
	return m.Get(ctx, id)
}

// Running returns the record of a running sandbox, or the error that says
// why it cannot be used: errs.NotFound, errs.LeaseEnded, errs.Stopped, or
// errs.Conflict while it is still starting.
func (m *Manager) Running(ctx context.Context, id string) (store.Sandbox, error) {
	sb, err := m.Get(ctx, id)
	if err != nil {
		return sb, err
	}
	switch {
	case sb.State == store.StateStopped && sb.EndReason == "lease_ended":
		return sb, errs.New(errs.LeaseEnded, "sandbox %s's lease ended at %s and it was stopped; create a new sandbox (or extend leases with POST /v1/sandboxes/{id}/timeout before they end)",
			id, sb.LeaseEndsAt.Format(time.RFC3339))
	case sb.State == store.StateStopped:
		return sb, errs.New(errs.Stopped, "sandbox %s was stopped (%s) at %s; create a new sandbox", id, sb.EndReason, fmtTime(sb.EndedAt))
	case sb.State != store.StateRunning:
		return sb, errs.New(errs.Conflict, "sandbox %s is %s; retry when it is running", id, sb.State)
	}
	return sb, nil
}

// AgentTransport returns the HTTP transport to a running sandbox's agent,
// with the same errors as Running.
func (m *Manager) AgentTransport(ctx context.Context, id string) (http.RoundTripper, error) {
	if _, err := m.Running(ctx, id); err != nil {
		return nil, err
	}
	m.mu.Lock()
	ls := m.live[id]
	m.mu.Unlock()
	if ls == nil {
		return nil, errs.New(errs.Conflict, "sandbox %s is not attached to this server", id)
	}
	return ls.transport, nil
}

// Close stops the lease timers and drops connections. Sandboxes keep
// running: a restarted server adopts them (Recover).
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, ls := range m.live {
		ls.lease.Stop()
		ls.transport.CloseIdleConnections()
		delete(m.live, id)
	}
}

// DestroyAll stops every sandbox this server runs (used by the embedded
// server of a one-shot CLI command and by tests).
func (m *Manager) DestroyAll(ctx context.Context) {
	m.mu.Lock()
	ids := make([]string, 0, len(m.live))
	for id := range m.live {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	for _, id := range ids {
		if err := m.stop(ctx, id, "deleted"); err != nil {
			m.log.Error("destroy", "sandbox", id, "err", err)
		}
	}
}

func newID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "sbx_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "an unknown time"
	}
	return t.Format(time.RFC3339)
}
