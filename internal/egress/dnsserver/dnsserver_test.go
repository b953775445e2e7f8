package dnsserver

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"withruntime.dev/runtime/internal/egress/policy"
)

// mapResolver answers from a map and records every name it was asked.
type mapResolver struct {
	mu    sync.Mutex
	addrs map[string][]netip.Addr
	asked []string
}

func (r *mapResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	a, ok := r.addrs[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return a, nil
}

func (r *mapResolver) askedNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}

func startServer(t *testing.T, pol *atomic.Pointer[policy.Matcher], res Resolver) string {
	t.Helper()
	// UDP and TCP on the same port, as a DNS server is; retry when another
	// process holds the TCP port.
	var pc net.PacketConn
	var l net.Listener
	for i := 0; ; i++ {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if l, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		if i == 20 {
			t.Fatal(err)
		}
	}
	h := &Handler{Policy: pol.Load, Resolver: res, Guard: policy.NewGuard()}
	s, err := Start(pc, l, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return pc.LocalAddr().String()
}

func mustMatcher(t *testing.T, p policy.Policy) *policy.Matcher {
	t.Helper()
	m, err := policy.Compile(p, policy.NewGuard())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func query(t *testing.T, addr, netw, name string, qtype uint16) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: netw}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.SetEdns0(1232, false)
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("query %s %s over %s: %v", name, dns.TypeToString[qtype], netw, err)
	}
	return r
}

func TestAnswersOnlyAllowedNames(t *testing.T) {
	res := &mapResolver{addrs: map[string][]netip.Addr{
		"api.example.com":    {netip.MustParseAddr("203.0.113.14"), netip.MustParseAddr("2606:2800:21f:cb07::1")},
		"www.example.org":    {netip.MustParseAddr("203.0.113.15")},
		"rebind.example.org": {netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("169.254.169.254")},
		"mixed.example.org":  {netip.MustParseAddr("192.168.1.1"), netip.MustParseAddr("203.0.113.16")},
		"other.example.net":  {netip.MustParseAddr("203.0.113.17")},
	}}
	var pol atomic.Pointer[policy.Matcher]
	pol.Store(mustMatcher(t, policy.Policy{Allow: []string{"api.example.com", "*.example.org", "198.51.100.0/24"}}))
	addr := startServer(t, &pol, res)

	for _, netw := range []string{"udp", "tcp"} {
		r := query(t, addr, netw, "API.example.com", dns.TypeA)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "203.0.113.14" {
			t.Fatalf("%s: allowed name answer = %v", netw, r)
		}
	}
	if r := query(t, addr, "udp", "api.example.com", dns.TypeAAAA); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
		t.Errorf("AAAA of an allowed name = %v, want an empty NOERROR", r)
	}
	if r := query(t, addr, "udp", "rebind.example.org", dns.TypeA); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
		t.Errorf("allowed name with only private addresses = %v, want no answers", r)
	}
	if r := query(t, addr, "udp", "mixed.example.org", dns.TypeA); len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "203.0.113.16" {
		t.Errorf("mixed answer = %v, want only the public address", r)
	}
	if r := query(t, addr, "udp", "nosuch.example.org", dns.TypeA); r.Rcode != dns.RcodeNameError {
		t.Errorf("allowed but nonexistent name: rcode %s", dns.RcodeToString[r.Rcode])
	}

	before := len(res.askedNames())
	for _, n := range []string{"other.example.net", "example.org", "evil.com", "198.51.100.1", "1.0.0.127.in-addr.arpa"} {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT, dns.TypeMX} {
			if r := query(t, addr, "udp", n, qt); r.Rcode != dns.RcodeNameError || len(r.Answer) != 0 {
				t.Errorf("%s %s = %v, want NXDOMAIN", n, dns.TypeToString[qt], r)
			}
		}
	}
	if got := res.askedNames()[before:]; len(got) != 0 {
		t.Errorf("names not allowed were looked up upstream: %v", got)
	}

	// A policy change applies to the next query.
	pol.Store(mustMatcher(t, policy.Policy{}))
	if r := query(t, addr, "udp", "api.example.com", dns.TypeA); r.Rcode != dns.RcodeNameError {
		t.Errorf("after switching to no network: %v", r)
	}
	pol.Store(mustMatcher(t, policy.Policy{Internet: true, Deny: []string{"www.example.org"}}))
	if r := query(t, addr, "tcp", "other.example.net", dns.TypeA); len(r.Answer) != 1 {
		t.Errorf("internet: true: %v", r)
	}
	if r := query(t, addr, "udp", "www.example.org", dns.TypeA); r.Rcode != dns.RcodeNameError {
		t.Errorf("denied name under internet: true: %v", r)
	}
}

func TestNilPolicyRefusesAll(t *testing.T) {
	res := &mapResolver{addrs: map[string][]netip.Addr{"a.example.com": {netip.MustParseAddr("203.0.113.14")}}}
	var pol atomic.Pointer[policy.Matcher]
	addr := startServer(t, &pol, res)
	if r := query(t, addr, "udp", "a.example.com", dns.TypeA); r.Rcode != dns.RcodeNameError {
		t.Fatalf("no policy: %v", r)
	}
	if len(res.askedNames()) != 0 {
		t.Fatal("a query went upstream without a policy")
	}
}
