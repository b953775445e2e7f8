package server

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"golang.org/x/net/http/httpproxy"

	"withruntime.dev/runtime/internal/egress"
	"withruntime.dev/runtime/internal/egress/podproxy"
	"withruntime.dev/runtime/internal/egress/policy"
	"withruntime.dev/runtime/internal/egress/proxy"
	"withruntime.dev/runtime/internal/egress/secrets"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/store"
)

// EgressConfig configures sandbox networks (package egress). Zero values
// take the defaults; the test-only fields must stay empty in production.
type EgressConfig struct {
	// Disabled runs every sandbox with no network at all (runsc
	// --network=none), for hosts without nftables; creates that ask for a
	// network or secrets are refused.
	Disabled bool
	// Name names the nftables table and starts the namespace names
	// (default "withruntime"); LinkPrefix starts host veth names (at most
	// 6 characters, default "wr"). Servers on one host need different
	// names, and link prefixes neither of which starts the other's veth
	// names (see egress.Config). Open derives both from the data directory
	// when they are empty (EgressNames).
	Name, LinkPrefix string
	// Pool is where sandbox links come from (default 100.64.0.0/10).
	Pool netip.Prefix
	// Exempt lists ranges sandboxes may reach although the guard refuses
	// them (tests only: 198.18.0.0/15, where they build a fake internet).
	Exempt []netip.Prefix
	// Resolver resolves allowed names (default: the host's resolver; tests
	// inject a map).
	Resolver egress.Resolver
	// UpstreamRoots verifies the hosts the proxy intercepts for secrets
	// (default: the host's roots; tests use their own CA).
	UpstreamRoots *x509.CertPool
	// Upstream returns the HTTP proxy the egress proxy dials out through
	// for scheme and host, or nil to connect directly (default: from the
	// server's own HTTPS_PROXY, HTTP_PROXY and NO_PROXY, any case; none
	// when they are unset). Sandboxes never see it.
	Upstream func(scheme, host string) *url.URL
	// SandboxCAs are PEM files of CA certificates that every sandbox
	// trusts besides its template's own roots (serve --sandbox-ca): e.g.
	// the CA of a TLS-intercepting proxy that the host's outbound HTTPS
	// passes through, so that pip, npm, curl and git inside work there.
	SandboxCAs []string
	// MaxProxyConns caps the connections all sandboxes' egress proxies
	// serve at once (default: see egress.Config.MaxProxyConns).
	MaxProxyConns int
	// ProxyConnsPerKey and ProxyConnsPerSandbox are one key's and one
	// sandbox's shares of MaxProxyConns, in connections at once (defaults:
	// egress.DefaultShares, 1,024 and 256 on a server of 4,096 or more; -1
	// per key: no per-key share).
	ProxyConnsPerKey, ProxyConnsPerSandbox int
	// DNSRate is each sandbox's rate of DNS queries in queries per second
	// (default egress.DefaultDNSRate, 100, with a burst of twice the rate,
	// at least egress.DefaultDNSBurst).
	DNSRate int
	// PodProxyListen, for a driver that enforces policies itself and knows
	// its sandboxes by address (Kubernetes), is where this server serves
	// their egress proxy (package podproxy), e.g. ":3128": host names,
	// wildcards and secrets then work there. Empty: no proxy.
	PodProxyListen string
}

// loadSandboxCAs reads and checks the SandboxCAs files: each must hold at
// least one PEM certificate, and only certificates.
func loadSandboxCAs(files []string) ([]byte, error) {
	var all []byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--sandbox-ca %s: %w", f, err)
		}
		n := 0
		for rest := data; ; {
			var b *pem.Block
			b, rest = pem.Decode(rest)
			if b == nil {
				break
			}
			if b.Type != "CERTIFICATE" {
				return nil, fmt.Errorf("--sandbox-ca %s: holds a %q block; give only CA certificates (PEM), never a private key", f, b.Type)
			}
			if _, err := x509.ParseCertificate(b.Bytes); err != nil {
				return nil, fmt.Errorf("--sandbox-ca %s: certificate %d: %w", f, n+1, err)
			}
			all = append(all, pem.EncodeToMemory(b)...)
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("--sandbox-ca %s: no PEM certificate in it (want -----BEGIN CERTIFICATE----- blocks)", f)
		}
	}
	return all, nil
}

// egressCloser stops serving sandbox networks at server close (nil-safe).
type egressCloser struct {
	m   *egress.Manager
	pod *podProxy
}

func (c egressCloser) Close() error {
	if c.pod != nil {
		c.pod.Close()
	}
	if c.m == nil {
		return nil
	}
	return c.m.Close()
}

// podProxy is the egress proxy served for the driver's sandboxes.
type podProxy struct {
	l net.Listener
	s *podproxy.Server
}

func (p *podProxy) Close() {
	_ = p.l.Close()
	_ = p.s.Close()
}

// sandboxLocator is a driver that knows a sandbox by its address
// (kubernetes.Driver.SandboxAt).
type sandboxLocator interface {
	SandboxAt(ip netip.Addr) (string, bool)
}

// openPodProxy serves the egress proxy of a driver whose sandboxes reach
// it over a shared network, on Egress.PodProxyListen: connections are
// known by source address (the driver's SandboxAt), their policy and
// secrets read from the store (mgr.Egress). The CA is DataDir/egress's,
// as on a single host: replicas must share it.
func openPodProxy(cfg Config, mgr *sandbox.Manager) (egressCloser, error) {
	loc, ok := cfg.Driver.(sandboxLocator)
	if !ok {
		return egressCloser{}, fmt.Errorf("egress proxy on %s: the %s driver cannot tell its sandboxes by address", cfg.Egress.PodProxyListen, cfg.Driver.Name())
	}
	ca, err := secrets.LoadOrCreateCA(filepath.Join(cfg.DataDir, "egress"))
	if err != nil {
		return egressCloser{}, fmt.Errorf("egress CA: %w", err)
	}
	guard := policy.NewGuard(cfg.Egress.Exempt...)
	mgr.EnableDriverEgress(ca, guard)
	l, err := net.Listen("tcp", cfg.Egress.PodProxyListen)
	if err != nil {
		return egressCloser{}, fmt.Errorf("egress proxy: %w", err)
	}
	var res proxy.Resolver
	if cfg.Egress.Resolver != nil {
		res = cfg.Egress.Resolver
	}
	s := &podproxy.Server{Identify: loc.SandboxAt, Load: mgr.Egress, Resolver: res, Guard: guard,
		CA: ca, UpstreamRoots: cfg.Egress.UpstreamRoots, Log: cfg.Log}
	go func() {
		if err := s.Serve(l); err != nil {
			cfg.Log.Error("egress proxy stopped", "err", err)
		}
	}()
	return egressCloser{pod: &podProxy{l: l, s: s}}, nil
}

// openEgress loads (or creates) the Runtime CA in DataDir/egress, starts the
// egress manager and gives it to the sandbox manager.
// observe hears each proxied connection (metrics; may be nil).
// tenant returns the key a sandbox belongs to, for its share of the
// proxies' connections; limited hears each connection or query refused
// for a share or rate (both may be nil).
func openEgress(cfg Config, mgr *sandbox.Manager, observe func(allowed bool, out, in int64), tenant func(string) string, limited func(string)) (egressCloser, error) {
	if cfg.Egress.Disabled {
		if cfg.Egress.PodProxyListen != "" && cfg.Driver != nil {
			return openPodProxy(cfg, mgr)
		}
		return egressCloser{}, nil
	}
	extraCAs, err := loadSandboxCAs(cfg.Egress.SandboxCAs)
	if err != nil {
		return egressCloser{}, err
	}
	ca, err := secrets.LoadOrCreateCA(filepath.Join(cfg.DataDir, "egress"))
	if err != nil {
		return egressCloser{}, fmt.Errorf("egress CA: %w", err)
	}
	e := cfg.Egress
	upstream := e.Upstream
	if upstream == nil {
		if upstream, err = upstreamFromEnv(); err != nil {
			return egressCloser{}, err
		}
	}
	m, err := egress.New(egress.Config{
		Name: e.Name, LinkPrefix: e.LinkPrefix, Pool: e.Pool, Exempt: e.Exempt,
		Resolver: e.Resolver, UpstreamRoots: e.UpstreamRoots, CA: ca, Log: cfg.Log,
		Upstream: upstream, Observe: observe, MaxProxyConns: e.MaxProxyConns,
		ProxyConnsPerKey: e.ProxyConnsPerKey, ProxyConnsPerSandbox: e.ProxyConnsPerSandbox,
		Tenant: tenant, Limited: limited, DNSRate: e.DNSRate, DNSBurst: 2 * e.DNSRate,
	})
	if err != nil {
		return egressCloser{}, fmt.Errorf("sandbox networks: %w (the server needs nftables and network namespaces; Egress.Disabled runs sandboxes without any network)", err)
	}
	mgr.EnableNetwork(m, ca)
	mgr.TrustCAs(extraCAs)
	return egressCloser{m: m}, nil
}

// upstreamFromEnv is the upstream proxy from this process's HTTPS_PROXY,
// HTTP_PROXY and NO_PROXY (either case), or nil when none is set.
func upstreamFromEnv() (func(scheme, host string) *url.URL, error) {
	cfg := httpproxy.FromEnvironment()
	if cfg.HTTPProxy == "" && cfg.HTTPSProxy == "" {
		return nil, nil
	}
	proxyFor := cfg.ProxyFunc()
	for _, scheme := range []string{"http", "https"} {
		if _, err := proxyFor(&url.URL{Scheme: scheme, Host: "registry.invalid"}); err != nil {
			return nil, fmt.Errorf("the upstream proxy in HTTP_PROXY/HTTPS_PROXY: %w; fix or unset it", err)
		}
	}
	return func(scheme, host string) *url.URL {
		u, err := proxyFor(&url.URL{Scheme: scheme, Host: host})
		if err != nil {
			return nil
		}
		return u
	}, nil
}

// egressLimits counts egress connections and DNS queries refused for a
// share or rate, in withruntime_egress_limited_total{limit} on reg, and
// returns the function that counts one.
func egressLimits(reg prometheus.Registerer) func(limit string) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "withruntime_egress_limited_total",
		Help: "Egress connections reset at once for a full share (limit: sandbox, key, server) and DNS queries dropped past a sandbox's rate (limit: dns).",
	}, []string{"limit"})
	reg.MustRegister(c)
	known := map[string]bool{}
	for _, l := range []string{proxy.LimitSandbox, proxy.LimitKey, proxy.LimitServer, egress.LimitDNS} {
		c.WithLabelValues(l)
		known[l] = true
	}
	return func(limit string) {
		if known[limit] {
			c.WithLabelValues(limit).Inc()
		}
	}
}

// sandboxKey returns the key of sandbox id in st ("" when it has no record).
func sandboxKey(st *store.Store) func(id string) string {
	return func(id string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sb, err := st.GetSandbox(ctx, id)
		if err != nil {
			return ""
		}
		return sb.KeyID
	}
}
