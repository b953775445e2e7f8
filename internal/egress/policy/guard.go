package policy

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// blockedPrefixes are the destinations no sandbox may reach, whatever its
// policy: this host, its networks, other sandboxes, cloud metadata services,
// multicast and the special-purpose ranges that are not the public internet.
// The documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
// 2001:db8::/32) are not blocked: nothing answers there and policies use them
// as examples. "This host" here is only loopback and the sandbox links: the
// host's other addresses, public or documentation ones included, are refused
// one by one as the Guard reads them from its interfaces (see Guard).
var blockedPrefixes = mustPrefixes(
	// IPv4
	"0.0.0.0/8",      // "this network"
	"10.0.0.0/8",     // private
	"100.64.0.0/10",  // CGNAT; also the sandbox links
	"127.0.0.0/8",    // loopback
	"169.254.0.0/16", // link-local, cloud metadata (169.254.169.254)
	"172.16.0.0/12",  // private
	"192.0.0.0/24",   // IETF protocol assignments
	"192.88.99.0/24", // 6to4 relay anycast
	"192.168.0.0/16", // private
	"198.18.0.0/15",  // benchmarking (tests exempt it for their fake internet)
	"224.0.0.0/4",    // multicast
	"240.0.0.0/4",    // reserved, broadcast
	// IPv6
	"::/128",         // unspecified
	"::1/128",        // loopback
	"::ffff:0:0/96",  // IPv4-mapped (addresses are unmapped before the check too)
	"64:ff9b::/96",   // NAT64: reaches IPv4 addresses, private ones included
	"64:ff9b:1::/48", // local-use NAT64
	"100::/64",       // discard
	"2001::/32",      // Teredo
	"2002::/16",      // 6to4: embeds IPv4 addresses
	"fc00::/7",       // unique local (fd00:ec2::254 is a metadata address)
	"fe80::/10",      // link-local
	"fec0::/10",      // site-local (deprecated)
	"ff00::/8",       // multicast
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// BlockedPrefixes returns the ranges a default Guard refuses.
func BlockedPrefixes() []netip.Prefix {
	return append([]netip.Prefix(nil), blockedPrefixes...)
}

// Guard refuses destination addresses that no sandbox may reach: the fixed
// blockedPrefixes and every address assigned to an interface of this host
// (its network namespace), whatever range that address is in. The proxy
// dials from the host, so without the second part a public or documentation
// address of the host itself (192.0.2.2 on eth0, say) would lead a sandbox
// to the host's own services on 80/443. The zero value and nil refuse
// nothing; use NewGuard.
type Guard struct {
	blocked []netip.Prefix
	exempt  []netip.Prefix
	host    *hostAddrs // nil: host addresses are not checked (zero Guard)
}

// NewGuard returns a Guard that refuses BlockedPrefixes except the exempt
// ranges, and the host's own addresses. Exemptions are for test networks
// (198.18.0.0/15, where tests put their fake internet) and for operators who
// mean it. An exemption never opens an address of the host itself: the
// tests' fake internet listens inside its own network namespace, on the peer
// end of a veth, and only the host end (its gateway) is a host address.
func NewGuard(exempt ...netip.Prefix) *Guard {
	return &Guard{
		blocked: blockedPrefixes,
		exempt:  append([]netip.Prefix(nil), exempt...),
		host:    &hostAddrs{read: interfaceAddrs, ttl: hostAddrsTTL},
	}
}

// Blocked reports whether a destination address is refused. Exempt ranges
// win over the fixed ranges but not over the host's own addresses.
func (g *Guard) Blocked(a netip.Addr) bool {
	if g == nil {
		return false
	}
	if !a.IsValid() {
		return true
	}
	a = a.Unmap().WithZone("")
	if g.host != nil && g.host.contains(a) {
		return true
	}
	for _, p := range g.exempt {
		if p.Contains(a) {
			return false
		}
	}
	for _, p := range g.blocked {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// CoversOnlyBlocked reports whether every address of a prefix is refused,
// so that an allow entry for it could never match anything. It looks at the
// fixed ranges only: the host's addresses change at runtime, and a policy
// must validate (and normalize) the same way whenever it is checked. An
// allow entry naming a host address is accepted and still refused at
// connection time by Blocked.
func (g *Guard) CoversOnlyBlocked(p netip.Prefix) bool {
	if g == nil {
		return false
	}
	p = p.Masked()
	for _, e := range g.exempt {
		if e.Overlaps(p) {
			return false
		}
	}
	for _, b := range g.blocked {
		if b.Bits() <= p.Bits() && b.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// hostAddrsTTL is how long a read of the host's addresses is trusted.
//
// Addresses change at runtime (DHCP, an interface added, a veth for every
// sandbox), so they are re-read rather than read once; but a read is a
// netlink dump of every address and link, growing with the number of
// sandbox veths, too much for every DNS answer and connection. A
// read is therefore reused for one second: a new host address is refused
// at most a second after it appears, and a busy server dumps at most once a
// second. Nothing is read while no sandbox connects or resolves, and the
// first check after an idle spell reads afresh, so a check never uses a
// read older than the TTL.
const hostAddrsTTL = time.Second

// hostAddrs caches the addresses of the host's interfaces. Checks load the
// current snapshot atomically (no lock on the hot path); a stale snapshot is
// replaced under mu by one caller while the others wait for it, so there is
// one read per TTL however many goroutines check at once, and no check
// proceeds on a snapshot older than the TTL.
type hostAddrs struct {
	read func() ([]netip.Addr, error)
	ttl  time.Duration

	mu  sync.Mutex // serializes refreshes
	cur atomic.Pointer[hostSnapshot]
}

type hostSnapshot struct {
	at    time.Time
	addrs map[netip.Addr]struct{}
	err   error
}

// contains reports whether a (unmapped, without zone) is an address of the
// host. When the addresses cannot be read it reports true for everything:
// the guard fails closed until a read succeeds (retried after the TTL).
func (h *hostAddrs) contains(a netip.Addr) bool {
	s := h.snapshot()
	if s.err != nil {
		return true
	}
	_, ok := s.addrs[a]
	return ok
}

func (h *hostAddrs) snapshot() *hostSnapshot {
	if s := h.cur.Load(); s != nil && time.Since(s.at) < h.ttl {
		return s
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.cur.Load(); s != nil && time.Since(s.at) < h.ttl {
		return s // refreshed by another caller meanwhile
	}
	s := &hostSnapshot{at: time.Now()}
	addrs, err := h.read()
	if err != nil {
		s.err = err
	} else {
		s.addrs = make(map[netip.Addr]struct{}, len(addrs))
		for _, a := range addrs {
			s.addrs[a.Unmap().WithZone("")] = struct{}{}
		}
	}
	h.cur.Store(s)
	return s
}

// interfaceAddrs returns every address assigned to an interface of the
// host's network namespace (the one the calling thread is in: the server
// never runs the guard on a thread moved into a sandbox's namespace).
func interfaceAddrs() ([]netip.Addr, error) {
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(ifAddrs))
	for _, ia := range ifAddrs {
		var ip net.IP
		switch v := ia.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			continue
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}
