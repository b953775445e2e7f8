package policy

import (
	"net/netip"
)

// blockedPrefixes are the destinations no sandbox may reach, whatever its
// policy: this host, its networks, other sandboxes, cloud metadata services,
// multicast and the special-purpose ranges that are not the public internet.
// The documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
// 2001:db8::/32) are not blocked: nothing answers there and policies use them
// as examples.
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

// Guard refuses destination addresses that no sandbox may reach. The zero
// value and nil refuse nothing; use NewGuard.
type Guard struct {
	blocked []netip.Prefix
	exempt  []netip.Prefix
}

// NewGuard returns a Guard that refuses BlockedPrefixes except the exempt
// ranges. Exemptions are for test networks (198.18.0.0/15, where tests put
// their fake internet) and for operators who mean it.
func NewGuard(exempt ...netip.Prefix) *Guard {
	return &Guard{blocked: blockedPrefixes, exempt: append([]netip.Prefix(nil), exempt...)}
}

// Blocked reports whether a destination address is refused.
func (g *Guard) Blocked(a netip.Addr) bool {
	if g == nil {
		return false
	}
	if !a.IsValid() {
		return true
	}
	a = a.Unmap().WithZone("")
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
// so that an allow entry for it could never match anything.
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
