// Package server wires a Runtime server together — store, driver, sandbox
// manager, API — for `withruntime serve`, for the CLI's embedded server and
// for tests. It holds no logic of its own beyond start-up order and checks.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/auth"
	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/driver/gvisor"
	"withruntime.dev/runtime/internal/leader"
	"withruntime.dev/runtime/internal/metrics"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/internal/template"
	"withruntime.dev/runtime/internal/template/image"
)

// LocalKeyFile is the file under the data directory that holds the key the
// server creates on first start, which the CLI on the same host uses.
const LocalKeyFile = "local.key"

// Config configures a server. Zero values take the defaults noted.
type Config struct {
	// DataDir holds the database, sandbox state and (by default) templates.
	DataDir string
	// Store is where the server keeps its records (see store.Open): a
	// postgres:// or postgresql:// URL (several servers may share one
	// database), or a SQLite file path (default DataDir/runtime.db). Any
	// other URL is refused.
	Store string
	// TemplatesDir holds templates (default DataDir/templates).
	TemplatesDir string
	// Runsc is the runsc binary (default: WITHRUNTIME_RUNSC, then PATH).
	Runsc string
	// Agent is the withruntime-agent binary (default: WITHRUNTIME_AGENT,
	// then beside this executable, then PATH).
	Agent string
	// Limits bound what a create may ask for (default sandbox.DefaultLimits).
	Limits *sandbox.Limits
	// DiskMedium backs sandboxes' root filesystem writes: gvisor.DiskFile
	// (default: a file in the sandbox's directory) or gvisor.DiskMemory.
	DiskMedium string
	// MaxUploadBytes caps one file upload (default api.DefaultMaxUploadBytes).
	MaxUploadBytes int64
	// Images configures templates made from images (default: an 8 GiB cap,
	// registry credentials from the docker config).
	Images image.Options
	Log    *slog.Logger
	// Egress configures sandbox networks (see EgressConfig).
	Egress EgressConfig
	// Pool configures the warm pool (zero value: none).
	Pool sandbox.PoolConfig
	// NoWarmImages turns warm templates' images off (sandbox.Manager.
	// SetWarmImages): every create of a warm template starts it in place.
	NoWarmImages bool
	// Metering configures the usage sampler and prices (zero value: every
	// 5 s at the reference prices; a negative Interval turns it off).
	Metering sandbox.MeterConfig
	// SecretsKeyFile is the key that seals secret values in the database
	// (default: WITHRUNTIME_SECRETS_KEY_FILE, then DataDir/secrets.key;
	// created 0600 at first start; see atrest.go).
	SecretsKeyFile string
	// RotateSecretsKey makes a new secrets key at start and re-seals every
	// secret value with it before serving.
	RotateSecretsKey bool
	// DiscardUnreadableSecrets deletes, at start, secrets sealed with a key
	// the server does not have, instead of refusing to start.
	DiscardUnreadableSecrets bool
	// Login configures device login and the dashboard (handler.go).
	Login LoginConfig
	// Driver, when set, runs the sandboxes instead of the gVisor driver on
	// this host (e.g. the Kubernetes driver: serve --driver kubernetes);
	// Runsc and Agent are then not needed. Close closes it when it is a
	// driver.Closer.
	Driver driver.Driver
	// SandboxTemplates, when set, is where the sandbox manager finds
	// templates instead of the store in TemplatesDir (serve --driver
	// kubernetes: a registry.Catalog, templates as images in a registry,
	// no root filesystem on this host). The template API still serves the
	// store in TemplatesDir.
	SandboxTemplates sandbox.Templates
	// Elector, when set, makes this server one of several that share a
	// store (serve --leader-election): the leader-only work — lease and
	// paused-retention ends, the warm pool, the metering sampler and
	// spending limits (sandbox.Manager.Lead) — runs only while it leads, and
	// every server serves the API. nil (the default, one server): the
	// server does all of it from the start, as ever.
	Elector leader.Elector
	// OrphanGrace, with Elector, is how old a record still "starting", or a
	// sandbox the driver runs with no record, must be before the leader
	// takes it for a dead server's leftover and destroys it (0:
	// sandbox.DefaultOrphanGrace, 10 minutes). It must exceed the longest
	// create (sandbox.Manager.SetReconcile).
	OrphanGrace time.Duration
}

// Server is a running Runtime server.
type Server struct {
	Manager   *sandbox.Manager
	Store     *store.Store
	Templates *template.Store
	// Handler serves the API, the dashboard and /metrics (handler.go).
	Handler http.Handler
	// Metrics are the server's Prometheus metrics; Metrics.Handler serves
	// them without authentication (serve --metrics-listen).
	Metrics *metrics.Metrics
	// LocalKey is the secret of the key in DataDir/local.key.
	LocalKey string
	log      *slog.Logger
	api      *api.Server // the API handler, for the E2B facade
	egress   egressCloser
	lock     *os.File // the data directory's lock (lock.go), held until Close
	// stopElect ends the leader election and waits until its last term
	// stopped and the Lease was released (nil: no election).
	stopElect func()
	names     []*os.File // the host-wide locks on its egress names (lock.go)
	dataDir   string
}

// ErrNotRoot says the server was started without root, which runsc needs.
var ErrNotRoot = errors.New("the Runtime server must run as root: gVisor's runsc needs root to create sandboxes (namespaces, cgroups, mounts); run it with sudo")

// Open starts a server: it checks privileges, opens and migrates the
// store, starts the driver, and adopts or cleans up the sandboxes a previous
// run left (see sandbox.Manager.Recover).
func Open(ctx context.Context, cfg Config) (*Server, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if cfg.TemplatesDir == "" {
		cfg.TemplatesDir = filepath.Join(cfg.DataDir, "templates")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if err := restrictDataDir(cfg.DataDir); err != nil {
		lock.Close()
		return nil, err
	}
	if _, ok := cfg.Driver.(driver.Networker); ok {
		// The driver restricts its sandboxes' network itself (Kubernetes:
		// NetworkPolicy objects): no network namespaces, nftables rules or
		// egress proxy on this host, and no host-wide egress names to lock.
		cfg.Egress.Disabled = true
	}
	EgressNames(&cfg.Egress, cfg.DataDir)
	names, err := lockNames(cfg.Egress, cfg.DataDir)
	if err != nil {
		lock.Close()
		return nil, err
	}
	srv, err := open(ctx, cfg)
	if err != nil {
		closeAll(names)
		lock.Close()
		return nil, err
	}
	srv.lock, srv.names, srv.dataDir = lock, names, cfg.DataDir
	return srv, nil
}

// open is Open once the data directory is locked.
func open(ctx context.Context, cfg Config) (*Server, error) {
	drv := cfg.Driver
	if drv == nil {
		runsc, err := findBinary(cfg.Runsc, "WITHRUNTIME_RUNSC", "runsc")
		if err != nil {
			return nil, err
		}
		agent, err := findBinary(cfg.Agent, "WITHRUNTIME_AGENT", "withruntime-agent")
		if err != nil {
			return nil, err
		}
		if drv, err = gvisor.New(gvisor.Config{Runsc: runsc, AgentBinary: agent,
			StateDir: filepath.Join(cfg.DataDir, "gvisor"), DiskMedium: cfg.DiskMedium,
			ExtraFlags: strings.Fields(os.Getenv("WITHRUNTIME_RUNSC_FLAGS"))}); err != nil {
			return nil, err
		}
	}
	st, err := openConfiguredStore(ctx, cfg)
	if err != nil {
		// An unreachable database is an ordinary start failure: release
		// what the driver holds (the gVisor driver's mounts).
		if c, ok := drv.(driver.Closer); ok {
			c.Close() //nolint:errcheck // the store's error is the one to report
		}
		return nil, err
	}
	if err := openSecretsKey(ctx, st, secretsKeyOptions{path: secretsKeyPath(cfg),
		rotate: cfg.RotateSecretsKey, discard: cfg.DiscardUnreadableSecrets}, cfg.Log); err != nil {
		st.Close()
		return nil, err
	}
	limits := sandbox.DefaultLimits()
	if cfg.Limits != nil {
		limits = *cfg.Limits
	}
	tpl := &template.Store{Dir: cfg.TemplatesDir}
	var sbTemplates sandbox.Templates = tpl
	if cfg.SandboxTemplates != nil {
		sbTemplates = cfg.SandboxTemplates
	}
	mgr := sandbox.New(drv, st, sbTemplates, limits, cfg.Log)
	src := metrics.Sources{SandboxStates: st.CountSandboxesByState, Pool: mgr.PoolStatus}
	if cfg.Elector != nil {
		mgr.GateLeaderWork(0)
		mgr.SetReconcile(0, cfg.OrphanGrace)
		src.Leader = func() (string, bool) { return cfg.Elector.Status().Identity, mgr.Leading() }
	}
	met := metrics.New(src, cfg.Log)
	mgr.SetObserver(met)
	eg, err := openEgress(cfg, mgr, met.Egress, sandboxKey(st), egressLimits(met.Registry()))
	if err != nil {
		st.Close()
		return nil, err
	}
	if cfg.Metering.Prices != nil {
		if err := cfg.Metering.Prices.Validate(); err != nil {
			_ = eg.Close()
			st.Close()
			return nil, err
		}
	}
	mgr.StartMetering(cfg.Metering)
	mgr.StartSnapshotExpiry()
	mgr.SetWarmImages(!cfg.NoWarmImages)
	if err := mgr.Recover(ctx); err != nil {
		eg.Close()
		st.Close()
		return nil, err
	}
	mgr.StartPool(cfg.Pool)
	mgr.StartFairShare(0)
	key, err := localKey(ctx, st, cfg.DataDir)
	if err != nil {
		mgr.Close()
		eg.Close()
		st.Close()
		return nil, err
	}
	srv := &Server{Manager: mgr, Store: st, Templates: tpl, Metrics: met, LocalKey: key, log: cfg.Log, egress: eg}
	if srv.Handler, err = srv.handler(cfg, limits); err != nil {
		mgr.Close()
		eg.Close()
		st.Close()
		return nil, err
	}
	if cfg.Elector != nil {
		srv.stopElect = elect(cfg.Elector, mgr, cfg.Log)
	}
	return srv, nil
}

// elect campaigns with el until the returned function is called, running
// the manager's leader-only work during each term; the function returns
// once the last term has stopped and the Lease is released.
func elect(el leader.Elector, mgr *sandbox.Manager, log *slog.Logger) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := el.Run(ctx, mgr.Lead); err != nil {
			log.Error("leader election stopped: this server will not lead", "err", err)
		}
	}()
	return func() { cancel(); <-done }
}

// Serve serves the API on l until ctx ends, then shuts down gracefully.
// Sandboxes keep running; the next server adopts them. Idle connections
// are closed and concurrent ones capped (serve.go), so that no client can
// take the file descriptors the server needs to run sandboxes.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	hs := &http.Server{Handler: s.Handler, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: idleTimeout,
		MaxHeaderBytes: MaxHeaderBytes}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(limitListener(l)) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(shutdown)
	return nil
}

// Close stops lease timers and closes the store.
func (s *Server) Close() error {
	if s.stopElect != nil {
		s.stopElect() // the leader-only work stops before the store closes
	}
	s.Manager.Close()
	// Running sandboxes keep their namespaces for the next server to adopt.
	s.egress.Close()
	err := s.Store.Close()
	// The holder file stays: it names a process that no longer holds the
	// lock, which readers check.
	closeAll(s.names)
	s.lock.Close()
	return err
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// localKey returns the local key's secret, creating the key and its file on
// first start. The file is readable by root only.
func localKey(ctx context.Context, st *store.Store, dataDir string) (string, error) {
	path := filepath.Join(dataDir, LocalKeyFile)
	if b, err := os.ReadFile(path); err == nil {
		token := strings.TrimSpace(string(b))
		if _, err := auth.Authenticate(ctx, st, token); err == nil {
			return token, nil
		}
	}
	_, token, err := auth.NewKey(ctx, st, "local", 0)
	if err != nil {
		return "", err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("local key: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("local key: %w", err)
	}
	return token, nil
}

// findBinary resolves a helper binary: the configured path, then the
// environment variable, then beside this executable, then PATH.
func findBinary(configured, envVar, name string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	if p := os.Getenv(envVar); p != "" {
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found: set %s or install it with scripts/install.sh", name, envVar)
}

// StorePath is the default store: the SQLite file under dataDir.
func StorePath(dataDir string) string { return filepath.Join(dataDir, "runtime.db") }

// openConfiguredStore opens cfg.Store (default StorePath(cfg.DataDir)).
func openConfiguredStore(ctx context.Context, cfg Config) (*store.Store, error) {
	dsn := cfg.Store
	if dsn == "" {
		dsn = StorePath(cfg.DataDir)
	}
	if strings.Contains(dsn, "://") && !store.IsPostgresURL(dsn) {
		scheme, _, _ := strings.Cut(dsn, "://")
		return nil, fmt.Errorf("store %s: %s:// is not a database Runtime speaks; give a postgres://USER:PASSWORD@HOST:5432/DATABASE URL or the path of a SQLite file", store.Redact(dsn), scheme)
	}
	st, err := store.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if st.Postgres() {
		cfg.Log.Info("store: PostgreSQL", "url", store.Redact(dsn))
	}
	return st, nil
}
