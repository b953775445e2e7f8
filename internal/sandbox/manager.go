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
	"sync/atomic"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/egress"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// Templates resolves a template name to what the driver boots it from.
type Templates interface {
	// RootFS is what the driver boots template name from (Spec.RootFS): its
	// root filesystem directory (template.Store), or its image pinned by
	// digest (registry.Catalog, for the Kubernetes driver). A different
	// answer for the same name means the template changed: warm-pool
	// sandboxes of the old one are retired.
	RootFS(name string) (string, error)
}

// TemplateUser may be implemented by Templates whose templates can be
// private to one API key (template.Store): CheckUse returns nil when key
// keyID may boot template name, and otherwise the error of a missing
// template (nothing says another key's exists).
type TemplateUser interface {
	CheckUse(name, keyID string) error
}

// TemplateEnv may be implemented by Templates: the environment a
// template's sandboxes start with (an image's Env), under the create's own.
type TemplateEnv interface {
	Env(name string) ([]string, error)
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
	MaxVolumeMiB     int64         // largest volume (0: MaxDiskMiB; volume.go)
	TmpMiB           int64         // size of /tmp (256), at most half the sandbox's memory (see tmpBytes)
	PidsLimit        int64         // processes and threads per user in a sandbox (1024; see pidsLimit)
	MaxSandboxes     int           // held at once on this host, running, starting and paused together (0 = no limit)
	PausedRetention  time.Duration // how long a paused sandbox is kept before it is destroyed (7 days)
	// SnapshotRetention, when positive, is how long a snapshot is kept
	// after it is taken: its record's ExpiresAt, after which it is deleted
	// (snapretention.go). 0: kept until deleted.
	SnapshotRetention time.Duration
	// KeyQuotas are the per-key quotas of a tenant key (one with a daily
	// limit) in the fields its own left at 0 (quota.go); a field at 0
	// here: no default bound. Administrators' keys get none of them.
	KeyQuotas store.KeyQuotas
	// DiskReserveMiB is the host disk, in MiB, that creates and pauses
	// leave free for the store and templates (quota.go); 0: the larger of
	// DefaultDiskReserveMiB and DefaultDiskReservePercent of the
	// filesystem; negative: none.
	DiskReserveMiB int64
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
		PausedRetention:  DefaultPausedRetention,
		KeyQuotas:        store.KeyQuotas{DiskMiB: DefaultKeyDiskMiB, PausedSandboxes: DefaultKeyPaused, Sandboxes: DefaultKeySandboxes},
	}
}

// MaxVolume is the largest volume a create may ask for, in MiB.
func (l Limits) MaxVolume() int64 {
	if l.MaxVolumeMiB > 0 {
		return l.MaxVolumeMiB
	}
	if l.MaxDiskMiB > 0 {
		return l.MaxDiskMiB
	}
	return DefaultLimits().MaxDiskMiB
}

// Manager runs sandboxes. Safe for concurrent use.
type Manager struct {
	driver    driver.Driver
	store     *store.Store
	templates Templates
	limits    Limits
	log       *slog.Logger
	now       func() time.Time
	// network gives sandboxes their network (nil: none; see EnableNetwork).
	network *network
	// netDriver is the driver when it enforces network policies itself
	// (driver.Networker; then network is nil: no host networks).
	netDriver driver.Networker
	// driverEgress is the netDriver's egress proxy, when this server
	// serves one (EnableDriverEgress).
	driverEgress *driverEgress

	mu sync.Mutex
	// live holds the running sandboxes this server tracks; pending counts
	// creates in flight, so capacity holds under a burst.
	live    map[string]*liveSandbox
	pending int
	// resuming counts the resumes among pending: a resuming sandbox keeps
	// the slot it holds in paused (slotsLocked).
	resuming int
	// stopping holds the stops in progress, so that concurrent stops of one
	// sandbox (a DELETE racing its lease end) destroy it once.
	stopping map[string]*stopOp
	// creating holds the sandboxes this server is creating (record
	// inserted, not yet running or failed): the leader's reconcile never
	// takes them for a dead server's leftovers, however long they take.
	creating map[string]bool
	// closed is set by Close: timers and watchers that fire later do nothing.
	closed bool
	// closing is closed by Close, to end the retries of failed destroys.
	closing chan struct{}
	// attaching holds the attaches to other servers' sandboxes under way
	// (attach.go), closed when each ends.
	attaching map[string]chan struct{}
	// retrying holds the sandboxes whose stop failed and is being retried
	// (retryStop).
	retrying map[string]bool
	// bg counts lease ends and sandbox deaths being handled, which Close
	// waits for before the store closes under them.
	bg sync.WaitGroup
	// meter is the usage sampler and ledger (meter.go).
	meter meterState
	// pool is the warm pool (pool.go; nil: none).
	pool *pool
	// paused holds the retention timers of paused sandboxes (pause.go).
	paused map[string]*time.Timer
	// sbLocks serialise pause, resume and stop of each sandbox (pause.go).
	sbLocks sandboxLocks
	// lead gates the leader-only work (leader.go).
	lead leadState
	// quota holds admissions not yet in the store (quota.go).
	quota quotaState
	// snapLocks order creates from a snapshot before its delete (snapshot.go).
	snapLocks snapLocks
	// warming holds the warm-ups under way, by warm image name (warm.go;
	// guarded by mu).
	warming map[string]*warmFlight
	// coldTemplates turns warm images off (SetWarmImages).
	coldTemplates atomic.Bool
}

// liveSandbox is a running sandbox this server holds a handle to.
type liveSandbox struct {
	handle    *driver.Handle
	transport *http.Transport
	lease     *time.Timer
	// leaseMu orders lease changes, so that the agent's backstop and the
	// store always end in the same order they were asked for.
	leaseMu sync.Mutex
	// stopWatch ends the watcher that notices the sandbox dying on its own.
	stopWatch context.CancelFunc
	// gone is closed once the record says stopped (by any path), so a
	// request whose round trip failed can tell a stopped sandbox from a
	// hung agent.
	gone     chan struct{}
	goneOnce sync.Once
	// reqCtx binds every request to the sandbox; a pause cancels it
	// (interrupt) so that requests in flight end, and reopen renews it.
	reqMu      sync.Mutex
	reqCtx     context.Context
	cancelReqs context.CancelCauseFunc
	// gate, while set, holds new requests until it is closed (a
	// snapshot's save: snapshot.go, quiesce).
	gate chan struct{}
}

func (ls *liveSandbox) markGone() { ls.goneOnce.Do(func() { close(ls.gone) }) }

// release stops the lease timer and the watcher and drops idle connections.
func (ls *liveSandbox) release() {
	ls.lease.Stop()
	ls.stopWatching()
	ls.transport.CloseIdleConnections()
}

// stopOp is one stop in progress.
type stopOp struct {
	done chan struct{}
	err  error
}

// New returns a manager. Call Recover before serving requests.
func New(d driver.Driver, st *store.Store, t Templates, limits Limits, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.Default()
	}
	m := &Manager{driver: d, store: st, templates: t, limits: limits, log: log,
		now: time.Now, live: map[string]*liveSandbox{}, stopping: map[string]*stopOp{}, creating: map[string]bool{},
		closing: make(chan struct{}), retrying: map[string]bool{}}
	m.netDriver, _ = d.(driver.Networker)
	return m
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
	// Network is the network policy (nil: {internet: false}); see EnableNetwork.
	Network *egress.Policy
	// Secrets names stored secrets the sandbox may use through its network.
	Secrets []string
	// SecretOwner is whose secrets Secrets names: the creating tenant key's
	// id, or "" for the server's own (keys without a daily limit). Another
	// owner's secret is not found.
	SecretOwner string
	// MaxCostMicros refuses the create (errs.CostCap) if the first lease
	// could cost more (0: no cap).
	MaxCostMicros int64
	// OnLeaseEnd is what the lease end does: store.OnLeaseEndStop (the
	// default) or store.OnLeaseEndPause.
	OnLeaseEnd string
	// PauseMode is what a lease-end pause saves: store.PauseFull (""
	// means it: memory, processes, files) or store.PauseFilesystem (the
	// root filesystem's files alone; the resume boots fresh).
	PauseMode string
	// AutoResume, when set, says whether requests to the sandbox while it is
	// paused resume it first; unset: true when OnLeaseEnd is pause.
	AutoResume *bool
	// Volumes are the creating key's volumes to mount (volume.go).
	Volumes []VolumeRequest
	// Snapshot, when set, is the snapshot (its id, or a name among
	// KeyID's snapshots) the sandbox starts from instead of booting its
	// template (snapshot.go): Template and DiskMiB must then be the
	// snapshot's or 0, MemoryMiB at least its memory or 0.
	Snapshot string
	// AnyKeysSnapshot lets Snapshot name another key's snapshot by id (an
	// administrator's create); otherwise only KeyID's own are found.
	AnyKeysSnapshot bool

	// hold is what the create's admission holds on its key's quotas until
	// its record is inserted (quota.go).
	hold *quotaHold
	// snapshot is Snapshot's record, found by resolveSnapshot.
	snapshot *store.Snapshot
}

// Create boots a sandbox (or restores it from p.Snapshot) and returns its
// record once its agent answers.
// Errors: errs.Invalid for bad parameters or an unknown template,
// errs.Capacity when the host is full, errs.Quota and errs.DiskQuota when
// the key is at a quota, errs.NoSpace when the host's disk cannot take the
// sandbox's disk (quota.go), errs.NotFound and errs.Conflict for a volume
// that is not the key's or not usable, errs.NotImplemented for volumes on a
// driver without them (volume.go), otherwise a driver failure.
func (m *Manager) Create(ctx context.Context, p CreateParams) (store.Sandbox, error) {
	if err := m.resolveSnapshot(ctx, &p); err != nil {
		return store.Sandbox{}, err
	}
	if err := m.applyDefaults(&p); err != nil {
		return store.Sandbox{}, err
	}
	mounts, volSpec, err := m.resolveVolumes(ctx, p)
	if err != nil {
		return store.Sandbox{}, err
	}
	if err := m.checkCaps(ctx, p); err != nil {
		return store.Sandbox{}, err
	}
	if p.hold, err = m.admitCreate(ctx, p); err != nil {
		return store.Sandbox{}, err
	}
	defer p.hold.release()
	if tu, ok := m.templates.(TemplateUser); ok && p.snapshot == nil {
		// A snapshot's template was its own key's when it was taken.
		if err := tu.CheckUse(p.Template, p.KeyID); err != nil {
			return store.Sandbox{}, errs.New(errs.Invalid, "template %q: %v", p.Template, err)
		}
	}
	m.addTemplateEnv(&p)
	rootfs, err := m.templates.RootFS(p.Template)
	if err != nil {
		return store.Sandbox{}, errs.New(errs.Invalid, "template %q: %v", p.Template, err)
	}
	plan, err := m.planNetwork(ctx, p)
	if err != nil {
		return store.Sandbox{}, err
	}
	if ps := m.takePooled(p, rootfs); ps != nil {
		if sb, err := m.claim(ctx, p, ps, plan); !errors.Is(err, errPooledGone) {
			return sb, err
		}
	}
	if err := m.reserve(); err != nil {
		return store.Sandbox{}, err
	}
	defer m.unreserve()
	now := m.now().UTC().Truncate(time.Millisecond) // the store keeps milliseconds
	sb := store.Sandbox{
		ID: m.sandboxID(plan), KeyID: p.KeyID, Template: p.Template, State: store.StateStarting,
		CPU: p.CPU, MemoryMiB: p.MemoryMiB, DiskMiB: p.DiskMiB, Env: p.Env, Metadata: p.Metadata,
		CreatedAt: now, LeaseEndsAt: now.Add(time.Duration(p.TimeoutSeconds) * time.Second),
		Driver: m.driver.Name(), OnLeaseEnd: p.OnLeaseEnd, AutoResume: *p.AutoResume, TimeoutSeconds: p.TimeoutSeconds,
		LeasePauseMode: p.PauseMode, Volumes: mounts,
	}
	m.mu.Lock()
	m.creating[sb.ID] = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.creating, sb.ID)
		m.mu.Unlock()
	}()
	if err := p.hold.countedBy(func() error { return m.store.InsertSandbox(ctx, sb) }); err != nil {
		if plan != nil {
			m.detachLater(sb.ID) // a prepared network it took
		}
		return store.Sandbox{}, mountErr(err)
	}
	netSpec, netEnv, err := m.attachNetwork(ctx, sb.ID, rootfs, plan)
	if err != nil {
		_ = m.store.MarkStopped(context.WithoutCancel(ctx), sb.ID, EndFailed, m.now())
		return store.Sandbox{}, fmt.Errorf("create sandbox: %w", err)
	}
	var trust []byte
	if m.driverEgress != nil {
		var secretEnv []string
		if secretEnv, trust, err = m.driverSecrets(sb.ID, plan); err != nil {
			_ = m.store.MarkStopped(context.WithoutCancel(ctx), sb.ID, EndFailed, m.now())
			return store.Sandbox{}, fmt.Errorf("create sandbox: %w", err)
		}
		netEnv = append(netEnv, secretEnv...)
	}
	h, err := m.boot(ctx, p, driver.Spec{
		ID: sb.ID, Owner: p.KeyID, RootFS: rootfs, CPU: p.CPU,
		MemoryBytes: p.MemoryMiB << 20, DiskBytes: p.DiskMiB << 20, TmpBytes: tmpBytes(m.limits.TmpMiB, p.MemoryMiB),
		ShmBytes:  shmBytes(m.limits.TmpMiB, p.MemoryMiB),
		PidsLimit: pidsLimit(m.limits.PidsLimit, p.MemoryMiB), Env: append(envList(p.Env), netEnv...),
		Network: netSpec, Policy: plan.driverPolicy(), TrustPEM: trust, LeaseEndsAt: sb.LeaseEndsAt,
		Volumes: volSpec,
	})
	if err != nil {
		_ = m.store.MarkStopped(context.WithoutCancel(ctx), sb.ID, EndFailed, m.now())
		m.detachNetwork(context.WithoutCancel(ctx), sb.ID)
		return store.Sandbox{}, mountErr(fmt.Errorf("create sandbox: %w", err))
	}
	if err := m.store.MarkRunning(ctx, sb.ID, h.State); err != nil {
		_ = m.driver.Destroy(context.WithoutCancel(ctx), sb.ID)
		m.detachNetwork(context.WithoutCancel(ctx), sb.ID)
		return store.Sandbox{}, err
	}
	m.meterStart(ctx, sb)
	m.adopt(sb.ID, h, sb.LeaseEndsAt)
	sb.State, sb.DriverState = store.StateRunning, h.State
	return sb, nil
}

// mibPerProcess is the memory a sandbox needs per process it may run:
// under gVisor each process or thread inside costs about 1 MiB of host
// memory (measured: 0.75 MiB each for 256 idle shells, 1.1 MiB for 512),
// counted against the sandbox's memory limit. A bomb of forked python3
// interpreters costs about 3.5 MiB a process (their pages are copied on
// write as they run), and it grows too fast for anything inside the
// sandbox to stop it before the limit: at 2 MiB a process it took the
// whole 512 MiB sandbox down; at 4 the sandbox survived (peak 430-460 of
// 576 MiB on the host) and the agent killed the bomb.
const mibPerProcess = 4

// tmpBytes is the size of a sandbox's /tmp: the server's TmpMiB, but at
// most half of the sandbox's memory. /tmp is a tmpfs, whose pages are the
// sandbox's memory: a /tmp larger than the memory would let a command fill
// it until the host kills the whole sandbox, where it should get ENOSPC.
func tmpBytes(tmpMiB, memoryMiB int64) int64 {
	return min(tmpMiB, memoryMiB/2) << 20
}

// shmBytes is the size of a sandbox's /dev/shm: like /tmp's, but at most a
// quarter of its memory, so that /tmp and /dev/shm full together still leave
// a quarter of the memory to the processes (tmpfs pages are no process's,
// so the agent's memory guard cannot kill them away).
func shmBytes(tmpMiB, memoryMiB int64) int64 {
	return min(tmpMiB, memoryMiB/4) << 20
}

// pidsLimit is the process cap of a sandbox of memoryMiB: the server's
// limit, but no more than the sandbox's memory can hold, so that a fork
// bomb meets EAGAIN before the host kills the whole sandbox for memory.
// A sandbox could not run more processes than that anyway.
func pidsLimit(limit, memoryMiB int64) int64 {
	if byMemory := memoryMiB / mibPerProcess; limit <= 0 || byMemory < limit {
		return byMemory
	}
	return limit
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
	var err error
	if p.OnLeaseEnd, p.AutoResume, err = leasePolicy(p.OnLeaseEnd, p.AutoResume, store.OnLeaseEndStop); err != nil {
		return err
	}
	if p.PauseMode, err = m.checkPauseMode(p.PauseMode, store.PauseFull); err != nil {
		return err
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

// addTemplateEnv puts the template's environment under p.Env (a variable
// the create sets wins). Entries that are not KEY=value are skipped.
func (m *Manager) addTemplateEnv(p *CreateParams) {
	te, ok := m.templates.(TemplateEnv)
	if !ok {
		return
	}
	env, err := te.Env(p.Template)
	if err != nil || len(env) == 0 {
		return // a missing template is reported by RootFS
	}
	merged := make(map[string]string, len(env)+len(p.Env))
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" && !strings.ContainsRune(kv, 0) {
			merged[k] = v
		}
	}
	for k, v := range p.Env {
		merged[k] = v
	}
	p.Env = merged
}

// reserve takes a slot of MaxSandboxes for a new sandbox, or fails with
// errs.Capacity.
func (m *Manager) reserve() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if max := m.limits.MaxSandboxes; max > 0 && m.slotsLocked() >= max {
		return errs.New(errs.Capacity, "this server holds its maximum of %d sandboxes (serve --max-sandboxes: %d running, %d paused, %d starting; paused sandboxes keep their slots); delete one or retry later",
			max, len(m.live), len(m.paused), m.pending-m.resuming)
	}
	m.pending++
	return nil
}

func (m *Manager) unreserve() {
	m.mu.Lock()
	m.pending--
	m.mu.Unlock()
}

// reserveResume counts a resume among the creates in flight (the warm
// pool boots fewer meanwhile) without a new slot: its sandbox holds one
// while paused. unreserveResume ends it.
func (m *Manager) reserveResume() {
	m.mu.Lock()
	m.pending++
	m.resuming++
	m.mu.Unlock()
}

func (m *Manager) unreserveResume() {
	m.mu.Lock()
	m.pending--
	m.resuming--
	m.mu.Unlock()
}

// slotsLocked is how many of MaxSandboxes' slots are held: running and
// paused sandboxes, and creates in flight (a resume is its paused
// sandbox's slot already). m.mu is held.
func (m *Manager) slotsLocked() int {
	return len(m.live) + len(m.paused) + m.pending - m.resuming
}

// agentConns is the connection pool to one sandbox's agent: every
// connection is dialled by h.Dial, which checks the socket and its
// listener each time.
func agentConns(h *driver.Handle) *http.Transport {
	return &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return h.Dial(ctx) },
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
}

// adopt starts tracking a running sandbox, arms its lease timer and, when
// the driver can, watches for the sandbox dying on its own.
func (m *Manager) adopt(id string, h *driver.Handle, leaseEnd time.Time) {
	m.adoptWith(id, h, leaseEnd, agentConns(h))
}

// adoptWith is adopt with the agent connections tr (agentConns of h)
// already open: a claimed pooled sandbox keeps those of its warm-up and
// claim, so that its first command needs no new connection.
func (m *Manager) adoptWith(id string, h *driver.Handle, leaseEnd time.Time, tr *http.Transport) {
	ls := &liveSandbox{handle: h, transport: tr, gone: make(chan struct{})}
	ls.reqCtx, ls.cancelReqs = context.WithCancelCause(context.Background())
	m.mu.Lock()
	defer m.mu.Unlock()
	ls.lease = time.AfterFunc(leaseEnd.Sub(m.now()), func() { m.leaseEnded(id) })
	if w, ok := m.driver.(driver.Watcher); ok {
		ctx, cancel := context.WithCancel(context.Background())
		ls.stopWatch = cancel
		go m.watch(ctx, w, id, ls)
	}
	m.live[id] = ls
}

// background runs f as tracked background work unless the manager is closed.
func (m *Manager) background(f func()) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.bg.Add(1)
	m.mu.Unlock()
	defer m.bg.Done()
	f()
}

// leaseEnded is a sandbox's lease timer: it ends the lease when this
// server does the leader-only work (always without GateLeaderWork);
// otherwise the leader's sweep does.
func (m *Manager) leaseEnded(id string) {
	if parent, ok := m.leaderContext(); ok {
		m.endLease(parent, id)
	}
}

// endLease stops (or pauses, per its policy) sandbox id if its lease has
// ended, under parent (the leader's term).
func (m *Manager) endLease(parent context.Context, id string) {
	m.background(func() {
		ctx, cancel := context.WithTimeout(parent, time.Minute)
		defer cancel()
		sb, err := m.store.GetSandbox(ctx, id)
		if err == nil && sb.State != store.StateStopped && sb.LeaseEndsAt.After(m.now().Add(50*time.Millisecond)) {
			return // the lease moved after the timer fired; SetTimeout re-armed it
		}
		if err == nil && sb.State == store.StateRunning && sb.OnLeaseEnd == store.OnLeaseEndPause {
			if m.pauseAtLeaseEnd(ctx, id, sb.LeasePauseMode) {
				return
			}
			if ctx.Err() != nil {
				return // the term ended: the next leader pauses it
			}
		}
		m.log.Info("lease ended", "sandbox", id)
		if err := m.stop(ctx, id, EndLeaseEnded); err != nil {
			m.log.Error("stop at lease end", "sandbox", id, "err", err)
		}
	})
}

// watch waits for a sandbox to end on its own (killed by the host for
// memory, crashed) and then stops it: the record says why, and what the
// sandbox left on the host is removed. It returns when ctx ends (the
// sandbox was stopped by other means, or the manager closed).
func (m *Manager) watch(ctx context.Context, w driver.Watcher, id string, ls *liveSandbox) {
	var ex driver.Exit
	for {
		var err error
		ex, err = w.Wait(ctx, id)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			break
		}
		// The driver could not tell (a runsc hiccup): look again shortly.
		// The lease still ends the sandbox meanwhile.
		m.log.Warn("watching sandbox", "sandbox", id, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
	m.background(func() {
		m.mu.Lock()
		current := m.live[id] == ls
		m.mu.Unlock()
		if !current {
			return // already being stopped
		}
		reason := EndFailed
		if ex.OutOfMemory {
			reason = EndOutOfMemory
		}
		m.log.Warn("sandbox ended on its own", "sandbox", id, "reason", reason, "detail", ex.Detail)
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.stop(sctx, id, reason); err != nil {
			m.log.Error("clean up after sandbox ended", "sandbox", id, "err", err)
		}
	})
}

// End reasons recorded on stopped sandboxes.
const (
	EndDeleted     = "deleted"
	EndLeaseEnded  = "lease_ended"
	EndFailed      = "failed"
	EndOutOfMemory = "out_of_memory"
)

// Get returns one sandbox's record; errs.NotFound if there is none.
func (m *Manager) Get(ctx context.Context, id string) (store.Sandbox, error) {
	sb, err := m.store.GetSandbox(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Sandbox{}, errs.New(errs.NotFound, "no sandbox %q; list yours with GET /v1/sandboxes", id)
	}
	if err == nil {
		m.dropStale(sb) // stopped by another server (attach.go)
	}
	return sb, err
}

// List returns the records that match f, newest first.
func (m *Manager) List(ctx context.Context, f store.SandboxFilter) ([]store.Sandbox, error) {
	return m.store.ListSandboxes(ctx, f)
}

// Destroy stops a sandbox at a caller's request. Destroying a stopped
// sandbox is not an error (DELETE is idempotent); it still makes sure that
// nothing of the sandbox is left on the host.
func (m *Manager) Destroy(ctx context.Context, id string) error {
	if _, err := m.Get(ctx, id); err != nil {
		return err
	}
	return m.stop(ctx, id, EndDeleted)
}

// stop destroys the sandbox in the driver and records why, ended now. The
// record is marked stopped first, so a concurrent call sees it gone at once.
// Stops of one sandbox are serialised: a second caller waits for the first
// and gets its result (the first reason recorded wins).
func (m *Manager) stop(ctx context.Context, id, reason string) error {
	return m.stopAt(ctx, id, reason, time.Time{})
}

// stopAt is stop with the time the sandbox ended, when that was before now
// (zero: now): Recover records a lease that ended while no server ran at
// its lease end.
func (m *Manager) stopAt(ctx context.Context, id, reason string, endedAt time.Time) error {
	m.mu.Lock()
	if op := m.stopping[id]; op != nil {
		m.mu.Unlock()
		select {
		case <-op.done:
			return op.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	op := &stopOp{done: make(chan struct{})}
	m.stopping[id] = op
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.stopping, id)
		m.mu.Unlock()
		close(op.done)
	}()
	unlock := m.lockSandbox(id) // after a pause or resume under way
	defer unlock()
	op.err = m.stopLocked(ctx, id, reason, endedAt)
	return op.err
}

// stopHeld is stopAt now, for a caller that holds the sandbox's lock (a
// failed resume): stopAt would wait for that lock for ever (seen in CI: a
// resume that failed under load hung its request and every later one). A
// stop of id waiting for the lock meanwhile runs after it and finds the
// sandbox stopped (MarkStopped and Destroy take a stopped sandbox again).
func (m *Manager) stopHeld(ctx context.Context, id, reason string) error {
	return m.stopLocked(ctx, id, reason, time.Time{})
}

// stopLocked is stopAt with the sandbox's lock held.
func (m *Manager) stopLocked(ctx context.Context, id, reason string, endedAt time.Time) error {
	m.mu.Lock()
	ls := m.live[id]
	delete(m.live, id)
	m.mu.Unlock()
	if ls != nil {
		ls.release()
	}
	m.dropRetention(id)
	// The destroy must finish even if the caller goes away: a half-destroyed
	// sandbox would leak until the next restart.
	ctx = context.WithoutCancel(ctx)
	if endedAt.IsZero() {
		endedAt = m.now()
	}
	if err := m.store.MarkStopped(ctx, id, reason, endedAt); err != nil {
		m.retryStop(id, reason)
		return err
	}
	if ls != nil {
		ls.markGone()
	}
	m.meterFinal(ctx, id)
	if err := m.driver.Destroy(ctx, id); err != nil {
		err = fmt.Errorf("destroy sandbox %s: %w", id, err)
		m.retryStop(id, reason)
		return err
	}
	m.detachLater(id) // Close waits for it
	m.wakePool()      // a pool held back by the server's maximum may refill
	return nil
}

// stopRetryMax bounds the wait between two retries of a failed stop.
const stopRetryMax = 30 * time.Second

// retryStop retries, in the background, a stop of sandbox id that failed
// (a runsc hiccup; the server out of file descriptors, which any client can
// cause with enough open connections), every 1, 2, 4 … 30 s until it
// succeeds or the manager closes (the next server's Recover then destroys
// the sandbox). The failed stop already dropped the sandbox's lease timer
// and, when the destroy failed, recorded it stopped, so without this it
// would go on running past its lease, unbilled, until the next restart.
// One retry loop per sandbox.
func (m *Manager) retryStop(id, reason string) {
	m.mu.Lock()
	if m.closed || m.retrying[id] {
		m.mu.Unlock()
		return
	}
	m.retrying[id] = true
	m.bg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.bg.Done()
		defer func() {
			m.mu.Lock()
			delete(m.retrying, id)
			m.mu.Unlock()
		}()
		for wait := time.Second; ; wait = min(2*wait, stopRetryMax) {
			select {
			case <-m.closing:
				return
			case <-time.After(wait):
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := m.stop(ctx, id, reason)
			cancel()
			if err == nil {
				m.log.Info("stopped after a failed stop", "sandbox", id)
				return
			}
			m.log.Warn("stop failed again; retrying", "sandbox", id, "in", min(2*wait, stopRetryMax), "err", err)
		}
	}()
}

// SetTimeout moves the lease end of a running sandbox to now+seconds.
func (m *Manager) SetTimeout(ctx context.Context, id string, seconds int64) (store.Sandbox, error) {
	if seconds < 1 || seconds > int64(m.limits.MaxTimeout/time.Second) {
		return store.Sandbox{}, errs.New(errs.Invalid, "timeoutSeconds must be between 1 and %d; got %d",
			int64(m.limits.MaxTimeout/time.Second), seconds)
	}
	// Held (attached when another server started it), so that the agent's
	// backstop moves with the lease wherever the request lands.
	sb, ls, err := m.heldOrAttach(ctx, id)
	if err != nil {
		return store.Sandbox{}, err
	}
	if ls != nil {
		ls.leaseMu.Lock()
		defer ls.leaseMu.Unlock()
		if sb, err = m.store.GetSandbox(ctx, id); err != nil {
			return store.Sandbox{}, err
		}
	}
	end := m.now().Add(time.Duration(seconds) * time.Second).UTC().Truncate(time.Millisecond)
	if err := m.checkLeaseBound(ctx, id, end); err != nil {
		return store.Sandbox{}, err
	}
	// The agent's backstop (see agent.LeaseGrace) must never come before
	// the server's lease end: a longer lease goes to the agent first, a
	// shorter one to the store first.
	tellAgent := func() error {
		if ls == nil {
			return nil
		}
		return configureAgent(ctx, ls.handle, agentapi.ConfigureRequest{LeaseEndsAt: &end})
	}
	if end.After(sb.LeaseEndsAt) {
		if err := tellAgent(); err != nil {
			return store.Sandbox{}, fmt.Errorf("sandbox %s: the agent did not take the new lease end: %w", id, err)
		}
	}
	if err := m.store.SetLeaseEnd(ctx, id, end); err != nil {
		return store.Sandbox{}, err
	}
	// A resume gives this lease again.
	if err := m.store.SetLeasePolicy(ctx, id, sb.OnLeaseEnd, sb.AutoResume, seconds); err != nil {
		return store.Sandbox{}, err
	}
	if ls != nil {
		ls.lease.Reset(end.Sub(m.now()))
	}
	if !end.After(sb.LeaseEndsAt) {
		if err := tellAgent(); err != nil {
			m.log.Warn("the agent did not take a shorter lease end; the server still enforces it", "sandbox", id, "err", err)
		}
	}
	// The lease may have ended (or the sandbox died) while the new end was
	// being written: then say so rather than return a stopped record.
	return m.Running(ctx, id)
}

// checkLeaseBound refuses (errs.Invalid) a lease end past the latest one
// the driver can keep sandbox id running for (driver.LeaseBounder;
// Kubernetes: the pod's deadline, which can never be raised).
func (m *Manager) checkLeaseBound(ctx context.Context, id string, end time.Time) error {
	lb, ok := m.driver.(driver.LeaseBounder)
	if !ok {
		return nil
	}
	latest, err := lb.LatestLeaseEnd(ctx, id)
	if err != nil {
		return fmt.Errorf("sandbox %s: the latest lease end it can keep: %w", id, err)
	}
	if latest.IsZero() || !end.After(latest) {
		return nil
	}
	return errs.New(errs.Invalid, "sandbox %s cannot run past %s: its %s driver fixed that end when it started (on Kubernetes the pod's activeDeadlineSeconds, which can never be raised), so timeoutSeconds can be at most %d now; create a new sandbox for longer work",
		id, latest.Format(time.RFC3339), m.driver.Name(), max(0, int64(latest.Sub(m.now())/time.Second)))
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
	case sb.State == store.StateStopped && sb.EndReason == EndLeaseEnded:
		return sb, errs.New(errs.LeaseEnded, "sandbox %s's lease ended at %s and it was stopped; create a new sandbox (or extend leases with POST /v1/sandboxes/{id}/timeout before they end)",
			id, sb.LeaseEndsAt.Format(time.RFC3339))
	case sb.State == store.StateStopped && sb.EndReason == EndOutOfMemory:
		return sb, errs.New(errs.Stopped, "sandbox %s ran out of memory at %s: it went over its %d MiB and the host stopped the whole sandbox; create a new sandbox with a larger memoryMiB",
			id, fmtTime(sb.EndedAt), sb.MemoryMiB)
	case sb.State == store.StateStopped && sb.EndReason == EndFailed:
		return sb, errs.New(errs.Stopped, "sandbox %s failed at %s (its processes ended unexpectedly) and was stopped; create a new sandbox", id, fmtTime(sb.EndedAt))
	case sb.State == store.StateStopped && sb.EndReason == EndDeleted:
		return sb, errs.New(errs.Stopped, "sandbox %s was destroyed at %s: it was deleted; create a new sandbox", id, fmtTime(sb.EndedAt))
	case sb.State == store.StateStopped && sb.EndReason == EndRetention:
		return sb, errs.New(errs.Stopped, "sandbox %s stayed paused past the server's paused retention and was destroyed at %s; create a new sandbox", id, fmtTime(sb.EndedAt))
	case sb.State == store.StateStopped:
		return sb, errs.New(errs.Stopped, "sandbox %s was stopped (%s) at %s; create a new sandbox", id, sb.EndReason, fmtTime(sb.EndedAt))
	case sb.State == store.StatePaused:
		return sb, errs.New(errs.Paused, "sandbox %s is paused (since %s); resume it with POST /v1/sandboxes/%s/resume (sandboxes created with autoResume resume on their next request)",
			id, fmtTime(sb.PausedAt), id)
	case sb.State != store.StateRunning:
		return sb, errs.New(errs.Conflict, "sandbox %s is %s; retry when it is running", id, sb.State)
	}
	return sb, nil
}

// Close destroys the warm pool's unclaimed sandboxes, stops the lease
// timers and watchers, waits for lease ends being handled, removes the
// prepared networks and waits for the networks of stopped sandboxes to be
// removed, and drops connections. Claimed sandboxes keep running: a restarted server adopts
// them (Recover).
func (m *Manager) Close() {
	m.stopLead()
	m.closePool()
	m.stopMetering()
	m.mu.Lock()
	if !m.closed {
		close(m.closing)
	}
	m.closed = true
	for id, ls := range m.live {
		ls.release()
		delete(m.live, id)
	}
	for id, t := range m.paused {
		t.Stop()
		delete(m.paused, id)
	}
	m.mu.Unlock()
	m.bg.Wait()
	m.closeNetSlots()
	if c, ok := m.driver.(driver.Closer); ok {
		if err := c.Close(); err != nil {
			m.log.Warn("close driver", "err", err)
		}
	}
}

// DestroyAll stops every sandbox this server runs or keeps paused (used by the embedded
// server of a one-shot CLI command and by tests).
func (m *Manager) DestroyAll(ctx context.Context) {
	m.mu.Lock()
	ids := make([]string, 0, len(m.live)+len(m.paused))
	for id := range m.live {
		ids = append(ids, id)
	}
	for id := range m.paused {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	for _, id := range ids {
		if err := m.stop(ctx, id, EndDeleted); err != nil {
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
