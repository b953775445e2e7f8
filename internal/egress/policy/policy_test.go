package policy

import (
	"errors"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCompileErrors(t *testing.T) {
	g := NewGuard()
	cases := []struct {
		p    Policy
		want string
	}{
		{Policy{Allow: []string{""}}, "empty entry"},
		{Policy{Allow: []string{"*"}}, "internet: true"},
		{Policy{Allow: []string{"https://api.example.com/v1"}}, "not a URL"},
		{Policy{Allow: []string{"api.example.com:443"}}, "ports are not part"},
		{Policy{Allow: []string{"api.*.example.com"}}, "only as the first label"},
		{Policy{Allow: []string{"*.com"}}, "top-level domain"},
		{Policy{Allow: []string{".example.com"}}, "*.example.org"},
		{Policy{Allow: []string{"exa mple.com"}}, "invalid character"},
		{Policy{Allow: []string{"bücher.example"}}, "punycode"},
		{Policy{Allow: []string{"-bad.example.com"}}, "starts or ends"},
		{Policy{Allow: []string{"a..b"}}, "empty label"},
		{Policy{Allow: []string{"127.1"}}, "all-numeric"},
		{Policy{Allow: []string{"203.0.113.5/24"}}, "did you mean 203.0.113.0/24"},
		{Policy{Allow: []string{"203.0.113.0/33"}}, "not a valid CIDR"},
		{Policy{Allow: []string{"10.0.0.0/8"}}, "never reachable"},
		{Policy{Allow: []string{"169.254.169.254"}}, "never reachable"},
		{Policy{Allow: []string{"::1"}}, "never reachable"},
		{Policy{Allow: []string{strings.Repeat("a", 64) + ".example.com"}}, "longer than 63"},
		{Policy{Internet: true, Allow: []string{"a.example.com"}}, "exceptions in deny"},
		{Policy{Deny: []string{"a.example.com"}}, "deny needs"},
		{Policy{Allow: make([]string, MaxEntries+1)}, "at most"},
	}
	for _, c := range cases {
		_, err := Compile(c.p, g)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Compile(%+v) = %v, want error containing %q", c.p, err, c.want)
		}
	}
}

func TestNormalize(t *testing.T) {
	got, err := Normalize(Policy{
		Allow: []string{"API.Example.COM.", "*.Example.org", "203.0.113.0/24", "198.51.100.7", "api.example.com", "2001:db8::/32", "[2001:db8::1]"},
		Deny:  []string{"Secret.Example.org"},
	}, NewGuard())
	if err != nil {
		t.Fatal(err)
	}
	want := Policy{
		Allow: []string{"api.example.com", "*.example.org", "203.0.113.0/24", "198.51.100.7", "2001:db8::/32", "2001:db8::1"},
		Deny:  []string{"secret.example.org"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Normalize = %+v, want %+v", got, want)
	}
	// The normalized form compiles to itself.
	again, err := Normalize(got, NewGuard())
	if err != nil || !reflect.DeepEqual(again, want) {
		t.Fatalf("Normalize twice = %+v, %v", again, err)
	}
}

func TestMatchAllowList(t *testing.T) {
	m, err := Compile(Policy{
		Allow: []string{"api.example.com", "*.example.org", "203.0.113.0/24"},
		Deny:  []string{"secret.example.org", "203.0.113.66"},
	}, NewGuard())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{
		"api.example.com":      true,
		"API.EXAMPLE.COM.":     true,
		"example.com":          false,
		"x.api.example.com":    false,
		"www.example.org":      true,
		"a.b.example.org":      true,
		"example.org":          false, // a wildcard does not cover the apex
		"evilexample.org":      false,
		"secret.example.org":   false, // deny wins
		"x.secret.example.org": true,  // deny is exact
		"203.0.113.9":          true,  // literal matched as an address
		"203.0.113.66":         false,
		"198.51.100.1":         false,
		"[2001:db8::1]":        false,
		"bad name":             false,
		"":                     false,
	}
	for n, want := range names {
		if got := m.AllowName(n); got != want {
			t.Errorf("AllowName(%q) = %v, want %v", n, got, want)
		}
	}
	if m.None() {
		t.Error("None() = true for an allow list")
	}
	if !m.DenyAddr(netip.MustParseAddr("::ffff:203.0.113.66")) {
		t.Error("DenyAddr of a mapped denied address = false")
	}
}

func TestMatchInternetAndNone(t *testing.T) {
	inet, err := Compile(Policy{Internet: true, Deny: []string{"*.ads.example", "198.51.100.0/24"}}, NewGuard())
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string]bool{
		"anything.example.net": true,
		"x.ads.example":        false,
		"198.51.100.3":         false,
		"192.0.2.1":            true,
	} {
		if got := inet.AllowName(n); got != want {
			t.Errorf("internet: AllowName(%q) = %v, want %v", n, got, want)
		}
	}
	none, err := Compile(Policy{}, NewGuard())
	if err != nil {
		t.Fatal(err)
	}
	if !none.None() || none.AllowName("example.com") || none.AllowAddr(netip.MustParseAddr("192.0.2.1")) {
		t.Error("the empty policy lets something out")
	}
}

// stubGuard is NewGuard with the host's addresses read from read instead of
// the host's interfaces.
func stubGuard(read func() ([]netip.Addr, error), ttl time.Duration, exempt ...netip.Prefix) *Guard {
	g := NewGuard(exempt...)
	g.host = &hostAddrs{read: read, ttl: ttl}
	return g
}

func noHostAddrs() ([]netip.Addr, error) { return nil, nil }

func TestGuard(t *testing.T) {
	// The fixed ranges, on a host with no addresses of its own (so that the
	// table holds whatever host this runs on).
	g := stubGuard(noHostAddrs, time.Hour)
	for s, want := range map[string]bool{
		"10.1.2.3":               true,
		"127.0.0.1":              true,
		"169.254.169.254":        true,
		"100.64.0.1":             true,
		"172.16.5.4":             true,
		"192.168.1.1":            true,
		"0.0.0.0":                true,
		"224.0.0.1":              true,
		"255.255.255.255":        true,
		"198.18.0.10":            true,
		"::1":                    true,
		"::ffff:127.0.0.1":       true,
		"::ffff:10.0.0.1":        true,
		"fe80::1":                true,
		"fd00:ec2::254":          true,
		"64:ff9b::a00:1":         true,
		"93.184.215.14":          false,
		"203.0.113.5":            false,
		"2606:2800:21f:cb07::1":  false,
		"2001:4860:4860::8888":   false,
		"2002:a00:1::1":          true,
		"fe80::1%eth0":           true,
		"1.1.1.1":                false,
		"::ffff:93.184.215.14":   false,
		"2001:db8::1":            false,
		"100.63.255.255":         false,
		"100.128.0.0":            false,
		"172.32.0.1":             false,
		"192.169.0.1":            false,
		"9.255.255.255":          false,
		"11.0.0.0":               false,
		"126.255.255.255":        false,
		"128.0.0.0":              false,
		"169.253.255.255":        false,
		"198.20.0.0":             false,
		"223.255.255.255":        false,
		"2001:4860::1":           false,
		"fbff:ffff:ffff::1":      false,
		"fec0::1":                true,
		"ff02::1":                true,
		"64:ff9b:1::1":           true,
		"100::1":                 true,
		"2001:0:4136:e378::1":    true,
		"192.88.99.1":            true,
		"192.0.0.170":            true,
		"240.0.0.1":              true,
		"::":                     true,
		"0.1.2.3":                true,
		"198.19.255.255":         true,
		"198.17.255.255":         false,
		"2001:db8:ffff::1":       false,
		"2620:fe::fe":            false,
		"::ffff:169.254.169.254": true,
	} {
		if got := g.Blocked(netip.MustParseAddr(s)); got != want {
			t.Errorf("Blocked(%s) = %v, want %v", s, got, want)
		}
	}
	if !g.Blocked(netip.Addr{}) {
		t.Error("the invalid address is not blocked")
	}
	ex := stubGuard(noHostAddrs, time.Hour, netip.MustParsePrefix("198.18.0.0/15"))
	if ex.Blocked(netip.MustParseAddr("198.18.3.4")) || !ex.Blocked(netip.MustParseAddr("10.0.0.1")) {
		t.Error("exemption not applied exactly")
	}
	if ex.CoversOnlyBlocked(netip.MustParsePrefix("198.18.0.0/24")) || !ex.CoversOnlyBlocked(netip.MustParsePrefix("10.1.0.0/16")) {
		t.Error("CoversOnlyBlocked with exemption is wrong")
	}
	if g.CoversOnlyBlocked(netip.MustParsePrefix("0.0.0.0/0")) {
		t.Error("0.0.0.0/0 covers public addresses too")
	}
	var nilGuard *Guard
	if nilGuard.Blocked(netip.MustParseAddr("10.0.0.1")) {
		t.Error("a nil guard blocks")
	}
}

// hostIfAddrs reads the host's interface addresses the way the test sees
// them, independently of the guard's own reader.
func hostIfAddrs(t *testing.T) []netip.Addr {
	t.Helper()
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []netip.Addr
	for _, ia := range ifAddrs {
		ipn, ok := ia.(*net.IPNet)
		if !ok {
			continue
		}
		a, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		out = append(out, a.Unmap())
	}
	if len(out) == 0 {
		t.Fatal("the host has no interface addresses")
	}
	return out
}

func TestGuardRefusesHostAddrs(t *testing.T) {
	host := hostIfAddrs(t)
	isHost := map[netip.Addr]bool{}
	for _, a := range host {
		isHost[a] = true
	}
	everything := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	for _, g := range []*Guard{NewGuard(), NewGuard(everything...)} {
		for _, a := range host {
			// Whatever the range (public, documentation, private) and
			// even where an exemption covers it.
			if !g.Blocked(a) {
				t.Errorf("host address %s is not blocked (exempt %v)", a, g.exempt)
			}
			if a.Is4() && !g.Blocked(netip.AddrFrom16(a.As16())) {
				t.Errorf("host address %s, IPv4-mapped, is not blocked", a)
			}
		}
	}
	// Addresses that are not the host's stay reachable, in public and
	// documentation ranges and in an exempt range.
	allowed := 0
	for _, s := range []string{"93.184.215.14", "1.1.1.1", "203.0.113.5", "192.0.2.123", "2606:2800:21f:cb07::1", "2001:db8::77"} {
		a := netip.MustParseAddr(s)
		if isHost[a] {
			continue
		}
		allowed++
		if NewGuard().Blocked(a) {
			t.Errorf("%s (not a host address) is blocked", a)
		}
	}
	if allowed == 0 {
		t.Fatal("every candidate is a host address")
	}
	for _, s := range []string{"198.18.200.9", "198.19.0.77"} {
		if a := netip.MustParseAddr(s); !isHost[a] && NewGuard(netip.MustParsePrefix("198.18.0.0/15")).Blocked(a) {
			t.Errorf("%s (exempt, not a host address) is blocked", a)
		}
	}
	// Validation does not depend on the host's addresses (they change):
	// an allow entry for one is accepted, and refused when connecting.
	for _, a := range host {
		inRanges := false
		for _, p := range blockedPrefixes {
			inRanges = inRanges || p.Contains(a)
		}
		if !inRanges && NewGuard().CoversOnlyBlocked(netip.PrefixFrom(a, a.BitLen())) {
			t.Errorf("CoversOnlyBlocked(%s) depends on the host's addresses", a)
		}
	}
}

func TestGuardHostAddrsRefresh(t *testing.T) {
	var (
		mu    sync.Mutex
		addrs = []netip.Addr{netip.MustParseAddr("192.0.2.10")}
		fail  error
		reads int
	)
	read := func() ([]netip.Addr, error) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		return append([]netip.Addr(nil), addrs...), fail
	}
	set := func(a []netip.Addr, err error) {
		mu.Lock()
		addrs, fail = a, err
		mu.Unlock()
	}
	const ttl = 50 * time.Millisecond
	g := stubGuard(read, ttl, netip.MustParsePrefix("198.18.0.0/15"))
	a1, a2 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("198.18.0.1")
	if !g.Blocked(a1) || g.Blocked(a2) {
		t.Fatal("first read not applied")
	}
	// A new address (here inside the exempt range: the host's own
	// addresses are refused all the same) is refused after the TTL, and
	// the address that went away is allowed again.
	set([]netip.Addr{a2}, nil)
	time.Sleep(2 * ttl)
	if g.Blocked(a1) || !g.Blocked(a2) {
		t.Error("the new addresses are not applied after the TTL")
	}
	// Within the TTL, checks share one read, however many run at once.
	mu.Lock()
	reads = 0
	mu.Unlock()
	time.Sleep(2 * ttl)
	start := time.Now()
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if !g.Blocked(a2) {
					t.Error("host address allowed")
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	mu.Lock()
	n := reads
	mu.Unlock()
	if n < 1 || n > int(elapsed/ttl)+1 {
		t.Errorf("%d reads for 3200 checks in %v, want at most one per %v", n, elapsed, ttl)
	}
	// A failed read refuses everything until a read succeeds again.
	set(nil, errors.New("netlink: boom"))
	time.Sleep(2 * ttl)
	if !g.Blocked(netip.MustParseAddr("1.1.1.1")) {
		t.Error("a failed read does not fail closed")
	}
	set([]netip.Addr{a2}, nil)
	time.Sleep(2 * ttl)
	if g.Blocked(netip.MustParseAddr("1.1.1.1")) {
		t.Error("still refusing after a successful read")
	}
	// The zero Guard checks nothing, the host's addresses included.
	var zero Guard
	if zero.Blocked(a1) {
		t.Error("the zero Guard blocks")
	}
}
