package server

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"

	"golang.org/x/net/http/httpproxy"

	"withruntime.dev/runtime/internal/egress"
	"withruntime.dev/runtime/internal/egress/secrets"
	"withruntime.dev/runtime/internal/sandbox"
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
type egressCloser struct{ m *egress.Manager }

func (c egressCloser) Close() error {
	if c.m == nil {
		return nil
	}
	return c.m.Close()
}

// openEgress loads (or creates) the Runtime CA in DataDir/egress, starts the
// egress manager and gives it to the sandbox manager.
// observe hears each proxied connection (metrics; may be nil).
func openEgress(cfg Config, mgr *sandbox.Manager, observe func(allowed bool, out, in int64)) (egressCloser, error) {
	if cfg.Egress.Disabled {
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
	})
	if err != nil {
		return egressCloser{}, fmt.Errorf("sandbox networks: %w (the server needs nftables and network namespaces; Egress.Disabled runs sandboxes without any network)", err)
	}
	mgr.EnableNetwork(m, ca)
	mgr.TrustCAs(extraCAs)
	return egressCloser{m}, nil
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
