package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"withruntime.dev/runtime/internal/egress/secrets"
	"withruntime.dev/runtime/internal/errs"
)

// fast fails the test when a blocked operation took 2 s or more.
func fast(t *testing.T, what string, start time.Time) {
	t.Helper()
	if d := time.Since(start); d >= 2*time.Second {
		t.Errorf("%s: took %v, want well under 2s", what, d)
	}
}

type world struct {
	m   *Manager
	res *mapResolver
	in  *internet
	sb  *sandboxClient
}

// newWorld builds a fake internet and attaches one sandbox with an allow
// list to it.
func newWorld(t *testing.T, p Policy, opts ...func(*Config)) *world {
	t.Helper()
	names := []string{"api.egress.test", "www.site.test", "other.test"}
	res := &mapResolver{addrs: map[string][]netip.Addr{}}
	in := newInternet(t, names)
	for _, n := range names {
		res.addrs[n] = []netip.Addr{in.ip}
	}
	res.addrs["rebind.site.test"] = []netip.Addr{netip.MustParseAddr("10.0.0.1")}
	res.addrs["loop.site.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	res.addrs["meta.site.test"] = []netip.Addr{netip.MustParseAddr("169.254.169.254")}
	m := newTestManager(t, res, opts...)
	att, err := m.Attach(context.Background(), "sbx_"+randHex(3), p)
	if err != nil {
		t.Fatal(err)
	}
	return &world{m: m, res: res, in: in, sb: &sandboxClient{t: t, att: att}}
}

func (w *world) httpAddr() netip.AddrPort  { return netip.AddrPortFrom(w.in.ip, 80) }
func (w *world) httpsAddr() netip.AddrPort { return netip.AddrPortFrom(w.in.ip, 443) }

var allowList = Policy{Allow: []string{"api.egress.test", "*.site.test"}}

func TestAttachment(t *testing.T) {
	w := newWorld(t, allowList)
	a := w.sb.att
	if !strings.HasPrefix(a.NetnsPath, "/run/netns/"+w.m.cfg.Name+"-") || a.Gateway.Next() != a.Addr.Addr() || a.Addr.Bits() != 30 {
		t.Errorf("attachment = %+v", a)
	}
	if !w.m.cfg.Pool.Contains(a.Gateway) {
		t.Errorf("gateway %s outside the pool %s", a.Gateway, w.m.cfg.Pool)
	}
	if a.ResolvConf != "nameserver "+a.Gateway.String()+"\n" {
		t.Errorf("resolv.conf = %q", a.ResolvConf)
	}
	if got, _ := w.m.Attachment(a.SandboxID); got == nil || len(got.Policy.Allow) != 2 {
		t.Errorf("effective policy = %+v", got)
	}
}

func TestDNSAnswersOnlyAllowedNames(t *testing.T) {
	w := newWorld(t, allowList)
	r, err := w.sb.resolve("API.egress.test")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != w.in.ip.String() {
		t.Fatalf("allowed name: %v", r)
	}
	for _, name := range []string{"other.test", "site.test", "evil.example"} {
		start := time.Now()
		r, err := w.sb.resolve(name)
		if err != nil || r.Rcode != dns.RcodeNameError {
			t.Errorf("%s: %v %v, want NXDOMAIN", name, r, err)
		}
		fast(t, "NXDOMAIN for "+name, start)
		if w.res.wasAsked(name) {
			t.Errorf("%s was looked up upstream", name)
		}
	}
	// A resolver hard-coded in the sandbox gets the same answers: port 53
	// anywhere is redirected to the sandbox's DNS server.
	r, err = w.sb.queryAt(netip.AddrPortFrom(w.in.ip, 53).String(), "other.test", dns.TypeA)
	if err != nil || r.Rcode != dns.RcodeNameError {
		t.Errorf("other resolver: %v %v, want NXDOMAIN from ours", r, err)
	}
	r, err = w.sb.queryAt(netip.AddrPortFrom(w.in.ip, 53).String(), "www.site.test", dns.TypeA)
	if err != nil || len(r.Answer) != 1 {
		t.Errorf("other resolver, allowed name: %v %v", r, err)
	}
	// An allowed name that points at a private address gets no address.
	if r, err := w.sb.resolve("rebind.site.test"); err != nil || len(r.Answer) != 0 {
		t.Errorf("rebinding name: %v %v, want no answers", r, err)
	}
}

func TestProxyHTTPAndHTTPS(t *testing.T) {
	w := newWorld(t, allowList)
	resp, body, err := w.sb.get("http", "api.egress.test", w.httpAddr(), nil, nil)
	if err != nil || resp.StatusCode != 200 || body != "hello from api.egress.test tls=false" {
		t.Fatalf("HTTP allowed: %v %q %v", resp, body, err)
	}
	resp, body, err = w.sb.get("https", "www.site.test", w.httpsAddr(), w.in.roots, nil)
	if err != nil || resp.StatusCode != 200 || body != "hello from www.site.test tls=true" {
		t.Fatalf("HTTPS allowed: %v %q %v", resp, body, err)
	}

	// other.test is served by the same upstream but not allowed: Host and
	// SNI decide, not the address the sandbox connected to.
	start := time.Now()
	resp, body, err = w.sb.get("http", "other.test", w.httpAddr(), nil, nil)
	if err != nil || resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "not on this sandbox's allow list") {
		t.Errorf("HTTP not allowed: %v %q %v", resp, body, err)
	}
	fast(t, "HTTP refusal", start)
	start = time.Now()
	_, _, err = w.sb.get("https", "other.test", w.httpsAddr(), w.in.roots, nil)
	if err == nil || !strings.Contains(err.Error(), "access denied") {
		t.Errorf("HTTPS not allowed: %v, want a TLS access_denied alert", err)
	}
	fast(t, "HTTPS refusal", start)

	// The IP literal is not on the list either.
	start = time.Now()
	resp, _, err = w.sb.get("http", w.in.ip.String(), w.httpAddr(), nil, nil)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("IP literal: %v %v", resp, err)
	}
	fast(t, "IP literal refusal", start)
}

func TestPrivateDestinationsRefused(t *testing.T) {
	w := newWorld(t, allowList)
	// DNS rebinding and /etc/hosts tricks: allowed names whose addresses are
	// private. The proxy resolves them itself and refuses without dialing.
	for _, host := range []string{"rebind.site.test", "loop.site.test", "meta.site.test"} {
		start := time.Now()
		resp, body, err := w.sb.get("http", host, w.httpAddr(), nil, nil)
		if err != nil || resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "resolves only to private") {
			t.Errorf("%s over HTTP: %v %q %v", host, resp, body, err)
		}
		fast(t, host, start)
		start = time.Now()
		if _, _, err := w.sb.get("https", host, w.httpsAddr(), w.in.roots, nil); err == nil {
			t.Errorf("%s over HTTPS succeeded", host)
		}
		fast(t, host+" over HTTPS", start)
	}
	// The metadata address itself, on 80 (redirected to the proxy) and on
	// another port (rejected by the firewall).
	meta := netip.MustParseAddr("169.254.169.254")
	start := time.Now()
	resp, _, err := w.sb.get("http", meta.String(), netip.AddrPortFrom(meta, 80), nil, nil)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("metadata on :80: %v %v", resp, err)
	}
	fast(t, "metadata :80", start)
	start = time.Now()
	if c, err := dialIn(w.sb.att.NetnsPath, "tcp", "169.254.169.254:8080", 5*time.Second); err == nil {
		c.Close()
		t.Error("metadata :8080 connected")
	}
	fast(t, "metadata :8080", start)
}

func TestBlockedPortsFailFast(t *testing.T) {
	w := newWorld(t, Policy{Allow: []string{"api.egress.test", w2cidr()}})
	// A port other than 80/443 on an upstream that listens there.
	for _, addr := range []string{
		netip.AddrPortFrom(w.in.ip, 22).String(),                           // upstream's ssh
		netip.AddrPortFrom(w.sb.att.Gateway, 22).String(),                  // the host itself
		netip.AddrPortFrom(netip.MustParseAddr("10.1.2.3"), 5432).String(), // private network
	} {
		start := time.Now()
		c, err := dialIn(w.sb.att.NetnsPath, "tcp", addr, 5*time.Second)
		if err == nil {
			c.Close()
			t.Errorf("TCP %s connected", addr)
			continue
		}
		if !strings.Contains(err.Error(), "refused") {
			t.Errorf("TCP %s: %v, want connection refused", addr, err)
		}
		fast(t, "TCP "+addr, start)
	}
	// UDP other than DNS gets an ICMP error back.
	start := time.Now()
	c, err := dialIn(w.sb.att.NetnsPath, "udp", netip.AddrPortFrom(w.in.ip, 123).String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	_, _ = c.Write([]byte("ntp?"))
	if _, err := c.Read(make([]byte, 16)); err == nil || !strings.Contains(err.Error(), "refused") && !strings.Contains(err.Error(), "no route to host") {
		t.Errorf("UDP :123: %v, want an ICMP error", err)
	}
	fast(t, "UDP :123", start)
	// Ping the gateway: rejected too (no ICMP socket needed: UDP covers the
	// non-TCP path; IPv6 is rejected by the same rule).
}

// w2cidr is an allow entry for the whole test internet range, so that the
// blocked-port test shows ports, not addresses, being refused.
func w2cidr() string { return "198.18.0.0/15" }

func TestPolicyUpdate(t *testing.T) {
	w := newWorld(t, allowList)
	ctx := context.Background()
	id := w.sb.att.SandboxID

	// A kept-alive connection opened under the old policy.
	c, err := dialIn(w.sb.att.NetnsPath, "tcp", w.httpAddr().String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	if code, _, err := rawHTTP(c, br, "api.egress.test"); err != nil || code != 200 {
		t.Fatalf("first request: %d %v", code, err)
	}

	if err := w.m.Update(ctx, id, Policy{Allow: []string{"other.test"}}); err != nil {
		t.Fatal(err)
	}
	if resp, _, err := w.sb.get("http", "api.egress.test", w.httpAddr(), nil, nil); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("new connection after removing the name: %v %v", resp, err)
	}
	if resp, _, err := w.sb.get("http", "other.test", w.httpAddr(), nil, nil); err != nil || resp.StatusCode != 200 {
		t.Errorf("new connection to the added name: %v %v", resp, err)
	}
	if r, err := w.sb.resolve("api.egress.test"); err != nil || r.Rcode != dns.RcodeNameError {
		t.Errorf("DNS after update: %v %v", r, err)
	}
	// The open connection is not cut.
	if code, _, err := rawHTTP(c, br, "api.egress.test"); err != nil || code != 200 {
		t.Errorf("open connection after update: %d %v", code, err)
	}

	// internet: true with a deny list.
	if err := w.m.Update(ctx, id, Policy{Internet: true, Deny: []string{"www.site.test"}}); err != nil {
		t.Fatal(err)
	}
	if resp, _, err := w.sb.get("https", "api.egress.test", w.httpsAddr(), w.in.roots, nil); err != nil || resp.StatusCode != 200 {
		t.Errorf("internet: true: %v %v", resp, err)
	}
	if _, _, err := w.sb.get("https", "www.site.test", w.httpsAddr(), w.in.roots, nil); err == nil {
		t.Error("internet: true reached a denied name")
	}
	if resp, _, err := w.sb.get("http", "loop.site.test", w.httpAddr(), nil, nil); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("internet: true reached a private address: %v %v", resp, err)
	}

	// No network at all.
	if err := w.m.Update(ctx, id, Policy{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if r, err := w.sb.resolve("api.egress.test"); err != nil || r.Rcode != dns.RcodeNameError {
		t.Errorf("internet: false DNS: %v %v", r, err)
	}
	// With the network off the proxy resets the connection: no answer.
	if resp, body, err := w.sb.get("http", "api.egress.test", w.httpAddr(), nil, nil); err == nil {
		t.Errorf("internet: false HTTP: got an answer %v %q, want the connection reset", resp, body)
	}
	fast(t, "internet: false", start)

	// Errors.
	if err := w.m.Update(ctx, id, Policy{Allow: []string{"https://x.test/"}}); !errors.Is(err, errs.Invalid) {
		t.Errorf("bad policy: %v, want errs.Invalid", err)
	}
	if err := w.m.Update(ctx, "nosuch", Policy{}); !errors.Is(err, ErrNotAttached) {
		t.Errorf("unknown sandbox: %v", err)
	}
	if _, err := w.m.Attach(ctx, "bad/id", Policy{}); !errors.Is(err, errs.Invalid) {
		t.Errorf("bad id: %v", err)
	}
}

func TestDetachCleanupAndAdopt(t *testing.T) {
	res := &mapResolver{addrs: map[string][]netip.Addr{}}
	m := newTestManager(t, res)
	ctx := context.Background()
	a1, err := m.Attach(ctx, "one", allowList)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := m.Attach(ctx, "two", Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if a1.Gateway == a2.Gateway || a1.HostIf == a2.HostIf {
		t.Fatalf("two sandboxes share a link: %+v %+v", a1, a2)
	}
	// Attach again is an update.
	if again, err := m.Attach(ctx, "one", Policy{Internet: true}); err != nil || again.Addr != a1.Addr || !again.Policy.Internet {
		t.Fatalf("re-attach: %+v %v", again, err)
	}

	// A restart: the old Manager stops serving, a new one adopts "one"
	// (same namespace and address) and cleans up "two".
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2, err := New(m.cfg)
	if err != nil {
		t.Fatal(err)
	}
	adopted, err := m2.Attach(ctx, "one", allowList)
	if err != nil {
		t.Fatal(err)
	}
	if adopted.Addr != a1.Addr || adopted.NetnsPath != a1.NetnsPath {
		t.Errorf("adopted %+v, was %+v", adopted, a1)
	}
	if err := m2.Cleanup(ctx, func(id string) bool { return id == "one" }); err != nil {
		t.Fatal(err)
	}
	if ids, _ := m2.nc.List(); len(ids) != 1 || ids[0] != "one" {
		t.Errorf("after cleanup: %v", ids)
	}
	if links, _ := m2.fw.Links(); len(links) != 1 || links[0] != a1.HostIf {
		t.Errorf("rules after cleanup: %v", links)
	}
	if _, err := net.InterfaceByName(a2.HostIf); err == nil {
		t.Errorf("%s still there", a2.HostIf)
	}
	for range 2 { // idempotent
		if err := m2.Detach(ctx, "one"); err != nil {
			t.Fatal(err)
		}
	}
	if err := m2.Detach(ctx, "never_attached"); err != nil {
		t.Fatal(err)
	}
	if ids, _ := m2.nc.List(); len(ids) != 0 {
		t.Errorf("after detach: %v", ids)
	}
	// newTestManager's cleanup destroys the table and checks nothing is left.
}

func TestSecretInjection(t *testing.T) {
	ca, err := secrets.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	var upstreamRoots *x509.CertPool
	w := newWorld(t, allowList, func(c *Config) {
		c.CA = ca
		c.UpstreamRoots = x509.NewCertPool() // set below, once the fake internet has its CA
		upstreamRoots = c.UpstreamRoots
	})
	upstreamRoots.AppendCertsFromPEM(w.in.caPEM)
	const value = "sk-test-9f8e7d6c5b4a"
	env, err := w.m.SetSecrets(w.sb.att.SandboxID, []Secret{{Name: "API_KEY", Value: value, Hosts: []string{"api.egress.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	ph := env["API_KEY"]
	if ph == "" || strings.Contains(ph, value) {
		t.Fatalf("placeholder %q", ph)
	}
	runtimeRoots := x509.NewCertPool()
	runtimeRoots.AppendCertsFromPEM(ca.CertPEM())

	// The secret's host: the sandbox trusts the Runtime CA, the upstream
	// gets the value, the sandbox gets the placeholder back.
	resp, body, err := w.sb.get("https", "api.egress.test", w.httpsAddr(), runtimeRoots, http.Header{"Authorization": {"Bearer " + ph}})
	if err != nil || resp.StatusCode != 200 || body != "hello from api.egress.test tls=true" {
		t.Fatalf("secret host: %v %q %v", resp, body, err)
	}
	if _, auth := w.in.seen(); auth != "Bearer "+value {
		t.Errorf("upstream saw %q, want the value", auth)
	}
	if got := resp.Header.Get("X-Seen-Authorization"); got != "Bearer "+ph {
		t.Errorf("sandbox got back %q, want the placeholder", got)
	}
	if resp.TLS.PeerCertificates[0].Issuer.CommonName != "Runtime egress CA" {
		t.Errorf("secret host not intercepted: issuer %s", resp.TLS.PeerCertificates[0].Issuer)
	}

	// Another allowed host: tunneled untouched (the sandbox sees the real
	// certificate, the upstream the placeholder).
	resp, _, err = w.sb.get("https", "www.site.test", w.httpsAddr(), w.in.roots, http.Header{"Authorization": {"Bearer " + ph}})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("other host: %v %v", resp, err)
	}
	if _, auth := w.in.seen(); auth != "Bearer "+ph {
		t.Errorf("other host saw %q, want the placeholder", auth)
	}

	// Plain HTTP to the secret's host is never given the value.
	if _, _, err := w.sb.get("http", "api.egress.test", w.httpAddr(), nil, http.Header{"Authorization": {"Bearer " + ph}}); err != nil {
		t.Fatal(err)
	}
	if _, auth := w.in.seen(); auth != "Bearer "+ph {
		t.Errorf("plain HTTP saw %q", auth)
	}

	// A request for another Host on the intercepted connection is refused.
	c, err := dialIn(w.sb.att.NetnsPath, "tcp", w.httpsAddr().String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "api.egress.test", RootCAs: runtimeRoots})
	defer tc.Close()
	if code, _, err := rawHTTP(tc, bufio.NewReader(tc), "www.site.test"); err != nil || code != http.StatusMisdirectedRequest {
		t.Errorf("other Host on the intercepted connection: %d %v", code, err)
	}

	// Placeholders are stable for a sandbox.
	env2, _ := w.m.SetSecrets(w.sb.att.SandboxID, []Secret{{Name: "API_KEY", Value: value, Hosts: []string{"api.egress.test"}}})
	if env2["API_KEY"] != ph {
		t.Error("placeholder changed")
	}
}
