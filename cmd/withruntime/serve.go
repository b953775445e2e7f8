package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/leader"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/server"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/internal/template/image"
	"withruntime.dev/runtime/internal/version"
)

// storeEnv is the environment variable that gives --store its default (a
// URL with a password is better there than on the command line, which
// other users of the host can read in the process list).
const storeEnv = "WITHRUNTIME_STORE"

func newServeCmd() *cobra.Command {
	var listen, data, templates, storeDSN string
	var maxUpload, imageMaxBytes int64
	var noBuild bool
	var meter func() sandbox.MeterConfig
	var pool sandbox.PoolConfig
	var warmImages bool
	var maxSandboxes int
	var pausedRetention, snapshotRetention time.Duration
	var quotas func(*sandbox.Limits) error
	var sandboxCAs []string
	var egressShares server.EgressConfig
	var secretsKey string
	var rotateKey, discardSecrets bool
	var metricsListen, e2bListen string
	var e2bOpts server.E2BOptions
	var e2bCert, e2bKey string
	var login server.LoginConfig
	var newDriver func(context.Context) (driver.Driver, string, sandbox.Templates, error)
	var newElector func(*slog.Logger) (leader.Elector, error)
	var orphanGrace time.Duration
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the Runtime API server (needs root)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if login.TrialHours < 0 {
				return fmt.Errorf("--trial-hours must be 0 (no trials) or more; got %g", login.TrialHours)
			}
			if maxSandboxes < 0 || pool.Size < 0 {
				return fmt.Errorf("--max-sandboxes and --pool-size must be 0 or more (0: no limit, no pool)")
			}
			if !cmd.Flags().Changed("pool-max") {
				pool.Max = max(pool.Max, pool.Size)
			}
			if pool.NetworkSlots < 0 {
				return fmt.Errorf("--network-slots must be 0 (none) or more; got %d", pool.NetworkSlots)
			}
			if pool.Max < pool.Size {
				return fmt.Errorf("--pool-max (%d) must be at least --pool-size (%d): the pool grows from --pool-size up to --pool-max under bursts", pool.Max, pool.Size)
			}
			if pausedRetention <= 0 {
				return fmt.Errorf("--paused-retention must be positive (e.g. 168h); got %s", pausedRetention)
			}
			if snapshotRetention < 0 {
				return fmt.Errorf("--snapshot-retention must be 0 (keep snapshots until deleted) or positive (e.g. 720h); got %s", snapshotRetention)
			}
			lim := limits(maxSandboxes, pausedRetention)
			lim.SnapshotRetention = snapshotRetention
			if err := quotas(lim); err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			log.Info("withruntime serve", "version", version.Get().String())
			if storeDSN == "" { // not the flag's default: --help would show the password
				storeDSN = os.Getenv(storeEnv)
			}
			el, err := newElector(log)
			if err != nil {
				return err
			}
			drv, podProxyListen, sbTemplates, err := newDriver(ctx)
			if err != nil {
				return err
			}
			srv, err := server.Open(ctx, server.Config{Driver: drv, SandboxTemplates: sbTemplates, Elector: el, OrphanGrace: orphanGrace, DataDir: data, Store: storeDSN, TemplatesDir: templates, MaxUploadBytes: maxUpload, Log: log, Metering: meter(), Pool: pool, NoWarmImages: !warmImages, Limits: lim,
				Egress: server.EgressConfig{SandboxCAs: sandboxCAs, PodProxyListen: podProxyListen,
					MaxProxyConns: egressShares.MaxProxyConns, ProxyConnsPerKey: egressShares.ProxyConnsPerKey,
					ProxyConnsPerSandbox: egressShares.ProxyConnsPerSandbox, DNSRate: egressShares.DNSRate},
				SecretsKeyFile: secretsKey, RotateSecretsKey: rotateKey, DiscardUnreadableSecrets: discardSecrets,

				Images: image.Options{Limits: image.Limits{MaxBytes: imageMaxBytes}},

				Login: login})
			if err != nil {
				return err
			}
			defer srv.Close()
			if !noBuild && sbTemplates == nil { // a registry's templates are pushed, not built here
				if _, err := srv.Templates.Ensure(ctx, "base", printProgress); err != nil {
					return fmt.Errorf("template base: %w", err)
				}
			}
			l, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			// CLI commands on this data directory use this server.
			if err := srv.Advertise("http://" + l.Addr().String()); err != nil {
				return err
			}
			if metricsListen != "" {
				ml, err := net.Listen("tcp", loopbackDefault(metricsListen))
				if err != nil {
					return fmt.Errorf("--metrics-listen: %w", err)
				}
				log.Info("serving metrics without authentication", "addr", ml.Addr().String(), "path", "/metrics")
				go serveMetrics(ctx, ml, srv, log)
			}
			if e2bListen == "" && (e2bOpts.Domain != "" || e2bCert != "" || e2bKey != "") {
				return fmt.Errorf("--e2b-domain, --e2b-tls-cert and --e2b-tls-key serve the E2B-compatible API: give its address with --e2b-listen too")
			}
			if e2bListen != "" {
				tlsConf, err := e2bTLS(e2bCert, e2bKey)
				if err != nil {
					return err
				}
				if e2bOpts.Domain, err = e2bDomain(e2bOpts.Domain); err != nil {
					return err
				}
				el, err := net.Listen("tcp", e2bListen)
				if err != nil {
					return fmt.Errorf("--e2b-listen: %w", err)
				}
				h, closeE2B := srv.E2BHandler(e2bOpts)
				defer closeE2B()
				scheme := map[bool]string{true: "https", false: "http"}[tlsConf != nil]
				env := "E2B_API_URL=" + scheme + "://" + el.Addr().String() + " E2B_SANDBOX_URL=" + scheme + "://" + el.Addr().String()
				if e2bOpts.Domain != "" {
					env += " (or E2B_DOMAIN=" + e2bOpts.Domain + ", with api." + e2bOpts.Domain + " and *." + e2bOpts.Domain + " pointing at this address, port 443)"
				}
				log.Info("serving the E2B-compatible API", "addr", el.Addr().String(), "env", env)
				go serveE2B(ctx, el, h, tlsConf, log)
			}
			where := server.StorePath(data)
			if storeDSN != "" {
				where = store.Redact(storeDSN)
			}
			log.Info("serving", "addr", l.Addr().String(), "dataDir", data, "store", where,
				"localKeyFile", filepath.Join(data, server.LocalKeyFile))
			return srv.Serve(ctx, l)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7780", "address to serve the API on")
	cmd.Flags().IntVar(&egressShares.MaxProxyConns, "egress-conns", 0, "connections all sandboxes' egress proxies hold at once (0: an eighth of the open-file limit, at least 1,024)")
	cmd.Flags().IntVar(&egressShares.ProxyConnsPerKey, "egress-conns-per-key", 0, "one key's share of --egress-conns, connections at once (0: 1,024 or a quarter of the total if less; -1: no per-key share)")
	cmd.Flags().IntVar(&egressShares.ProxyConnsPerSandbox, "egress-conns-per-sandbox", 0, "one sandbox's share of --egress-conns, connections at once (0: 256, at most the key's share)")
	cmd.Flags().IntVar(&egressShares.DNSRate, "dns-rate", 0, "DNS queries per second each sandbox may send (0: 100; bursts of twice the rate; past it queries are dropped)")
	cmd.Flags().StringArrayVar(&sandboxCAs, "sandbox-ca", nil, "PEM file of CA certificates every sandbox trusts besides its template's (repeatable): e.g. the CA of a TLS-intercepting proxy on the host's network, so pip, npm, curl and git work inside")
	cmd.Flags().StringVar(&data, "data-dir", dataDir(), "directory for the database, sandbox state and templates")
	cmd.Flags().StringVar(&storeDSN, "store", "", "where the records (sandboxes, keys, usage, secrets) are kept: a postgres://USER@HOST:5432/DATABASE?sslmode=require URL, so several servers share one state, or a SQLite file path (default DATA_DIR/runtime.db; also "+storeEnv+"). Keep the password out of the command line: PGPASSWORD, ~/.pgpass or "+storeEnv+" work")
	cmd.Flags().StringVar(&templates, "templates-dir", os.Getenv("WITHRUNTIME_TEMPLATES_DIR"), "directory of templates (default DATA_DIR/templates)")
	cmd.Flags().Int64Var(&maxUpload, "max-upload-bytes", 0, "cap on one file upload in bytes (default 1.5 GiB)")
	cmd.Flags().Int64Var(&imageMaxBytes, "image-max-bytes", image.DefaultMaxBytes, "cap on the uncompressed content of an image made into a template (POST /v1/templates), in bytes")
	cmd.Flags().BoolVar(&noBuild, "no-build", false, "do not build the base template at start if it is missing")
	cmd.Flags().IntVar(&maxSandboxes, "max-sandboxes", 0, "most sandboxes held at once, running and paused together (a paused one keeps its slot until it is deleted); creates past it answer 503 unavailable (0: no limit; see README, Capacity)")
	cmd.Flags().DurationVar(&pausedRetention, "paused-retention", sandbox.DefaultPausedRetention, "how long a paused sandbox is kept; then it is destroyed (end reason retention)")
	cmd.Flags().DurationVar(&snapshotRetention, "snapshot-retention", 0, "how long a snapshot is kept after it is taken; then it is deleted (0: until deleted). Recorded in each snapshot as expiresAt when it is taken")
	cmd.Flags().IntVar(&pool.Size, "pool-size", 2, "booted sandboxes kept ready per pooled template, so a create of the default shape only claims one (0: no pool)")
	cmd.Flags().IntVar(&pool.Max, "pool-max", sandbox.DefaultPoolMax, "most booted sandboxes a pooled template keeps ready after a burst: the pool follows the recent create rate (the most creates within one second over the last 30 s) between --pool-size and this")
	cmd.Flags().IntVar(&pool.NetworkSlots, "network-slots", sandbox.DefaultNetworkSlots, "sandbox networks (namespace, veth, nftables rules) kept prepared, so a create only sets its policy (0: none)")
	cmd.Flags().DurationVar(&pool.MaxAge, "pool-max-age", 10*time.Minute, "replace a pooled sandbox that waited this long")
	cmd.Flags().StringSliceVar(&pool.Templates, "pool-templates", []string{"base"}, "templates that get a warm pool")
	cmd.Flags().BoolVar(&warmImages, "warm-images", true, "start the sandboxes of warm templates (a start command and ready check, or code-interpreter's kernel) from a snapshot taken once with the start done; false: every create runs the start in place")
	cmd.Flags().StringVar(&secretsKey, "secrets-key-file", os.Getenv(server.SecretsKeyEnv), "file of the key that seals secret values in the database (64 hex characters, mode 0600; created if missing) (default DATA_DIR/secrets.key)")
	cmd.Flags().BoolVar(&rotateKey, "rotate-secrets-key", false, "make a new secrets key at start, re-seal every secret value with it and replace the key file, then serve")
	cmd.Flags().BoolVar(&discardSecrets, "discard-unreadable-secrets", false, "delete the secrets sealed with a key this server does not have (a lost key) instead of refusing to start")
	cmd.Flags().StringVar(&metricsListen, "metrics-listen", "", "also serve GET /metrics without authentication on this address, for a Prometheus on the host (a port alone, 9781 or :9781, listens on 127.0.0.1); /metrics on --listen always needs a key without a limit")
	cmd.Flags().StringVar(&e2bListen, "e2b-listen", "", "also serve the E2B-compatible API (both planes: set E2B_API_URL and E2B_SANDBOX_URL to http://ADDR, E2B_API_KEY to a Runtime key) on this address, e.g. 127.0.0.1:3000 (default: off)")
	cmd.Flags().StringVar(&e2bOpts.Domain, "e2b-domain", "", "the E2B-compatible API also routes by host, as E2B does with E2B_DOMAIN: api.DOMAIN is the API, PORT-SANDBOX.DOMAIN a sandbox's port (envd, the code interpreter, or a program listening in it: sandbox.get_host(port)); point api.DOMAIN and *.DOMAIN at --e2b-listen (the SDKs use https on port 443: give --e2b-tls-cert or put a TLS proxy in front)")
	cmd.Flags().StringVar(&e2bCert, "e2b-tls-cert", "", "serve the E2B-compatible API over TLS with this PEM certificate chain (for --e2b-domain: valid for api.DOMAIN and *.DOMAIN); read again when the file changes")
	cmd.Flags().StringVar(&e2bKey, "e2b-tls-key", "", "the PEM private key of --e2b-tls-cert")
	cmd.Flags().BoolVar(&e2bOpts.PublicTraffic, "e2b-public-traffic", true, "with --e2b-domain, a sandbox's ports answer on PORT-SANDBOX.DOMAIN without its traffic access token unless its create says network.allowPublicTraffic false (E2B's default); false: they need the token unless the create says true")
	cmd.Flags().Float64Var(&login.TrialHours, "trial-hours", 0, "sandbox-hours that a key approved as a trial (withruntime login, sandbox run --trial) may use in total; past them its creates answer 429 (0: no trials)")
	cmd.Flags().StringVar(&login.PublicURL, "public-url", "", "the server's URL as users reach it (https://runtime.example.com), for the links withruntime login prints (default: the scheme and Host of each request)")
	cmd.Flags().Var(prefixesFlag{&login.TrustedProxies}, "trusted-proxy", "a reverse proxy in front of the server (an address or CIDR; repeat or comma-separate) whose X-Forwarded-For names the client for device login's per-address limits (default none: the client is the connection's peer address, and X-Forwarded-For is ignored)")
	meter = addMeterFlags(cmd)
	quotas = addQuotaFlags(cmd)
	newDriver = addDriverFlags(cmd)
	newElector = addLeaderFlags(cmd)
	cmd.Flags().DurationVar(&orphanGrace, "leader-election-orphan-grace", sandbox.DefaultOrphanGrace, "with --leader-election: how old a record still starting, or a sandbox pod with no record, must be before the leader takes it for what a dead server left and deletes it; must exceed the longest create (the Kubernetes driver's pod ready timeout, 2 minutes)")
	return cmd
}

// loopbackDefault puts a listen address without a host on 127.0.0.1.
func loopbackDefault(addr string) string {
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}

// serveMetrics serves srv's /metrics on l until ctx ends.
func serveMetrics(ctx context.Context, l net.Listener, srv *server.Server, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", srv.Metrics.Handler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: server.MaxHeaderBytes}
	go func() {
		<-ctx.Done()
		_ = hs.Close()
	}()
	if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("metrics listener stopped", "err", err)
	}
}

// serveE2B serves the E2B-compatible API on l until ctx ends. Plaintext
// HTTP/2 (prior knowledge) is served beside HTTP/1.1 for clients that
// speak it.
func serveE2B(ctx context.Context, l net.Listener, h http.Handler, tlsConf *tls.Config, log *slog.Logger) {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	protocols.SetHTTP2(true)
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: server.IdleTimeout,
		Protocols: &protocols, TLSConfig: tlsConf, MaxHeaderBytes: server.MaxHeaderBytes}
	l = server.LimitE2BListener(l)
	go func() {
		<-ctx.Done()
		_ = hs.Close()
	}()
	if tlsConf != nil {
		l = tls.NewListener(l, hs.TLSConfig)
	}
	if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("E2B listener stopped", "err", err)
	}
}

// limits is the server's default limits with the --max-sandboxes cap and
// the --paused-retention.
func limits(maxSandboxes int, pausedRetention time.Duration) *sandbox.Limits {
	l := sandbox.DefaultLimits()
	l.MaxSandboxes = maxSandboxes
	l.PausedRetention = pausedRetention
	return &l
}

// prefixesFlag is a flag of addresses or CIDRs (repeated or
// comma-separated); an address alone is a prefix of one.
type prefixesFlag struct{ p *[]netip.Prefix }

func (f prefixesFlag) String() string {
	if f.p == nil {
		return ""
	}
	var out []string
	for _, p := range *f.p {
		out = append(out, p.String())
	}
	return strings.Join(out, ",")
}

func (f prefixesFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return fmt.Errorf("%q is not an address or a CIDR (such as 10.0.0.1 or 10.0.0.0/8): %w", s, err)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		*f.p = append(*f.p, p.Masked())
	}
	return nil
}

func (prefixesFlag) Type() string { return "cidr" }
