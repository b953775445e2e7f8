package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/egress"
	"withruntime.dev/runtime/internal/store"
)

// PoolConfig configures the warm pool: sandboxes booted ahead of time so
// that a create only claims one. A pooled sandbox has the default shape
// (Limits' default CPU, memory and disk) and no network policy yet; a create
// with the default memory and disk takes one and applies its own
// environment, lease, metadata, network policy and CPU limit (when the
// driver can change it: driver.CPUSetter). A create that asks for another
// memory or disk size or another visible CPU count (driver.VisibleCPUs; all
// fixed when gVisor boots), or for secrets
// (whose CA bundle is written into the sandbox at boot; except with a
// driver whose pooled sandboxes boot trusting the Runtime CA: pooledTrust),
// starts cold, as does
// any create while the pool is empty: a burst larger than the pool is slower,
// never refused for it.
//
// The pool follows demand: each pooled template keeps ready the most
// creates of its pooled shape that arrived within one second during the
// last RateWindow, at least Size and at most Max. Sandboxes past that
// (after a burst, once the window has passed) are destroyed, oldest first.
// Refills boot up to one sandbox per host core at once, less one per
// create in flight (at least one boot).
type PoolConfig struct {
	// Size is how many booted sandboxes each pooled template keeps ready at
	// least (0: no pool).
	Size int
	// Max is how many it may keep ready after a burst (0 or less than
	// Size: Size, a pool of fixed size; `withruntime serve` defaults to
	// DefaultPoolMax).
	Max int
	// RateWindow is how far back the pool looks at creates to size itself
	// (default 30 s).
	RateWindow time.Duration
	// MaxAge is how long a sandbox may wait in the pool before it is
	// destroyed and replaced, so that a pool never hands out a sandbox booted
	// long ago (default 10 minutes).
	MaxAge time.Duration
	// Templates are the templates that get a pool (default: base).
	Templates []string
	// NetworkSlots is how many sandbox networks (namespace, veth, rules)
	// are kept prepared for creates, pooled or not, when sandboxes have
	// networks (0: none; `withruntime serve` defaults to
	// DefaultNetworkSlots). They are kept even when Size is 0.
	NetworkSlots int
}

// DefaultPoolMax is `withruntime serve`'s default PoolConfig.Max.
const DefaultPoolMax = 8

// PoolStatus is one template's pool as GET /v1/health reports it.
type PoolStatus struct {
	Size  int `json:"size"`  // sandboxes the pool keeps ready now (follows demand between Min and Max)
	Ready int `json:"ready"` // booted and waiting now
	Min   int `json:"min"`   // PoolConfig.Size
	Max   int `json:"max"`   // PoolConfig.Max
}

// poolRetry is how long the pool waits after a failed boot (a template not
// built yet, the host full) before trying again.
const poolRetry = 2 * time.Second

// refillQuiet is how long the refill of a template waits after a claim
// while that template still has a sandbox ready. A boot takes both of a
// small host's cores for about 150 ms, and the claimed sandbox's first
// command (the create's exec, usually short) runs in that same moment:
// measured here, a pooled create+exec was 2.1-2.5x an exec in a running
// sandbox with the refill starting at the claim. A pool left empty refills
// at once (a burst needs the boots more than the quiet).
const refillQuiet = 250 * time.Millisecond

// pool holds the pooled sandboxes. They have no store record (they belong
// to no key and are billed to nobody until claimed), so a restarted server
// destroys any it finds as orphans.
type pool struct {
	cfg PoolConfig
	// par bounds the boots under way at once (the host's cores; less the
	// creates in flight, see fillPool).
	par     int
	mu      sync.Mutex
	ready   map[string][]*pooled   // by template, oldest first
	booting map[string]int         // boots under way, by template
	demand  map[string][]time.Time // creates of the pooled shape within RateWindow, by template
	retryAt time.Time              // no boot before this (after a failed one)
	claimed map[string]time.Time   // the last claim, by template (see refillQuiet)
	quietTo time.Time              // the earliest end of a refill's quiet; the pool looks again then
	boots   sync.WaitGroup         // boots under way
	wake    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
}

// pooled is one booted, unclaimed sandbox.
type pooled struct {
	id       string
	template string
	rootfs   string // the template's root when it booted; a rebuilt template retires it
	handle   *driver.Handle
	// conns are its agent connections (agentConns), opened by the warm-up
	// and kept for the claim and the first command.
	conns *http.Transport
	born  time.Time
}

// StartPool boots and keeps the warm pool in the background until Close,
// and keeps sandbox networks prepared (PoolConfig.NetworkSlots, with or
// without a pool). Call it once, after Recover. With GateLeaderWork the
// pool runs only while Lead does (the networks are this host's: always).
func (m *Manager) StartPool(cfg PoolConfig) {
	m.startNetSlots(cfg.NetworkSlots)
	if cfg.Size <= 0 {
		return
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 10 * time.Minute
	}
	cfg.Max = max(cfg.Max, cfg.Size)
	if cfg.RateWindow <= 0 {
		cfg.RateWindow = 30 * time.Second
	}
	if len(cfg.Templates) == 0 {
		cfg.Templates = []string{"base"}
	}
	if m.lead.gated {
		m.lead.mu.Lock()
		m.lead.poolCfg = &cfg // Lead starts it while this server leads
		m.lead.mu.Unlock()
		return
	}
	m.startPoolLoop(context.Background(), cfg)
}

// startPoolLoop starts the pool of cfg (normalised by StartPool), kept until
// ctx ends or closePool.
func (m *Manager) startPoolLoop(ctx context.Context, cfg PoolConfig) {
	ctx, cancel := context.WithCancel(ctx)
	p := &pool{cfg: cfg, par: max(1, runtime.NumCPU()), ready: map[string][]*pooled{}, booting: map[string]int{},
		demand: map[string][]time.Time{}, claimed: map[string]time.Time{}, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	m.mu.Lock()
	m.pool = p
	m.mu.Unlock()
	go m.keepPool(ctx, p)
}

// PoolStatus reports each pooled template's size and ready count (nil when
// there is no pool).
func (m *Manager) PoolStatus() map[string]PoolStatus {
	p := m.currentPool()
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]PoolStatus{}
	now := m.now()
	for _, t := range p.cfg.Templates {
		out[t] = PoolStatus{Size: p.targetLocked(t, now), Ready: len(p.ready[t]), Min: p.cfg.Size, Max: p.cfg.Max}
	}
	return out
}

func (m *Manager) currentPool() *pool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pool
}

// targetLocked is how many sandboxes template t keeps ready now: the most
// creates that arrived within one second in the last RateWindow, between
// Size and Max. It drops the demand older than the window.
func (p *pool) targetLocked(t string, now time.Time) int {
	d := p.demand[t]
	from := now.Add(-p.cfg.RateWindow)
	for len(d) > 0 && d[0].Before(from) {
		d = d[1:]
	}
	p.demand[t] = d
	peak, j := 0, 0
	for i := range d {
		for d[i].Sub(d[j]) >= time.Second {
			j++
		}
		peak = max(peak, i-j+1)
	}
	return min(max(peak, p.cfg.Size), p.cfg.Max)
}

// keepPool fills the pool, retires sandboxes past MaxAge or past the
// current size, and refills after every claim, up to par boots at once.
func (m *Manager) keepPool(ctx context.Context, p *pool) {
	defer close(p.done)
	defer p.boots.Wait()
	check := min(p.cfg.MaxAge/4, 30*time.Second)
	for {
		m.retireOld(ctx, p)
		wait := check
		if grown := m.fillPool(ctx, p); grown {
			// Look again when the window may have passed, to shrink.
			wait = min(wait, p.cfg.RateWindow/4+time.Millisecond)
		}
		p.mu.Lock()
		if d := time.Until(p.retryAt); d > 0 {
			wait = min(wait, d)
		}
		if d := time.Until(p.quietTo); d > 0 {
			wait = min(wait, d)
		}
		p.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-p.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// fillPool starts boots until every pooled template has its current size
// ready or booting, at most par at once less the creates in flight (at
// least one). It leaves room under the server's
// maximum for creates that are not pooled. It reports whether some
// template's size is above Size (so that it is looked at again to shrink).
func (m *Manager) fillPool(ctx context.Context, p *pool) (grown bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := m.now()
	inFlight, total := 0, 0
	for _, t := range p.cfg.Templates {
		inFlight += p.booting[t]
		total += len(p.ready[t]) + p.booting[t]
	}
	// Creates in flight (cold boots, mostly) come first: each one takes a
	// core's worth of the refill's parallelism, down to one boot at a time.
	m.mu.Lock()
	par := max(1, p.par-m.pending)
	m.mu.Unlock()
	p.quietTo = time.Time{}
	for _, t := range p.cfg.Templates {
		target := p.targetLocked(t, now)
		grown = grown || target > p.cfg.Size
		if end := p.claimed[t].Add(refillQuiet); len(p.ready[t]) > 0 && now.Before(end) {
			if p.quietTo.IsZero() || end.Before(p.quietTo) {
				p.quietTo = end
			}
			continue
		}
		for len(p.ready[t])+p.booting[t] < target && inFlight < par && ctx.Err() == nil && !now.Before(p.retryAt) {
			m.mu.Lock()
			full := m.closed || (m.limits.MaxSandboxes > 0 && m.slotsLocked()+total >= m.limits.MaxSandboxes)
			m.mu.Unlock()
			if full {
				return grown // a claim or a destroy wakes the pool again
			}
			p.booting[t]++
			inFlight++
			total++
			p.boots.Add(1)
			go m.bootOne(ctx, p, t)
		}
	}
	return grown
}

// bootOne boots one sandbox of template t into the pool and wakes the
// pool, which starts the next boot.
func (m *Manager) bootOne(ctx context.Context, p *pool, t string) {
	defer p.boots.Done()
	ps, err := m.bootPooled(ctx, p, t)
	p.mu.Lock()
	p.booting[t]--
	if err == nil {
		p.ready[t] = append(p.ready[t], ps)
	} else if ctx.Err() == nil {
		m.log.Warn("warm pool: boot failed; retrying", "err", err, "in", poolRetry)
		p.retryAt = m.now().Add(poolRetry)
	}
	p.mu.Unlock()
	m.wakePool()
}

// bootPooled boots one sandbox of the default shape for template, with a
// network namespace whose policy allows nothing when egress is enabled
// (so that a claim only has to set the policy).
func (m *Manager) bootPooled(ctx context.Context, p *pool, template string) (*pooled, error) {
	rootfs, err := m.templates.RootFS(template)
	if err != nil {
		return nil, err
	}
	id := newID()
	if m.network != nil {
		if slot := m.takeNetSlot(); slot != "" {
			id = slot
		}
	}
	spec := driver.Spec{ID: id, RootFS: rootfs, CPU: m.limits.DefaultCPU,
		MemoryBytes: m.limits.DefaultMemoryMiB << 20, DiskBytes: m.limits.DefaultDiskMiB << 20,
		TmpBytes: tmpBytes(m.limits.TmpMiB, m.limits.DefaultMemoryMiB), ShmBytes: shmBytes(m.limits.TmpMiB, m.limits.DefaultMemoryMiB),
		PidsLimit: pidsLimit(m.limits.PidsLimit, m.limits.DefaultMemoryMiB),
		// A pooled sandbox left behind by a server that died ends itself.
		LeaseEndsAt: m.now().Add(p.cfg.MaxAge + time.Minute), Pooled: true,
		// Its boot (and warm-up) yields the host's cores to running
		// sandboxes, a just-claimed one's first commands above all; the
		// claim restores the weight.
		Background: true}
	if m.network != nil {
		att, err := m.network.egress.Attach(ctx, id, egress.Policy{})
		if err != nil {
			return nil, err
		}
		spec.Network = &driver.Network{NetnsPath: att.NetnsPath, ResolvConf: att.ResolvConf}
		bundle, env, err := m.trustBundle(rootfs, false)
		if err != nil {
			m.detachNetwork(context.WithoutCancel(ctx), id)
			return nil, err
		}
		spec.Network.CABundle, spec.Env = bundle, env
	}
	if m.pooledTrust() {
		// So that a create with secrets can claim it: the CA a sandbox
		// must trust is fixed at boot; the placeholders come at the claim.
		spec.TrustPEM = m.driverEgress.ca.CertPEM()
	}
	var h *driver.Handle
	if st := m.startOf(template); st != nil {
		// A warm template's pooled sandbox starts from its warm image too
		// (the pool's shape is the image's).
		shape := CreateParams{CPU: m.limits.DefaultCPU, MemoryMiB: m.limits.DefaultMemoryMiB, DiskMiB: m.limits.DefaultDiskMiB}
		h, err = m.bootWarm(ctx, template, spec, st, m.warmFits(shape))
	} else {
		h, err = m.driver.Create(ctx, spec)
	}
	if err != nil {
		m.detachNetwork(context.WithoutCancel(ctx), id)
		return nil, err
	}
	conns := agentConns(h)
	warmUp(ctx, conns)
	return &pooled{id: id, template: template, rootfs: rootfs, handle: h, conns: conns, born: m.now()}, nil
}

// retireOld destroys pooled sandboxes older than MaxAge, and the oldest
// of those past their template's current size (demand has fallen).
func (m *Manager) retireOld(ctx context.Context, p *pool) {
	p.mu.Lock()
	var old []*pooled
	now := m.now()
	for t, list := range p.ready {
		keep := list[:0]
		surplus := len(list) - p.targetLocked(t, now)
		for _, ps := range list {
			if surplus > 0 || now.Sub(ps.born) >= p.cfg.MaxAge {
				old = append(old, ps)
				surplus--
			} else {
				keep = append(keep, ps)
			}
		}
		p.ready[t] = keep
	}
	p.mu.Unlock()
	for _, ps := range old {
		m.destroyPooled(ctx, ps)
	}
}

// destroyPooled removes an unclaimed sandbox and its network.
func (m *Manager) destroyPooled(ctx context.Context, ps *pooled) {
	ps.conns.CloseIdleConnections()
	if err := m.driver.Destroy(context.WithoutCancel(ctx), ps.id); err != nil {
		m.log.Error("warm pool: destroy", "sandbox", ps.id, "err", err)
	}
	m.detachLater(ps.id) // its id is never used again; Close waits
}

// takePooled hands out a pooled sandbox for a create with parameters p
// (defaults applied) on rootfs, or nil when the create does not fit the
// pool or the pool is empty. Each pooled sandbox is handed out once: it
// leaves the pool under the pool's lock. Every take wakes the refill.
func (m *Manager) takePooled(p CreateParams, rootfs string) *pooled {
	pl := m.currentPool()
	_, canSetCPU := m.driver.(driver.CPUSetter)
	// The CPU count a sandbox sees is fixed at boot: another count starts cold.
	sameCPUs := driver.VisibleCPUs(p.CPU) == driver.VisibleCPUs(m.limits.DefaultCPU)
	// Volumes are mounted at boot, a snapshot is restored: such creates start cold.
	if pl == nil || len(p.Volumes) > 0 || p.snapshot != nil || (len(p.Secrets) > 0 && !m.pooledTrust()) || !sameCPUs || (p.CPU != m.limits.DefaultCPU && !canSetCPU) ||
		p.MemoryMiB != m.limits.DefaultMemoryMiB || p.DiskMiB != m.limits.DefaultDiskMiB ||
		!slices.Contains(pl.cfg.Templates, p.Template) {
		return nil
	}
	defer m.wakePool()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.demand[p.Template] = append(pl.demand[p.Template], m.now())
	list := pl.ready[p.Template]
	if len(list) == 0 {
		return nil
	}
	ps := list[0] // the oldest, so that none ages out while others serve
	pl.ready[p.Template] = list[1:]
	pl.claimed[p.Template] = m.now()
	if ps.rootfs != rootfs {
		// The template was rebuilt since this sandbox booted.
		go m.destroyPooled(context.Background(), ps)
		return nil
	}
	return ps
}

// pooledTrust says whether pooled sandboxes boot trusting the Runtime CA,
// so that creates with secrets can claim them: with a driver that enforces
// policies itself and serves an egress proxy with a CA (Kubernetes), whose
// sandboxes get the CA through Spec.TrustPEM. A sandbox without secrets
// that trusts it gains nothing: the proxy intercepts only the hosts of a
// sandbox's own secrets.
func (m *Manager) pooledTrust() bool {
	return m.netDriver != nil && m.driverEgress != nil && m.driverEgress.ca != nil
}

// wakePool makes the pool look at its size again (after a claim or a
// destroy).
func (m *Manager) wakePool() {
	if p := m.currentPool(); p != nil {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// closePool stops the refill and destroys every unclaimed sandbox. The
// manager has no pool after it (creates start cold).
func (m *Manager) closePool() {
	m.mu.Lock()
	p := m.pool
	m.pool = nil
	m.mu.Unlock()
	if p == nil {
		return
	}
	p.cancel()
	<-p.done
	p.mu.Lock()
	var all []*pooled
	for _, list := range p.ready {
		all = append(all, list...)
	}
	p.ready = map[string][]*pooled{}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, ps := range all {
		m.destroyPooled(ctx, ps)
	}
}

// errPooledGone says a claimed pooled sandbox did not take its settings (it
// died while it waited); the create starts cold instead.
var errPooledGone = errors.New("pooled sandbox gone")

// claim turns a pooled sandbox into the create's sandbox: its environment
// goes to the agent, the driver binds it to its owner and lease (when it
// is a driver.Claimer), then the record (billed from now), the network
// policy and the lease. It fails with errPooledGone when the pooled sandbox does
// not answer, after destroying it.
func (m *Manager) claim(ctx context.Context, p CreateParams, ps *pooled, plan *netPlan) (store.Sandbox, error) {
	if err := m.reserve(); err != nil {
		m.destroyPooled(ctx, ps)
		return store.Sandbox{}, err
	}
	defer m.unreserve()
	if fg, ok := m.driver.(driver.Foregrounder); ok {
		// Before anything else, so that the claim's own calls run at the
		// weight of the sandbox it becomes.
		if err := fg.Foreground(ctx, ps.id); err != nil {
			m.log.Warn("warm pool: cannot raise a pooled sandbox's CPU weight; starting one cold", "sandbox", ps.id, "err", err)
			m.destroyPooled(ctx, ps)
			return store.Sandbox{}, errPooledGone
		}
	}
	end := m.now().UTC().Truncate(time.Millisecond).Add(time.Duration(p.TimeoutSeconds) * time.Second)
	env := p.Env
	if m.driverEgress != nil && plan != nil && len(plan.secrets) > 0 {
		// The secrets' placeholders and the CA bundle's variables (the
		// bundle holds the Runtime CA since the pooled sandbox booted).
		secretEnv, _, err := m.driverSecrets(ps.id, plan)
		if err != nil {
			m.destroyPooled(ctx, ps)
			return store.Sandbox{}, fmt.Errorf("create sandbox: %w", err)
		}
		env = maps.Clone(p.Env)
		if env == nil {
			env = map[string]string{}
		}
		for _, kv := range secretEnv {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	if err := configureVia(ctx, ps.conns, agentapi.ConfigureRequest{Env: env, LeaseEndsAt: &end}); err != nil {
		m.log.Warn("warm pool: a pooled sandbox did not answer; starting one cold", "sandbox", ps.id, "err", err)
		m.destroyPooled(ctx, ps)
		return store.Sandbox{}, errPooledGone
	}
	if c, ok := m.driver.(driver.Claimer); ok {
		if err := c.Claim(ctx, ps.id, p.KeyID, end); err != nil {
			m.log.Warn("warm pool: cannot claim a pooled sandbox; starting one cold", "sandbox", ps.id, "err", err)
			m.destroyPooled(ctx, ps)
			return store.Sandbox{}, errPooledGone
		}
	}
	if p.CPU != m.limits.DefaultCPU {
		if err := m.driver.(driver.CPUSetter).SetCPU(ctx, ps.id, p.CPU); err != nil {
			m.log.Warn("warm pool: cannot set a pooled sandbox's CPU; starting one cold", "sandbox", ps.id, "err", err)
			m.destroyPooled(ctx, ps)
			return store.Sandbox{}, errPooledGone
		}
	}
	sb := store.Sandbox{
		ID: ps.id, KeyID: p.KeyID, Template: p.Template, State: store.StateRunning,
		CPU: p.CPU, MemoryMiB: p.MemoryMiB, DiskMiB: p.DiskMiB, Env: p.Env, Metadata: p.Metadata,
		CreatedAt: end.Add(-time.Duration(p.TimeoutSeconds) * time.Second), LeaseEndsAt: end,
		Driver: m.driver.Name(), DriverState: ps.handle.State,
		OnLeaseEnd: p.OnLeaseEnd, AutoResume: *p.AutoResume, TimeoutSeconds: p.TimeoutSeconds,
		LeasePauseMode: p.PauseMode,
	}
	if err := p.hold.countedBy(func() error { return m.store.InsertSandbox(ctx, sb) }); err != nil {
		m.destroyPooled(ctx, ps)
		return store.Sandbox{}, err
	}
	if err := m.applyPooledNetwork(ctx, ps.id, plan); err != nil {
		_ = m.store.MarkStopped(context.WithoutCancel(ctx), sb.ID, EndFailed, m.now())
		m.destroyPooled(ctx, ps)
		return store.Sandbox{}, fmt.Errorf("create sandbox: %w", err)
	}
	m.meterStart(ctx, sb)
	m.adoptWith(sb.ID, ps.handle, sb.LeaseEndsAt, ps.conns)
	return sb, nil
}

// applyPooledNetwork records a claimed sandbox's network and sets its
// policy on the namespace it booted with (which allowed nothing).
func (m *Manager) applyPooledNetwork(ctx context.Context, id string, plan *netPlan) error {
	if plan == nil {
		return nil
	}
	pol, _ := json.Marshal(plan.policy)
	net := store.SandboxNetwork{Policy: pol}
	if len(plan.names) > 0 {
		net.Secrets, net.SecretOwner = plan.names, plan.owner // claimed with secrets (pooledTrust)
	}
	if err := m.store.SetSandboxNetwork(ctx, id, net); err != nil {
		return err
	}
	if plan.policy.None() {
		return nil
	}
	if m.network == nil {
		return m.netDriver.SetNetwork(ctx, id, plan.policy)
	}
	return m.network.egress.Update(ctx, id, plan.policy)
}
