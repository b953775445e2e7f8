package egress

import (
	"sync"
	"time"
)

// limitLog counts one sandbox's refusals per limit, for a log line at most
// every LimitLogEvery per limit.
type limitLog struct {
	mu     sync.Mutex
	counts map[string]int
	logged map[string]time.Time
}

// add counts one refusal for limit and returns how many to report now
// (those since the last line), or 0 while the last line is recent.
func (l *limitLog) add(limit string, now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts, l.logged = map[string]int{}, map[string]time.Time{}
	}
	l.counts[limit]++
	if now.Sub(l.logged[limit]) < LimitLogEvery {
		return 0
	}
	n := l.counts[limit]
	l.counts[limit], l.logged[limit] = 0, now
	return n
}

// limited records a connection or query of sb refused for limit: counted by
// Config.Limited, logged rate-limited.
func (m *Manager) limited(sb *sandbox, limit string) {
	if m.cfg.Limited != nil {
		m.cfg.Limited(limit)
	}
	n := sb.limited.add(limit, time.Now())
	if n == 0 {
		return
	}
	key := *sb.tenant.Load()
	if limit == LimitDNS {
		m.log.Warn("egress: DNS queries over the sandbox's rate dropped", "sandbox", sb.id, "key", key,
			"dropped", n, "ratePerSecond", m.cfg.DNSRate, "burst", m.cfg.DNSBurst)
		return
	}
	share := map[string]int{"sandbox": m.cfg.ProxyConnsPerSandbox, "key": m.cfg.ProxyConnsPerKey, "server": m.cfg.MaxProxyConns}[limit]
	m.log.Warn("egress: connections over a share reset", "sandbox", sb.id, "key", key,
		"limit", limit, "share", share, "reset", n, "keyInUse", m.slots.KeyInUse(key), "serverInUse", m.slots.InUse())
}

// tenantOf asks Config.Tenant for the key sandbox id belongs to.
func (m *Manager) tenantOf(id string) string {
	if m.cfg.Tenant == nil {
		return ""
	}
	return m.cfg.Tenant(id)
}
