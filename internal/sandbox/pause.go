package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/egress"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// Pause and resume. A paused sandbox is saved whole — memory, processes,
// files — by the driver (driver.Pauser) and runs nothing: it holds no
// CPU, no memory and no network on the host, only its image on disk, which
// metering bills at the storage price, and its slot of MaxSandboxes. A
// pause is admitted against its key's quotas and the host's free disk
// first (quota.go), before anything of it is written or interrupted. Its record says
// "paused" from the moment the image is complete (the driver's commit), so
// a server killed at any point of a pause or resume leaves the sandbox
// running or paused, as the store says (Recover finishes the job).
//
// Pause, resume and stop of one sandbox are serialised (lockSandbox); a
// request to a paused sandbox waits for a pause or resume under way, then
// resumes it first when it was created with autoResume, and is otherwise
// refused with errs.Paused. Requests in flight when a pause starts end with
// errs.Paused (their commands are killed, as when a client goes away);
// background processes are saved and run on after the resume.

// EndRetention is the end reason of a paused sandbox destroyed because it
// stayed paused longer than the server's paused retention.
const EndRetention = "retention"

// DefaultPausedRetention is how long a paused sandbox is kept.
const DefaultPausedRetention = 7 * 24 * time.Hour

// errPausedInFlight is the cause given to requests in flight at a pause.
var errPausedInFlight = errors.New("the sandbox was paused while the request ran")

// sandboxLocks serialise pause, resume and stop per sandbox.
type sandboxLocks struct {
	mu    sync.Mutex
	locks map[string]*sandboxLock
}

type sandboxLock struct {
	mu   sync.Mutex
	refs int
}

// lockSandbox takes sandbox id's lock and returns its release.
func (m *Manager) lockSandbox(id string) func() {
	sl := &m.sbLocks
	sl.mu.Lock()
	if sl.locks == nil {
		sl.locks = map[string]*sandboxLock{}
	}
	l := sl.locks[id]
	if l == nil {
		l = &sandboxLock{}
		sl.locks[id] = l
	}
	l.refs++
	sl.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		sl.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(sl.locks, id)
		}
		sl.mu.Unlock()
	}
}

func (m *Manager) pauser() (driver.Pauser, error) {
	p, ok := m.driver.(driver.Pauser)
	if !ok {
		return nil, errs.New(errs.Invalid, "this server's driver (%s) cannot pause sandboxes", m.driver.Name())
	}
	return p, nil
}

// Pause saves a running sandbox and stops it: it is "paused" until it is
// resumed, or destroyed when the paused retention ends. mode is
// store.PauseFull ("" means it) or store.PauseFilesystem. Errors:
// errs.Invalid for another mode, errs.NotImplemented for a filesystem pause
// on a driver without one, errs.Conflict when it is already paused or still
// starting, or holds what cannot be saved (a files-only pause of a layer
// whose archive would pass its disk size: a sparse file),
// errs.NoSpace when the host's disk has no room for its image beside the
// reserve, errs.DiskQuota and errs.Quota when its key is at its disk or
// paused sandboxes quota (it runs on, untouched, in each case),
// errs.LeaseEnded / errs.Stopped / errs.NotFound as Running.
func (m *Manager) Pause(ctx context.Context, id, mode string) (store.Sandbox, error) {
	unlock := m.lockSandbox(id)
	defer unlock()
	return m.pauseLocked(ctx, id, mode)
}

func (m *Manager) pauseLocked(ctx context.Context, id, mode string) (store.Sandbox, error) {
	p, err := m.pauser()
	if err != nil {
		return store.Sandbox{}, err
	}
	if mode, err = m.checkPauseMode(mode, store.PauseFull); err != nil {
		return store.Sandbox{}, err
	}
	save := func(ctx context.Context, id string, state []byte, commit func(driver.Image) error) error {
		return p.Pause(ctx, id, state, commit)
	}
	if mode == store.PauseFilesystem {
		save = m.driver.(driver.FilePauser).PauseFiles // checkPauseMode checked
	}
	sb, err := m.Get(ctx, id)
	if err != nil {
		return sb, err
	}
	if sb.State == store.StatePaused {
		return sb, errs.New(errs.Conflict, "sandbox %s is already paused (since %s); resume it with POST /v1/sandboxes/%s/resume",
			id, fmtTime(sb.PausedAt), id)
	}
	if sb, err = m.Running(ctx, id); err != nil {
		return sb, err
	}
	ls, err := m.attached(ctx, sb) // another server may have started it
	if err != nil {
		return sb, err
	}
	hold, err := m.admitPause(ctx, sb, mode)
	if err != nil {
		return sb, err
	}
	defer hold.release()
	// The driver stops the sandbox once it is saved: no watcher may take
	// that for a crash, no lease timer may stop it meanwhile.
	ls.stopWatching()
	ls.lease.Stop()
	ls.interrupt(errPausedInFlight)
	ls.transport.CloseIdleConnections()
	ctx = context.WithoutCancel(ctx) // a pause is finished or undone, never left half-way
	var pausedAt time.Time
	err = save(ctx, id, sb.DriverState, func(img driver.Image) error {
		m.meterSample(ctx, id) // the last running interval, up to the save
		pausedAt = m.now().UTC().Truncate(time.Millisecond)
		return hold.countedBy(func() error { return m.store.MarkPaused(ctx, id, pausedAt, img.Bytes, mode) })
	})
	if err != nil {
		m.pauseFailed(id, ls, sb.LeaseEndsAt)
		switch {
		case errors.Is(err, driver.ErrNoSpace):
			return sb, errs.New(errs.NoSpace, "sandbox %s could not be paused: %v; it runs on", id, err)
		case errors.Is(err, driver.ErrNotSavable):
			return sb, errs.New(errs.Conflict, "sandbox %s could not be paused: %v; it runs on", id, err)
		}
		return sb, fmt.Errorf("sandbox %s could not be paused (it runs on): %w", id, err)
	}
	m.mu.Lock()
	if m.live[id] == ls {
		delete(m.live, id)
	}
	m.armRetentionLocked(id, pausedAt)
	m.mu.Unlock()
	ls.release()
	ls.markGone()
	m.detachNetwork(ctx, id)
	m.log.Info("paused", "sandbox", id, "mode", mode)
	m.wakePool() // its CPU is free
	return m.Get(ctx, id)
}

// pauseFailed puts a sandbox whose pause failed back as it was: requests
// go through, its lease and watcher run again.
func (m *Manager) pauseFailed(id string, ls *liveSandbox, leaseEnd time.Time) {
	ls.reopen()
	ls.lease.Reset(leaseEnd.Sub(m.now()))
	if w, ok := m.driver.(driver.Watcher); ok {
		m.mu.Lock()
		if !m.closed && m.live[id] == ls {
			ctx, cancel := context.WithCancel(context.Background())
			ls.stopWatch = cancel
			go m.watch(ctx, w, id, ls)
		}
		m.mu.Unlock()
	}
}

// Resume boots a paused sandbox from its image, with a lease of
// timeoutSeconds (0: the lease it was last given), its network policy and
// secrets' placeholders as before, and its CPU and memory limits. It needs
// no slot of MaxSandboxes and passes no quota (it holds its slot while
// paused, and frees its image). A sandbox paused with its files alone
// boots fresh (see the note above). Errors: errs.Conflict when it is not
// paused and errs.SpendingLimit when its key's daily limit is reached (it
// stays paused); a resume that fails in the driver destroys the sandbox
// (errs.Stopped, end reason failed).
func (m *Manager) Resume(ctx context.Context, id string, timeoutSeconds int64) (store.Sandbox, error) {
	unlock := m.lockSandbox(id)
	defer unlock()
	return m.resumeLocked(ctx, id, timeoutSeconds)
}

func (m *Manager) resumeLocked(ctx context.Context, id string, timeoutSeconds int64) (store.Sandbox, error) {
	p, err := m.pauser()
	if err != nil {
		return store.Sandbox{}, err
	}
	sb, err := m.Get(ctx, id)
	if err != nil {
		return sb, err
	}
	if sb.State == store.StateRunning {
		return sb, errs.New(errs.Conflict, "sandbox %s is running; only a paused sandbox can be resumed", id)
	}
	if sb.State != store.StatePaused {
		_, err := m.Running(ctx, id)
		return sb, err
	}
	seconds, err := m.leaseSeconds(timeoutSeconds, sb.TimeoutSeconds)
	if err != nil {
		return sb, err
	}
	m.reserveResume()
	defer m.unreserveResume()
	if err := m.checkSpending(ctx, sb.KeyID); err != nil {
		return sb, err
	}
	ctx = context.WithoutCancel(ctx)
	netSpec, err := m.resumeNetwork(ctx, id)
	if err != nil {
		m.detachNetwork(ctx, id)
		return sb, fmt.Errorf("sandbox %s could not be resumed (it stays paused): %w", id, err)
	}
	var end time.Time
	h, err := p.Resume(ctx, id, sb.DriverState, netSpec, func(h *driver.Handle) error {
		end = m.now().UTC().Truncate(time.Millisecond).Add(time.Duration(seconds) * time.Second)
		conf := agentapi.ConfigureRequest{LeaseEndsAt: &end}
		if sb.PauseMode == store.PauseFilesystem {
			conf.Env = sb.Env // a new agent: what a claim or a restore gave the old one
		}
		if err := configureAgent(ctx, h, conf); err != nil {
			return fmt.Errorf("the restored agent did not take its lease: %w", err)
		}
		if cs, ok := m.driver.(driver.CPUSetter); ok {
			if err := cs.SetCPU(ctx, id, sb.CPU); err != nil {
				return err
			}
		}
		m.meterSample(ctx, id) // the paused interval, up to now
		return m.store.MarkResumed(ctx, id, end, h.State, m.cpuMarkNow(ctx, id))
	})
	if err != nil {
		m.log.Error("resume failed; destroying the sandbox", "sandbox", id, "err", err)
		m.dropRetention(id)
		if serr := m.stopHeld(ctx, id, EndFailed); serr != nil {
			m.log.Error("destroy after a failed resume", "sandbox", id, "err", serr)
		}
		return sb, errs.New(errs.Stopped, "sandbox %s could not be resumed (%v) and was destroyed; create a new sandbox", id, err)
	}
	m.adopt(id, h, end) // before it leaves paused: its slot is never free meanwhile
	m.dropRetention(id)
	m.log.Info("resumed", "sandbox", id, "leaseEndsAt", end)
	return m.Get(ctx, id)
}

// leaseSeconds is the lease of a resume: asked, else the sandbox's last,
// else the server's default; within the server's maximum.
func (m *Manager) leaseSeconds(asked, last int64) (int64, error) {
	s := asked
	if s == 0 {
		s = last
	}
	if s == 0 {
		s = int64(m.limits.DefaultTimeout / time.Second)
	}
	if s < 1 || s > int64(m.limits.MaxTimeout/time.Second) {
		return 0, errs.New(errs.Invalid, "timeoutSeconds must be between 1 and %d; got %d", int64(m.limits.MaxTimeout/time.Second), s)
	}
	return s, nil
}

// resumeNetwork attaches a paused sandbox's network again (a namespace of
// its own, the policy in its record) and binds its secrets (same owner,
// same placeholders, their current values). nil when it has none.
func (m *Manager) resumeNetwork(ctx context.Context, id string) (*driver.Network, error) {
	if m.network == nil {
		return nil, nil
	}
	rec, err := m.store.GetSandboxNetwork(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil // created without a network
	}
	if err != nil {
		return nil, err
	}
	var pol egress.Policy
	if err := json.Unmarshal(rec.Policy, &pol); err != nil {
		return nil, fmt.Errorf("network policy of %s: %w", id, err)
	}
	att, err := m.network.egress.Attach(ctx, id, pol)
	if err != nil {
		return nil, err
	}
	if len(rec.Secrets) > 0 {
		m.bindSecrets(ctx, id, rec)
	}
	return &driver.Network{NetnsPath: att.NetnsPath, ResolvConf: att.ResolvConf}, nil
}

// usable returns the record of a sandbox that requests may use: running,
// or resumed first when it is paused with autoResume. It waits for a pause
// or resume of the sandbox under way. Errors as Running, and errs.Paused
// for a paused sandbox without autoResume.
func (m *Manager) usable(ctx context.Context, id string) (store.Sandbox, error) {
	unlock := m.lockSandbox(id)
	defer unlock()
	sb, err := m.Get(ctx, id)
	if err != nil {
		return sb, err
	}
	switch {
	case sb.State == store.StatePaused && sb.AutoResume:
		if _, err := m.resumeLocked(ctx, id, 0); err != nil {
			return sb, err
		}
	case sb.State == store.StateRunning:
		return sb, nil
	}
	return m.Running(ctx, id)
}

// armRetentionLocked arms the timer that destroys a paused sandbox when
// the paused retention ends. m.mu is held.
func (m *Manager) armRetentionLocked(id string, pausedAt time.Time) {
	if m.paused == nil {
		m.paused = map[string]*time.Timer{}
	}
	if t := m.paused[id]; t != nil {
		t.Stop()
	}
	m.paused[id] = time.AfterFunc(pausedAt.Add(m.retention()).Sub(m.now()), func() { m.retentionEnded(id) })
}

// dropRetention stops a sandbox's retention timer (resumed or stopped).
func (m *Manager) dropRetention(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.paused[id]; t != nil {
		t.Stop()
		delete(m.paused, id)
	}
}

func (m *Manager) retention() time.Duration {
	if m.limits.PausedRetention > 0 {
		return m.limits.PausedRetention
	}
	return DefaultPausedRetention
}

// retentionEnded is a paused sandbox's retention timer: it destroys the
// sandbox when this server does the leader-only work (always without
// GateLeaderWork); otherwise the leader's sweep does.
func (m *Manager) retentionEnded(id string) {
	if parent, ok := m.leaderContext(); ok {
		m.endRetention(parent, id)
	}
}

// endRetention destroys sandbox id if it is still paused, under parent.
func (m *Manager) endRetention(parent context.Context, id string) {
	m.background(func() {
		ctx, cancel := context.WithTimeout(parent, time.Minute)
		defer cancel()
		sb, err := m.store.GetSandbox(ctx, id)
		if err != nil || sb.State != store.StatePaused {
			return
		}
		m.log.Info("paused retention ended; destroying", "sandbox", id)
		if err := m.stop(ctx, id, EndRetention); err != nil {
			m.log.Error("destroy at the end of the paused retention", "sandbox", id, "err", err)
		}
	})
}

// recoverPaused settles a paused record after a restart: destroyed when
// its retention ended while no server ran; otherwise nothing of it may run
// (a pause or resume a dead server left) and its image must exist.
func (m *Manager) recoverPaused(ctx context.Context, sb store.Sandbox) {
	until := m.retention()
	if sb.PausedAt != nil && !sb.PausedAt.Add(until).After(m.now()) {
		m.log.Info("paused retention ended while the server was down", "sandbox", sb.ID)
		if err := m.stopAt(ctx, sb.ID, EndRetention, sb.PausedAt.Add(until)); err != nil {
			m.log.Error("destroy at the end of the paused retention", "sandbox", sb.ID, "err", err)
		}
		return
	}
	p, err := m.pauser()
	if err == nil {
		_, err = p.RecoverPaused(ctx, sb.ID)
	}
	if err != nil {
		m.log.Warn("paused sandbox lost while the server was down", "sandbox", sb.ID, "err", err)
		_ = m.stop(ctx, sb.ID, EndFailed)
		return
	}
	at := m.now()
	if sb.PausedAt != nil {
		at = *sb.PausedAt
	}
	m.mu.Lock()
	m.armRetentionLocked(sb.ID, at)
	m.mu.Unlock()
}

// interrupt ends the requests in flight to the sandbox with cause, and
// every request until reopen.
func (ls *liveSandbox) interrupt(cause error) {
	ls.reqMu.Lock()
	defer ls.reqMu.Unlock()
	ls.cancelReqs(cause)
}

// reopen lets requests through again after interrupt.
func (ls *liveSandbox) reopen() {
	ls.reqMu.Lock()
	defer ls.reqMu.Unlock()
	ls.reqCtx, ls.cancelReqs = context.WithCancelCause(context.Background())
}

// requests is the context that every request to the sandbox is bound to.
func (ls *liveSandbox) requests() context.Context {
	ls.reqMu.Lock()
	defer ls.reqMu.Unlock()
	return ls.reqCtx
}

func (ls *liveSandbox) stopWatching() {
	if ls.stopWatch != nil {
		ls.stopWatch()
	}
}
