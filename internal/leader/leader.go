// Package leader elects one leader among the Runtime servers that share a
// store (serve --leader-election), through a Kubernetes coordination.k8s.io
// Lease and client-go's tools/leaderelection. The server sees only the
// Elector interface: Run calls a function for each term this server leads,
// with a context that ends when the term does.
//
// # Timing
//
// A leader renews the Lease every RetryPeriod. When it has not renewed
// for RenewDeadline + RetryPeriod, counted from when its last successful
// renewal was sent, the term's context ends (client-go's own limit,
// counted from when that renewal's answer came back, is later or equal).
// Another server takes the Lease only when it has seen no renewal for
// LeaseDuration, counted from when it saw the last one, which is after the
// leader wrote it. So the old term's context ends at least
//
//	LeaseDuration - RenewDeadline - RetryPeriod
//
// (the stop margin; 3 s with the defaults 15 s, 10 s, 2 s) before anyone
// else can lead.
// The work of a term must stop within that margin once its context ends
// (the server's leader-only loops stop at their next context check: a
// sample or a boot in flight is cancelled with the context). Clocks need
// not agree across servers; only their rates matter. New (CheckTimings)
// refuses a margin under MinStopMargin.
//
// On a clean stop (Run's context ends) the leader first waits for the term
// to return and then releases the Lease, so the next server takes over
// within its RetryPeriod rather than after LeaseDuration.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Elector runs this server's candidacy for leadership.
type Elector interface {
	// Run campaigns until ctx ends. Each time this server becomes the
	// leader it calls lead with a context that ends when leadership is lost
	// or ctx ends; lead must return soon after (within the stop margin, see
	// the package doc). Terms never overlap: Run campaigns again only after
	// lead returned. Run returns nil when ctx ends, after the last term
	// returned and the Lease was released.
	Run(ctx context.Context, lead func(ctx context.Context)) error
	// Status says who leads, as this server last saw it.
	Status() Status
}

// Status is what a server knows of the election.
type Status struct {
	// Identity is this server's identity in the election.
	Identity string `json:"identity"`
	// Leader is the identity of the leader as last observed ("" before any
	// was seen or after a release).
	Leader string `json:"leader"`
	// Leading is true while this server runs a term (its leader-only work).
	Leading bool `json:"leading"`
}

// Default timings: those of Kubernetes' own controllers.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Config configures a Lease election. Zero durations take the defaults.
type Config struct {
	// Client reaches the API server. Its identity needs get, create and
	// update on leases in Namespace (coordination.k8s.io).
	Client kubernetes.Interface
	// Namespace and Name are the Lease's (created when missing).
	Namespace, Name string
	// Identity names this server in the Lease (e.g. the pod's name); two
	// servers with the same identity would both lead. Required.
	Identity string
	// LeaseDuration is how long, in whole seconds, the others wait after
	// the last renewal they saw before they take the Lease.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader tries to renew before it stops
	// leading.
	RenewDeadline time.Duration
	// RetryPeriod is the time between two tries to renew or acquire.
	RetryPeriod time.Duration
	// Log receives the transitions (nil: slog.Default()).
	Log *slog.Logger
}

// Lease is an Elector on a Kubernetes Lease.
type Lease struct {
	cfg  Config
	lock *timedLock

	mu      sync.Mutex
	leader  string
	leading bool
}

var _ Elector = (*Lease)(nil)

// ErrConfig says the configuration cannot work; the message says why.
var ErrConfig = errors.New("leader election")

// New returns a Lease elector, or ErrConfig (wrapped) when a field is
// missing or the timings leave no stop margin.
func New(cfg Config) (*Lease, error) {
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.RenewDeadline == 0 {
		cfg.RenewDeadline = DefaultRenewDeadline
	}
	if cfg.RetryPeriod == 0 {
		cfg.RetryPeriod = DefaultRetryPeriod
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	switch {
	case cfg.Client == nil:
		return nil, fmt.Errorf("%w: no Kubernetes client", ErrConfig)
	case cfg.Namespace == "" || cfg.Name == "":
		return nil, fmt.Errorf("%w: the Lease's namespace and name are required", ErrConfig)
	case cfg.Identity == "":
		return nil, fmt.Errorf("%w: an identity is required (e.g. the pod's name)", ErrConfig)
	}
	if err := CheckTimings(cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod); err != nil {
		return nil, err
	}
	return &Lease{cfg: cfg, lock: &timedLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     cfg.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}}}, nil
}

// timedLock is the Lease lock, noting when the last successful write of
// the Lease (acquisition or renewal) was sent. The API server wrote it
// after that moment, so the others' lease duration runs from a later
// time still.
type timedLock struct {
	resourcelock.Interface
	mu   sync.Mutex
	sent time.Time
}

func (t *timedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return t.noted(func() error { return t.Interface.Create(ctx, r) }, r)
}

func (t *timedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return t.noted(func() error { return t.Interface.Update(ctx, r) }, r)
}

func (t *timedLock) noted(write func() error, r resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := write()
	if err == nil && r.HolderIdentity == t.Identity() {
		t.mu.Lock()
		t.sent = sent
		t.mu.Unlock()
	}
	return err
}

func (t *timedLock) lastSent() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sent
}

// watchdog ends a term (cancel) once RenewDeadline + RetryPeriod have
// passed since the last successful renewal was sent, whatever client-go
// does: client-go counts from when the answer came back, so a slow answer
// would eat into the stop margin; this way it does not.
func (l *Lease) watchdog(ctx context.Context, cancel context.CancelFunc) {
	limit := l.cfg.RenewDeadline + l.cfg.RetryPeriod
	for {
		wait := time.Until(l.lock.lastSent().Add(limit))
		if wait <= 0 {
			l.cfg.Log.Warn("leader election: no renewal for the renew deadline and a retry period; stopping the leader-only work",
				"identity", l.cfg.Identity, "lastRenewalSent", l.lock.lastSent())
			cancel()
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// MinStopMargin is the least stop margin (see the package doc) New takes.
const MinStopMargin = 500 * time.Millisecond

// CheckTimings returns ErrConfig (wrapped, saying what to change) unless
// the lease duration is whole seconds, the renew deadline more than
// leaderelection.JitterFactor (1.2) retry periods, and lease - renew -
// retry at least MinStopMargin.
func CheckTimings(lease, renew, retry time.Duration) error {
	switch {
	case lease%time.Second != 0:
		return fmt.Errorf("%w: the lease duration %s is not whole seconds (the Lease stores seconds)", ErrConfig, lease)
	case retry <= 0 || float64(renew) <= leaderelection.JitterFactor*float64(retry):
		return fmt.Errorf("%w: the renew deadline %s must be more than %g × the retry period %s", ErrConfig,
			renew, leaderelection.JitterFactor, retry)
	case lease-renew-retry < MinStopMargin:
		return fmt.Errorf("%w: lease duration %s - renew deadline %s - retry period %s leaves less than %s for the old leader to stop before a new one may start; lengthen the lease duration",
			ErrConfig, lease, renew, retry, MinStopMargin)
	}
	return nil
}

// StopMargin is LeaseDuration - RenewDeadline - RetryPeriod: how long
// before another server may lead the old leader's term has ended.
func (l *Lease) StopMargin() time.Duration {
	return l.cfg.LeaseDuration - l.cfg.RenewDeadline - l.cfg.RetryPeriod
}

// Status says who leads, as last observed.
func (l *Lease) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Status{Identity: l.cfg.Identity, Leader: l.leader, Leading: l.leading}
}

// Run campaigns until ctx ends (see Elector).
func (l *Lease) Run(ctx context.Context, lead func(ctx context.Context)) error {
	for ctx.Err() == nil {
		led, err := l.term(ctx, lead)
		if err != nil {
			return err
		}
		if led && ctx.Err() != nil {
			l.release()
		}
	}
	return nil
}

// term campaigns once: it returns when a term ended (led) or ctx ended,
// after lead returned.
func (l *Lease) term(ctx context.Context, lead func(ctx context.Context)) (led bool, err error) {
	var mu sync.Mutex
	over := false
	var running sync.WaitGroup
	// The watchdog ends client-go's Run too, so that a term it ended is
	// never followed by renewals without a term (no leader work anywhere).
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          l.lock,
		LeaseDuration: l.cfg.LeaseDuration,
		RenewDeadline: l.cfg.RenewDeadline,
		RetryPeriod:   l.cfg.RetryPeriod,
		Name:          l.cfg.Namespace + "/" + l.cfg.Name,
		// Released by Run once the term's work has stopped, never before.
		ReleaseOnCancel: false,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(tctx context.Context) {
				mu.Lock()
				if over || tctx.Err() != nil {
					mu.Unlock()
					return
				}
				running.Add(1)
				led = true
				mu.Unlock()
				defer running.Done()
				tctx, cancel := context.WithCancel(tctx)
				defer cancel()
				go l.watchdog(tctx, func() { cancel(); stopRun() })
				l.setLeading(true)
				l.cfg.Log.Info("leader election: leading", "lease", l.cfg.Namespace+"/"+l.cfg.Name, "identity", l.cfg.Identity)
				lead(tctx)
				l.setLeading(false)
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				l.mu.Lock()
				l.leader = id
				l.mu.Unlock()
				if id != l.cfg.Identity {
					l.cfg.Log.Info("leader election: another server leads", "leader", id, "identity", l.cfg.Identity)
				}
			},
		},
	})
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	le.Run(runCtx)
	mu.Lock()
	over = true
	mu.Unlock()
	running.Wait()
	if led && ctx.Err() == nil {
		l.cfg.Log.Warn("leader election: lost the lease; the leader-only work has stopped", "identity", l.cfg.Identity)
	}
	return led, nil
}

func (l *Lease) setLeading(v bool) {
	l.mu.Lock()
	l.leading = v
	if v {
		l.leader = l.cfg.Identity
	}
	l.mu.Unlock()
}

// release gives up the Lease if this server still holds it, so that the
// next leader need not wait LeaseDuration (the term's work has stopped).
func (l *Lease) release() {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.RenewDeadline)
	defer cancel()
	for {
		rec, _, err := l.lock.Get(ctx)
		if err != nil || rec.HolderIdentity != l.cfg.Identity {
			return
		}
		now := metav1.NewTime(time.Now())
		err = l.lock.Update(ctx, resourcelock.LeaderElectionRecord{
			LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now})
		if !apierrors.IsConflict(err) {
			if err != nil {
				l.cfg.Log.Warn("leader election: could not release the lease; the next leader waits for it to expire", "err", err)
			} else {
				l.mu.Lock()
				l.leader = ""
				l.mu.Unlock()
			}
			return
		}
	}
}
