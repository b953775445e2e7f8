// Package policy holds a sandbox's network policy: what it says, how it is
// checked, and how a destination (a name or an address) is matched against it.
//
// A policy is one of three modes:
//
//   - {internet: false} with no allow list: no way out at all (the default).
//   - {internet: false, allow: [...]}: only the names, wildcards and CIDRs on
//     the allow list, minus anything on the deny list.
//   - {internet: true}: any public destination, minus the deny list.
//
// Whatever the policy, a Guard refuses private, loopback, link-local, CGNAT,
// multicast and metadata addresses, and every address of the host's own
// interfaces: an allowed name that resolves to one of them is still refused
// (DNS rebinding, /etc/hosts tricks).
package policy

import (
	"fmt"
	"net/netip"
	"strings"
)

// MaxEntries caps the allow and deny lists (each).
const MaxEntries = 1000

// Policy is a sandbox's network policy as the API carries it.
type Policy struct {
	// Internet allows every public destination not on Deny.
	Internet bool `json:"internet"`
	// Allow lists what a sandbox without Internet may reach: host names
	// ("api.example.com"), wildcards ("*.example.org": every subdomain, not
	// the apex itself), IP addresses and CIDRs ("203.0.113.0/24").
	Allow []string `json:"allow,omitempty"`
	// Deny lists exceptions, in the same forms; deny wins over allow.
	Deny []string `json:"deny,omitempty"`
}

// None reports whether the policy lets nothing out.
func (p Policy) None() bool { return !p.Internet && len(p.Allow) == 0 }

// Matcher is a checked, compiled policy. It is immutable and safe for
// concurrent use.
type Matcher struct {
	policy   Policy // normalized
	internet bool
	allow    entries
	deny     entries
}

type entries struct {
	names    map[string]bool // exact names
	suffixes []string        // ".example.org" for "*.example.org"
	nets     []netip.Prefix
}

func (e *entries) matchName(name string) bool {
	if e.names[name] {
		return true
	}
	for _, s := range e.suffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

func (e *entries) matchAddr(a netip.Addr) bool {
	for _, p := range e.nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Compile checks a policy and compiles it. Errors name the offending entry
// and say what is expected. A non-nil guard also refuses allow entries that
// only cover addresses no sandbox may ever reach (such as 10.0.0.0/8).
func Compile(p Policy, g *Guard) (*Matcher, error) {
	if len(p.Allow) > MaxEntries {
		return nil, fmt.Errorf("allow: %d entries, at most %d", len(p.Allow), MaxEntries)
	}
	if len(p.Deny) > MaxEntries {
		return nil, fmt.Errorf("deny: %d entries, at most %d", len(p.Deny), MaxEntries)
	}
	if p.Internet && len(p.Allow) > 0 {
		return nil, fmt.Errorf("allow has no effect with internet: true (everything public is allowed); list exceptions in deny instead")
	}
	if !p.Internet && len(p.Allow) == 0 && len(p.Deny) > 0 {
		return nil, fmt.Errorf("deny needs internet: true or an allow list: with neither, nothing is reachable anyway")
	}
	m := &Matcher{internet: p.Internet, policy: Policy{Internet: p.Internet}}
	var err error
	if m.allow, m.policy.Allow, err = compileList("allow", p.Allow, g); err != nil {
		return nil, err
	}
	if m.deny, m.policy.Deny, err = compileList("deny", p.Deny, nil); err != nil {
		return nil, err
	}
	return m, nil
}

// Normalize checks a policy and returns its canonical form (lower case,
// duplicates removed, single addresses as written), the form to store and
// read back.
func Normalize(p Policy, g *Guard) (Policy, error) {
	m, err := Compile(p, g)
	if err != nil {
		return Policy{}, err
	}
	return m.Policy(), nil
}

func compileList(field string, list []string, g *Guard) (entries, []string, error) {
	e := entries{names: map[string]bool{}}
	var norm []string
	seen := map[string]bool{}
	for i, raw := range list {
		s := strings.TrimSpace(raw)
		kind, val, err := parseEntry(s)
		if err != nil {
			return entries{}, nil, fmt.Errorf("%s[%d] %q: %w", field, i, raw, err)
		}
		switch kind {
		case kindName:
			e.names[val] = true
		case kindWildcard:
			e.suffixes = append(e.suffixes, val[1:]) // "*.example.org" -> ".example.org"
		case kindNet:
			pfx := netip.MustParsePrefix(val)
			if g != nil && g.CoversOnlyBlocked(pfx) {
				return entries{}, nil, fmt.Errorf("%s[%d] %q: private, loopback, link-local, CGNAT, multicast and metadata addresses are never reachable from a sandbox", field, i, raw)
			}
			e.nets = append(e.nets, pfx)
			if pfx.IsSingleIP() {
				val = pfx.Addr().String()
			}
		}
		if !seen[val] {
			seen[val] = true
			norm = append(norm, val)
		}
	}
	return e, norm, nil
}

type entryKind int

const (
	kindName entryKind = iota
	kindWildcard
	kindNet
)

// parseEntry classifies one list entry and returns its canonical text.
func parseEntry(s string) (entryKind, string, error) {
	if s == "" {
		return 0, "", fmt.Errorf("empty entry")
	}
	if s == "*" {
		return 0, "", fmt.Errorf(`"*" is not a pattern: use internet: true to allow everything`)
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@") && !looksLikeCIDR(s) {
		return 0, "", fmt.Errorf("expected a host name, *.domain, an IP address or a CIDR, not a URL")
	}
	if looksLikeCIDR(s) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return 0, "", fmt.Errorf("not a valid CIDR: %w", err)
		}
		if p.Addr().Zone() != "" {
			return 0, "", fmt.Errorf("zones are not allowed")
		}
		if p.Masked() != p {
			return 0, "", fmt.Errorf("host bits are set; did you mean %s?", p.Masked())
		}
		return kindNet, p.String(), nil
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); err == nil {
		if a.Zone() != "" {
			return 0, "", fmt.Errorf("zones are not allowed")
		}
		a = a.Unmap()
		return kindNet, netip.PrefixFrom(a, a.BitLen()).String(), nil
	}
	if strings.Contains(s, ":") {
		return 0, "", fmt.Errorf("ports are not part of an entry: give the host name alone (80 and 443 are allowed)")
	}
	if strings.HasPrefix(s, "*.") {
		name, err := NormalizeName(s[2:])
		if err != nil {
			return 0, "", err
		}
		if !strings.Contains(name, ".") {
			return 0, "", fmt.Errorf("a wildcard needs a domain of at least two labels (*.example.org), not a top-level domain")
		}
		return kindWildcard, "*." + name, nil
	}
	if strings.Contains(s, "*") {
		return 0, "", fmt.Errorf("a wildcard is allowed only as the first label: *.example.org")
	}
	if strings.HasPrefix(s, ".") {
		return 0, "", fmt.Errorf("write subdomain wildcards as *.example.org")
	}
	name, err := NormalizeName(s)
	if err != nil {
		return 0, "", err
	}
	return kindName, name, nil
}

func looksLikeCIDR(s string) bool {
	i := strings.IndexByte(s, '/')
	if i < 0 {
		return false
	}
	_, err := netip.ParseAddr(s[:i])
	return err == nil
}

// NormalizeName checks a DNS host name and returns it in lower case without
// a trailing dot. Internationalized names must be given in their ASCII
// (xn--) form. A name whose last label is all digits is refused: it would
// read as an IP address to some resolvers.
func NormalizeName(s string) (string, error) {
	name := strings.ToLower(strings.TrimSuffix(s, "."))
	if name == "" {
		return "", fmt.Errorf("empty host name")
	}
	if len(name) > 253 {
		return "", fmt.Errorf("host name longer than 253 characters")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" {
			return "", fmt.Errorf("host name has an empty label")
		}
		if len(l) > 63 {
			return "", fmt.Errorf("host name label longer than 63 characters")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", fmt.Errorf("host name label %q starts or ends with '-'", l)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				if c >= 0x80 {
					return "", fmt.Errorf("host name has non-ASCII characters: give its xn-- (punycode) form")
				}
				return "", fmt.Errorf("host name has invalid character %q", c)
			}
		}
	}
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" {
		return "", fmt.Errorf("not a host name (all-numeric last label) and not a valid IP address")
	}
	return name, nil
}

// Policy returns the normalized policy the matcher was compiled from.
func (m *Matcher) Policy() Policy {
	p := m.policy
	p.Allow = append([]string(nil), p.Allow...)
	p.Deny = append([]string(nil), p.Deny...)
	return p
}

// None reports whether nothing is reachable.
func (m *Matcher) None() bool { return m.policy.None() }

// AllowName reports whether a host name (any case, trailing dot or not) may
// be resolved and connected to. A name that is an IP address literal is
// matched as an address.
func (m *Matcher) AllowName(host string) bool {
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
		return m.AllowAddr(a)
	}
	name, err := NormalizeName(host)
	if err != nil {
		return false
	}
	if m.deny.matchName(name) {
		return false
	}
	return m.internet || m.allow.matchName(name)
}

// AllowAddr reports whether an address given directly (an IP literal, with
// no name) may be connected to. The Guard is checked separately.
func (m *Matcher) AllowAddr(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	if m.deny.matchAddr(a) {
		return false
	}
	return m.internet || m.allow.matchAddr(a)
}

// DenyAddr reports whether an address is on the deny list. It applies to
// the addresses an allowed name resolves to.
func (m *Matcher) DenyAddr(a netip.Addr) bool {
	return m.deny.matchAddr(a.Unmap().WithZone(""))
}
