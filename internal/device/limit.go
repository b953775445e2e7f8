package device

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/errs"
)

// Authorize needs no key, so anyone may call it, and each call holds a row
// until its code expires. It is bounded three ways (Config):
//
//   - in total, by the logins waiting at once (MaxLive, counted in the
//     store: servers sharing a store share it);
//   - per client address (MaxPerAddress): the logins started from one IPv4
//     address, or one IPv6 /64 (what one host is usually given), within
//     ExpiresIn;
//   - per client network (MaxPerNetwork): the same for an IPv4 /24 or an
//     IPv6 /48 (what one site is usually given), so that a host with many
//     addresses is still one client.
//
// The per-client caps are well below the total, so one address (or one
// network) can take at most a small share of the pool and never block
// logins from elsewhere: with the defaults, exhausting the pool takes
// logins from 20 networks. A client over its cap gets errs.RateLimited
// (429) with the wait until its oldest login leaves the window; a full
// pool gets errs.Capacity (503).
//
// The client's address is the caller's to give (AuthorizeParams.Client):
// the API gives the TCP peer's, never a header, unless the server trusts
// the peer as a reverse proxy (serve --trusted-proxy). The per-client
// counts are this server's own, in memory: servers sharing a store each
// allow a client its share.

// Defaults of the Authorize limits.
const (
	// DefaultMaxLive caps the device logins waiting at once.
	DefaultMaxLive = 1000
	// DefaultMaxPerAddress caps the logins one client address (IPv4
	// address, IPv6 /64) starts within ExpiresIn.
	DefaultMaxPerAddress = 10
	// DefaultMaxPerNetwork caps the logins one client network (IPv4 /24,
	// IPv6 /48) starts within ExpiresIn.
	DefaultMaxPerNetwork = 50
)

// Client prefixes: one address, one network.
const (
	v4Address, v4Network = 32, 24
	v6Address, v6Network = 64, 48
)

// clientPrefixes gives the address and network a client is counted under.
// An invalid address (the caller knows none) is one client of its own.
func clientPrefixes(a netip.Addr) (addr, network netip.Prefix) {
	a = a.Unmap()
	if !a.IsValid() {
		return netip.Prefix{}, netip.Prefix{}
	}
	a = a.WithZone("")
	if a.Is4() {
		addr, _ = a.Prefix(v4Address)
		network, _ = a.Prefix(v4Network)
		return addr, network
	}
	addr, _ = a.Prefix(v6Address)
	network, _ = a.Prefix(v6Network)
	return addr, network
}

// describe names a client prefix in a message.
func describe(p netip.Prefix) string {
	if !p.IsValid() {
		return "clients whose address the server does not know"
	}
	if p.IsSingleIP() {
		return "the address " + p.Addr().String()
	}
	return "the network " + p.String()
}

// clientLimiter counts the logins each client address and network started
// within a window. Safe for concurrent use. It holds one time per login
// started within the window (at most MaxLive plus approvals in a window),
// swept as they age out.
type clientLimiter struct {
	window                 time.Duration
	perAddress, perNetwork int
	mu                     sync.Mutex
	addresses, networks    map[netip.Prefix][]time.Time
	lastSweep              time.Time
}

func newClientLimiter(window time.Duration, perAddress, perNetwork int) *clientLimiter {
	return &clientLimiter{window: window, perAddress: perAddress, perNetwork: perNetwork,
		addresses: map[netip.Prefix][]time.Time{}, networks: map[netip.Prefix][]time.Time{}}
}

// reserve counts a login from client at now, or refuses it with
// errs.RateLimited if its address or network already started its share
// within the window. release gives the place back (the login was not
// made after all).
func (l *clientLimiter) reserve(client netip.Addr, now time.Time) (release func(), err error) {
	addr, network := clientPrefixes(client)
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > time.Minute {
		l.sweep(now)
	}
	for _, c := range []struct {
		m     map[netip.Prefix][]time.Time
		p     netip.Prefix
		limit int
		name  string
	}{
		{l.addresses, addr, l.perAddress, "per-address"},
		{l.networks, network, l.perNetwork, "per-network"},
	} {
		times := recent(c.m[c.p], now, l.window)
		c.m[c.p] = times
		if len(times) >= c.limit {
			wait := oldest(times).Add(l.window).Sub(now)
			return nil, errs.Retry(errs.RateLimited, wait,
				"%d device logins were started from %s in the last %s, the most device login's %s limit allows; try again in %d s "+
					"(behind a reverse proxy every client has the proxy's address unless the server trusts it: serve --trusted-proxy)",
				len(times), describe(c.p), shortDuration(l.window), c.name, int64((wait+time.Second-1)/time.Second))
		}
	}
	l.addresses[addr] = append(l.addresses[addr], now)
	l.networks[network] = append(l.networks[network], now)
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.addresses[addr] = without(l.addresses[addr], now)
		l.networks[network] = without(l.networks[network], now)
	}, nil
}

// sweep drops what aged out of the window, and clients left with nothing.
func (l *clientLimiter) sweep(now time.Time) {
	l.lastSweep = now
	for _, m := range []map[netip.Prefix][]time.Time{l.addresses, l.networks} {
		for p, times := range m {
			if times = recent(times, now, l.window); len(times) == 0 {
				delete(m, p)
			} else {
				m[p] = times
			}
		}
	}
}

// recent is times without those older than window.
func recent(times []time.Time, now time.Time, window time.Duration) []time.Time {
	out := times[:0]
	for _, t := range times {
		if now.Before(t.Add(window)) {
			out = append(out, t)
		}
	}
	return out
}

// oldest is the earliest of times (not empty).
func oldest(times []time.Time) time.Time {
	o := times[0]
	for _, t := range times[1:] {
		if t.Before(o) {
			o = t
		}
	}
	return o
}

// without is times with one t removed.
func without(times []time.Time, t time.Time) []time.Time {
	for i, x := range times {
		if x.Equal(t) {
			return append(times[:i:i], times[i+1:]...)
		}
	}
	return times
}

// shortDuration writes d as "10 min" or "45 s".
func shortDuration(d time.Duration) string {
	if d >= time.Minute && d%time.Minute == 0 {
		return fmt.Sprintf("%d min", int64(d/time.Minute))
	}
	return fmt.Sprintf("%d s", int64((d+time.Second-1)/time.Second))
}
