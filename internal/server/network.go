package server

import (
	"crypto/x509"
	"fmt"
	"net/netip"
	"path/filepath"

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
func openEgress(cfg Config, mgr *sandbox.Manager) (egressCloser, error) {
	if cfg.Egress.Disabled {
		return egressCloser{}, nil
	}
	ca, err := secrets.LoadOrCreateCA(filepath.Join(cfg.DataDir, "egress"))
	if err != nil {
		return egressCloser{}, fmt.Errorf("egress CA: %w", err)
	}
	e := cfg.Egress
	m, err := egress.New(egress.Config{
		Name: e.Name, LinkPrefix: e.LinkPrefix, Pool: e.Pool, Exempt: e.Exempt,
		Resolver: e.Resolver, UpstreamRoots: e.UpstreamRoots, CA: ca, Log: cfg.Log,
	})
	if err != nil {
		return egressCloser{}, fmt.Errorf("sandbox networks: %w (the server needs nftables and network namespaces; Egress.Disabled runs sandboxes without any network)", err)
	}
	mgr.EnableNetwork(m, ca)
	return egressCloser{m}, nil
}
