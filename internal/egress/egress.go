// Package egress enforces sandbox network policies on the host.
//
// A networked sandbox gets its own network namespace with one veth link to
// the host on 100.64.0.0/10 (package netns). On the host end, nftables rules
// (package firewall) redirect the sandbox's DNS to a DNS server that answers
// only allowed names (package dnsserver), redirect its TCP 80/443 to a
// transparent proxy that checks the HTTP Host or TLS SNI, resolves the name
// itself and refuses private destinations and the host's own addresses
// (package proxy, with the guard of package policy), and reject
// everything else at once. Rules and listeners live on the host, outside
// the sandbox: root inside the sandbox changes nothing.
//
// The driver calls Attach before booting a sandbox and boots it inside
// Attachment.NetnsPath; with gVisor that is
//
//	runsc --network=sandbox ... run
//	config.json: linux.namespaces: [{"type": "network", "path": <NetnsPath>}]
//	             and /etc/resolv.conf bind-mounted from a file holding Attachment.ResolvConf
//
// Each sandbox has its own listeners, bound to its gateway address on
// ephemeral ports, so a connection's sandbox is known by where it arrived
// and nothing listens on the host's other addresses.
//
// Tenants share what the listeners cost the server (docs/ARCHITECTURE.md,
// resource model): the proxies' connections are capped in total, per API
// key and per sandbox (Config.MaxProxyConns, ProxyConnsPerKey,
// ProxyConnsPerSandbox; a connection past a share is reset at once), a
// connection that sends no request head within 5 s is reset, and each
// sandbox's DNS queries are limited to Config.DNSRate per second (past it
// dropped, in the kernel for UDP).
package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/egress/dnsserver"
	"withruntime.dev/runtime/internal/egress/firewall"
	"withruntime.dev/runtime/internal/egress/netns"
	"withruntime.dev/runtime/internal/egress/policy"
	"withruntime.dev/runtime/internal/egress/proxy"
	"withruntime.dev/runtime/internal/egress/secrets"
	"withruntime.dev/runtime/internal/errs"
)

// Policy is a sandbox's network policy: {internet: false} (nothing), an
// allow list, or {internet: true} with an optional deny list.
type Policy = policy.Policy

// Resolver resolves host names for the DNS server and the proxy.
// *net.Resolver implements it; tests inject their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Manager.
type Config struct {
	// Name names the nftables table (inet) and starts every namespace name
	// (Name + "-" + sandbox id) and link alias (Name + ":" + sandbox id):
	// 1 to 64 letters, digits, '_' or '-'. Default "withruntime". Managers
	// on one host need different names; one name may start another (the
	// namespaces of "withruntime-1a2b" are not "withruntime"'s: sandbox ids
	// hold no '-').
	Name string
	// LinkPrefix starts every host-side veth name (at most 6 characters;
	// default "wr"). Managers on one host need prefixes neither of which
	// starts the other's veth names: the firewall drops packets from any
	// link with its prefix that has no rules of its own.
	LinkPrefix string
	// Pool is where sandbox links come from, one /30 each (default
	// 100.64.0.0/10).
	Pool netip.Prefix
	// NetnsDir holds the named namespaces (default /run/netns).
	NetnsDir string
	// Resolver resolves allowed names (default net.DefaultResolver, the
	// host's resolver).
	Resolver Resolver
	// Exempt lists ranges that the guard would refuse but that sandboxes may
	// reach anyway (tests: 198.18.0.0/15, where they put a fake internet).
	Exempt []netip.Prefix
	// CA is the Runtime CA for secrets (optional: without it SetSecrets
	// fails). Load it with secrets.LoadOrCreateCA.
	CA *secrets.CA
	// UpstreamRoots verifies the hosts the proxy intercepts for secrets
	// (default: the host's roots).
	UpstreamRoots *x509.CertPool
	// Log receives DNS and proxy decisions (default: discarded). Secret
	// values are never logged.
	Log *slog.Logger
	// Upstream, when set, returns the HTTP proxy that the egress proxy
	// reaches host through for scheme ("http", "https"), or nil for a
	// direct connection: for networks where only a proxy reaches out (see
	// proxy.Proxy.Upstream). Sandboxes never see it.
	Upstream func(scheme, host string) *url.URL
	// Observe, when set, hears every proxied connection's decision and
	// spliced bytes (see proxy.Proxy.Observe), for metrics.
	Observe func(allowed bool, out, in int64)
	// MaxProxyConns caps the connections every sandbox's egress proxy
	// serves at once, all together; past it new connections are reset.
	// Each is a file descriptor of this process, two once dialed upstream.
	// Default: an eighth of the process's RLIMIT_NOFILE, at least 1024.
	MaxProxyConns int
	// ProxyConnsPerKey caps the connections that the sandboxes of one API
	// key (Tenant) hold at once, all together: its share of MaxProxyConns,
	// so that one key cannot take the pool. Default: a quarter of
	// MaxProxyConns, at most 1,024 (see DefaultShares); -1: no per-key cap.
	ProxyConnsPerKey int
	// ProxyConnsPerSandbox caps one sandbox's connections at once. Default:
	// 256, at most ProxyConnsPerKey.
	ProxyConnsPerSandbox int
	// Tenant, when set, returns the API key a sandbox belongs to ("" for
	// none yet: a warm-pool sandbox). It is asked at Attach and Update
	// (a claim of a pooled sandbox updates its policy), never per
	// connection.
	Tenant func(sandboxID string) string
	// Limited, when set, hears each connection or DNS query refused for a
	// full share or rate: LimitSandbox, LimitKey or LimitServer (proxy
	// connections, reset at once) or LimitDNS (a query past the sandbox's
	// rate, not answered), for metrics. Each is also logged, at most once
	// per sandbox and limit every LimitLogEvery.
	Limited func(limit string)
	// DNSRate is each sandbox's rate of DNS queries answered, in queries
	// per second (default DefaultDNSRate); DNSBurst the bucket's size
	// (default DefaultDNSBurst). Queries past it are dropped unanswered,
	// in the kernel for UDP (an nftables limit in the sandbox's chain)
	// and in the server for TCP.
	DNSRate, DNSBurst int
}

// LimitDNS names a DNS query dropped past the sandbox's rate (Config.Limited).
const LimitDNS = "dns"

// DefaultDNSRate and DefaultDNSBurst are Config.DNSRate's and
// Config.DNSBurst's defaults, in queries per second and queries: far above
// what resolvers do (pip or npm installing hundreds of packages resolve a
// few names, each cached for the answer's 30 s TTL) and low enough that a
// flood costs the server a few percent of a core (docs/ARCHITECTURE.md,
// resource model).
const (
	DefaultDNSRate  = 100
	DefaultDNSBurst = 200
)

// LimitLogEvery is how often, at most, a refusal for one sandbox and limit
// is logged (with the count refused since the last line).
const LimitLogEvery = 10 * time.Second

// DefaultShares returns the default per-key and per-sandbox connection
// shares for a server total of total connections: a quarter of total for a
// key (at most 1,024), and 256 for a sandbox (at most the key's).
func DefaultShares(total int) (perKey, perSandbox int) {
	perKey = max(1, min(1024, total/4))
	return perKey, min(256, perKey)
}

// dnsTCPConns caps a sandbox's DNS-over-TCP connections served at once.
const dnsTCPConns = 16

// defaultMaxProxyConns is Config.MaxProxyConns's default.
func defaultMaxProxyConns() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return 1 << 16
	}
	return max(1024, int(min(rl.Cur/8, 1<<20)))
}

// Secret is a credential a sandbox uses without holding it.
type Secret = secrets.Secret

// Attachment is a sandbox's network as the driver needs it.
type Attachment struct {
	SandboxID string
	// NetnsPath is the network namespace to boot the sandbox in (the OCI
	// spec's linux.namespaces network path).
	NetnsPath string
	// HostIf is the host end of the sandbox's veth.
	HostIf string
	// Addr is the sandbox's address (and prefix) on eth0 in the namespace.
	Addr netip.Prefix
	// Gateway is the host end, the sandbox's default gateway and DNS server.
	Gateway netip.Addr
	// ResolvConf is the /etc/resolv.conf the sandbox must see.
	ResolvConf string
	// Policy is the effective (normalized) policy.
	Policy Policy
}

// ErrNotAttached says the sandbox has no network attached by this Manager.
var ErrNotAttached = errors.New("egress: sandbox not attached")

// Manager owns every sandbox's network on the host.
type Manager struct {
	cfg   Config
	nc    netns.Config
	fw    *firewall.Firewall
	guard *policy.Guard
	log   *slog.Logger

	// slots caps the connections of all sandboxes' proxies together.
	slots *proxy.Slots

	mu        sync.Mutex
	sandboxes map[string]*sandbox
}

type sandbox struct {
	id      string
	link    *netns.Link
	matcher atomic.Pointer[policy.Matcher]
	secrets atomic.Pointer[secrets.Set]
	dns     *dnsserver.Server
	proxyL  net.Listener
	proxy   *proxy.Proxy
	served  chan struct{}
	// tenant is the key the sandbox's connections count for (Config.Tenant).
	tenant atomic.Pointer[string]
	// limited counts refusals per limit for the rate-limited log.
	limited limitLog
}

// New checks the configuration and creates (or repairs) the nftables table.
// Sandboxes left by an earlier process are kept: call Attach again for
// each one still running, and Cleanup for the rest.
func New(cfg Config) (*Manager, error) {
	if cfg.Name == "" {
		cfg.Name = "withruntime"
	}
	if cfg.LinkPrefix == "" {
		cfg.LinkPrefix = "wr"
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.MaxProxyConns <= 0 {
		cfg.MaxProxyConns = defaultMaxProxyConns()
	}
	perKey, perSandbox := DefaultShares(cfg.MaxProxyConns)
	if cfg.ProxyConnsPerKey == 0 {
		cfg.ProxyConnsPerKey = perKey
	}
	if cfg.ProxyConnsPerSandbox <= 0 {
		cfg.ProxyConnsPerSandbox = perSandbox
		if cfg.ProxyConnsPerKey > 0 {
			cfg.ProxyConnsPerSandbox = min(perSandbox, cfg.ProxyConnsPerKey)
		}
	}
	if cfg.DNSRate <= 0 {
		cfg.DNSRate = DefaultDNSRate
	}
	if cfg.DNSBurst <= 0 {
		cfg.DNSBurst = max(DefaultDNSBurst, cfg.DNSRate)
	}
	if !validName(cfg.Name) {
		return nil, fmt.Errorf("egress: name %q: want 1 to 64 letters, digits, '_' or '-'", cfg.Name)
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	nc := netns.Config{
		Dir:         cfg.NetnsDir,
		NamePrefix:  cfg.Name + "-",
		LinkPrefix:  cfg.LinkPrefix,
		AliasPrefix: cfg.Name + ":",
		Pool:        cfg.Pool,
	}
	if _, err := nc.List(); err != nil { // checks the configuration too
		return nil, fmt.Errorf("egress: %w", err)
	}
	if foreign, err := nc.Foreign(); err != nil || len(foreign) > 0 {
		if err == nil {
			err = fmt.Errorf("links %s start with this server's link prefix %q but belong to another server: give one of them another LinkPrefix", strings.Join(foreign, ", "), cfg.LinkPrefix)
		}
		return nil, fmt.Errorf("egress: %w", err)
	}
	fw, err := firewall.New(cfg.Name, cfg.LinkPrefix)
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	if err := fw.Init(); err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	return &Manager{
		cfg: cfg, nc: nc, fw: fw, log: log,
		slots:     proxy.NewShares(cfg.MaxProxyConns, cfg.ProxyConnsPerKey),
		guard:     policy.NewGuard(cfg.Exempt...),
		sandboxes: map[string]*sandbox{},
	}, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// Guard returns the guard the Manager applies to every destination.
func (m *Manager) Guard() *policy.Guard { return m.guard }

// Validate checks a policy and returns its normalized form, with an
// errs.Invalid error that says what is wrong.
func (m *Manager) Validate(p Policy) (Policy, error) {
	c, err := m.compile(p)
	if err != nil {
		return Policy{}, err
	}
	return c.Policy(), nil
}

func (m *Manager) compile(p Policy) (*policy.Matcher, error) {
	c, err := policy.Compile(p, m.guard)
	if err != nil {
		return nil, errs.New(errs.Invalid, "network policy: %v", err)
	}
	return c, nil
}

// Attach gives a sandbox its network: namespace, veth, DNS server, proxy and
// rules. Attaching a sandbox that is already attached updates its policy.
// After a restart, Attach adopts the namespace and veth a still-running
// sandbox uses and starts serving it again. On error nothing is left.
func (m *Manager) Attach(ctx context.Context, id string, p Policy) (*Attachment, error) {
	matcher, err := m.compile(p)
	if err != nil {
		return nil, err
	}
	if err := netns.ValidID(id); err != nil {
		return nil, errs.New(errs.Invalid, "%v", err)
	}
	tenant := m.tenantOf(id)
	m.mu.Lock()
	defer m.mu.Unlock()
	if sb, ok := m.sandboxes[id]; ok {
		sb.matcher.Store(matcher)
		sb.tenant.Store(&tenant)
		return m.attachment(sb), nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	link, err := m.nc.Create(id)
	if err != nil {
		return nil, fmt.Errorf("egress attach %s: %w", id, err)
	}
	sb := &sandbox{id: id, link: link, served: make(chan struct{})}
	sb.matcher.Store(matcher)
	sb.tenant.Store(&tenant)
	if err := m.serve(sb); err != nil {
		m.stop(sb)
		_ = m.nc.Delete(id)
		return nil, fmt.Errorf("egress attach %s: %w", id, err)
	}
	m.sandboxes[id] = sb
	return m.attachment(sb), nil
}

// serve starts the sandbox's listeners on its gateway address and installs
// its rules.
func (m *Manager) serve(sb *sandbox) error {
	gw := sb.link.Gateway.String()
	log := m.log.With("sandbox", sb.id)
	pc, err := net.ListenPacket("udp4", net.JoinHostPort(gw, "0"))
	if err != nil {
		return err
	}
	dnsTCP, err := net.Listen("tcp4", net.JoinHostPort(gw, "0"))
	if err != nil {
		_ = pc.Close()
		return err
	}
	dh := &dnsserver.Handler{
		Policy:   sb.matcher.Load,
		Resolver: m.cfg.Resolver,
		Guard:    m.guard,
		Log:      log,
		Limit:    dnsserver.NewBucket(m.cfg.DNSRate, m.cfg.DNSBurst),
		Limited:  func() { m.limited(sb, LimitDNS) },
	}
	if up := m.cfg.Upstream; up != nil {
		// Names reached through the upstream proxy over HTTPS (the
		// usual case; plain HTTP follows the same NO_PROXY rules).
		dh.ViaUpstream = func(name string) bool { return up("https", name) != nil }
		dh.Gateway = sb.link.Gateway
	}
	// DNS over TCP (for answers too long for UDP) is rare, and each
	// connection is a file descriptor of this process held until it idles
	// out: one sandbox held 4,500 by opening connections in a loop. More
	// than dnsTCPConns at once wait in the kernel's listen queue.
	sb.dns, err = dnsserver.Start(pc, netutil.LimitListener(dnsTCP, dnsTCPConns), dh)
	if err != nil {
		_ = pc.Close()
		_ = dnsTCP.Close()
		return err
	}
	sb.proxyL, err = net.Listen("tcp4", net.JoinHostPort(gw, "0"))
	if err != nil {
		return err
	}
	sb.proxy = &proxy.Proxy{
		Policy:        sb.matcher.Load,
		Resolver:      m.cfg.Resolver,
		Guard:         m.guard,
		Secrets:       sb.secrets.Load,
		CA:            m.cfg.CA,
		UpstreamRoots: m.cfg.UpstreamRoots,
		Log:           log,
		Upstream:      m.cfg.Upstream,
		Observe:       m.cfg.Observe,
		Shared:        m.slots,
		MaxConns:      m.cfg.ProxyConnsPerSandbox,
		Tenant:        func() string { return *sb.tenant.Load() },
		Limited:       func(limit string) { m.limited(sb, limit) },
	}
	go func() {
		defer close(sb.served)
		if err := sb.proxy.Serve(sb.proxyL); err != nil {
			log.Error("egress: proxy stopped", "err", err)
		}
	}()
	return m.fw.Add(firewall.Rules{
		IfName:     sb.link.HostIf,
		Gateway:    sb.link.Gateway,
		DNSUDPPort: uint16(pc.LocalAddr().(*net.UDPAddr).Port),
		DNSTCPPort: uint16(dnsTCP.Addr().(*net.TCPAddr).Port),
		ProxyPort:  uint16(sb.proxyL.Addr().(*net.TCPAddr).Port),
		DNSRate:    uint64(m.cfg.DNSRate), DNSBurst: uint32(m.cfg.DNSBurst),
	})
}

// stop closes the sandbox's listeners and connections.
func (m *Manager) stop(sb *sandbox) {
	if sb.proxyL != nil {
		_ = sb.proxyL.Close()
		<-sb.served
	}
	if sb.proxy != nil {
		_ = sb.proxy.Close()
	}
	if sb.dns != nil {
		_ = sb.dns.Close()
	}
}

func (m *Manager) attachment(sb *sandbox) *Attachment {
	return &Attachment{
		SandboxID:  sb.id,
		NetnsPath:  sb.link.NetnsPath,
		HostIf:     sb.link.HostIf,
		Addr:       sb.link.Addr,
		Gateway:    sb.link.Gateway,
		ResolvConf: "nameserver " + sb.link.Gateway.String() + "\n",
		Policy:     sb.matcher.Load().Policy(),
	}
}

// Update changes an attached sandbox's policy. It applies to new
// connections and DNS queries; connections already open stay open.
func (m *Manager) Update(ctx context.Context, id string, p Policy) error {
	matcher, err := m.compile(p)
	if err != nil {
		return err
	}
	tenant := m.tenantOf(id)
	m.mu.Lock()
	defer m.mu.Unlock()
	sb, ok := m.sandboxes[id]
	if !ok {
		return fmt.Errorf("egress update %s: %w", id, ErrNotAttached)
	}
	sb.matcher.Store(matcher)
	sb.tenant.Store(&tenant)
	return nil
}

// SetSecrets binds secrets to an attached sandbox, replacing any it had,
// and returns the environment (NAME -> placeholder) to give the sandbox.
// Placeholders depend only on the CA, the sandbox id and the name, so
// calling it again after a restart gives the same ones. The sandbox must
// also trust the CA (see secrets.CA.Bundle and secrets.TrustEnvNames), and
// its policy must allow the secrets' hosts.
func (m *Manager) SetSecrets(id string, ss []Secret) (map[string]string, error) {
	if m.cfg.CA == nil {
		return nil, errs.New(errs.Invalid, "secrets: this server has no egress CA configured")
	}
	set, env, err := secrets.NewSet(m.cfg.CA.PlaceholderKey(), id, ss)
	if err != nil {
		return nil, errs.New(errs.Invalid, "%v", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sb, ok := m.sandboxes[id]
	if !ok {
		return nil, fmt.Errorf("egress secrets %s: %w", id, ErrNotAttached)
	}
	sb.secrets.Store(set)
	return env, nil
}

// Attachment returns an attached sandbox's network and effective policy.
func (m *Manager) Attachment(id string) (*Attachment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sb, ok := m.sandboxes[id]
	if !ok {
		return nil, fmt.Errorf("egress %s: %w", id, ErrNotAttached)
	}
	return m.attachment(sb), nil
}

// Detach removes everything of a sandbox's network: rules, listeners (and
// the connections through them), veth and namespace. Detaching a sandbox
// that has nothing left is not an error. Call it after the sandbox stopped.
func (m *Manager) Detach(ctx context.Context, id string) error {
	if err := netns.ValidID(id); err != nil {
		return errs.New(errs.Invalid, "%v", err)
	}
	// Only taking the sandbox out is done under the lock: the rest (rules,
	// listeners, namespace: ~35 ms) runs beside other creates and deletes
	// instead of queueing them all.
	m.mu.Lock()
	sb := m.sandboxes[id]
	delete(m.sandboxes, id)
	m.mu.Unlock()
	return m.detach(id, sb)
}

// detachLocked is Detach with m.mu held (Cleanup).
func (m *Manager) detachLocked(id string) error {
	sb := m.sandboxes[id]
	delete(m.sandboxes, id)
	return m.detach(id, sb)
}

// detach removes what is left of sandbox id's network; sb is its served
// state, if this Manager had it.
func (m *Manager) detach(id string, sb *sandbox) error {
	var errList []error
	if err := m.fw.Remove(m.nc.HostIfName(id)); err != nil {
		errList = append(errList, err)
	}
	if sb != nil {
		m.stop(sb)
	}
	if err := m.nc.Delete(id); err != nil {
		errList = append(errList, err)
	}
	if err := errors.Join(errList...); err != nil {
		return fmt.Errorf("egress detach %s: %w", id, err)
	}
	return nil
}

// Cleanup removes the network of every sandbox that keep rejects: the ones
// this Manager serves and the leftovers of earlier processes (namespaces,
// veths, rules). Sandboxes kept but not attached stay as they are, for
// Attach to adopt.
func (m *Manager) Cleanup(ctx context.Context, keep func(id string) bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids, err := m.nc.List()
	if err != nil {
		return fmt.Errorf("egress cleanup: %w", err)
	}
	for id := range m.sandboxes {
		ids = append(ids, id)
	}
	var errList []error
	done := map[string]bool{}
	for _, id := range ids {
		if done[id] || keep(id) {
			continue
		}
		done[id] = true
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := m.detachLocked(id); err != nil {
			errList = append(errList, err)
		}
	}
	// Rules whose veth is gone.
	links, err := m.fw.Links()
	if err != nil {
		errList = append(errList, err)
	}
	for _, ifName := range links {
		if _, err := net.InterfaceByName(ifName); err != nil {
			if err := m.fw.Remove(ifName); err != nil {
				errList = append(errList, err)
			}
		}
	}
	return errors.Join(errList...)
}

// Close stops serving every sandbox (listeners and connections) but leaves
// namespaces, veths and rules in place, so that sandboxes still running
// keep their network across a server restart: while no process serves them,
// their DNS and 80/443 connections are refused. A new Manager's Attach
// adopts them again.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, sb := range m.sandboxes {
		m.stop(sb)
		delete(m.sandboxes, id)
	}
	// With no sandbox left on it, the table is only base chains: delete it,
	// so that servers on short-lived data directories (a CLI's, a test's)
	// leave nothing behind. A server that starts again makes it anew; one
	// whose sandboxes keep running keeps it for them.
	if links, err := m.fw.Links(); err == nil && len(links) == 0 {
		if err := m.fw.Destroy(); err != nil {
			return fmt.Errorf("egress close: %w", err)
		}
	}
	return nil
}

// Destroy detaches every sandbox of this Manager's configuration and
// deletes the nftables table. For tests and uninstalling.
func (m *Manager) Destroy(ctx context.Context) error {
	err := m.Cleanup(ctx, func(string) bool { return false })
	if derr := m.fw.Destroy(); derr != nil {
		err = errors.Join(err, derr)
	}
	return err
}
