package itest

// Egress fairness between tenants (issue 25, N13 and N15): one key's
// sandboxes holding idle connections to their egress proxies must not take
// the pool every sandbox's proxy shares, and a sandbox's DNS flood is
// limited to its rate while another sandbox's DNS still answers. Traffic
// goes only to the test's fake internet (newFakeInternet) and loopback.

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/server"
)

// asTenant returns e acting with a new tenant key's secret (a key with a
// daily limit): create, exec and sh then run as that key.
func (e *env) asTenant(name string) *env {
	e.t.Helper()
	var k api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: name, DailyLimitMicros: 50_000_000}, &k)
	te := *e
	te.key = k.Secret
	return &te
}

// metricValue reads one sample of /metrics ("" labels: the first series).
func (e *env) metricValue(name, labels string) float64 {
	e.t.Helper()
	status, body := e.do("GET", "/metrics", nil)
	if status != http.StatusOK {
		e.t.Fatalf("/metrics: %d", status)
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+labels) + ` (\S+)$`)
	m := re.FindStringSubmatch(string(body))
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// holdConns is a program that keeps n connections open to host:80 without
// sending anything, for secs seconds, replacing those the proxy resets,
// and writes how many it opened in all to /tmp/held.
func holdConns(host string, n, secs int) string {
	return `python3 -c '
import socket, time
held, opened, end = [], 0, time.time() + ` + strconv.Itoa(secs) + `
while time.time() < end:
    alive = []
    for s in held:
        try:
            if s.recv(1, socket.MSG_DONTWAIT) == b"": s.close()
            else: alive.append(s)
        except BlockingIOError: alive.append(s)
        except OSError: s.close()
    held = alive
    for _ in range(min(40, ` + strconv.Itoa(n) + ` - len(held))):
        try:
            c = socket.create_connection(("` + host + `", 80), timeout=2); c.setblocking(False)
            held.append(c); opened += 1
        except OSError: break
    open("/tmp/held.tmp", "w").write(str(opened))
    time.sleep(0.5)
open("/tmp/held", "w").write(str(opened))'`
}

// TestEgressFairnessIdleConns: tenant A's three sandboxes hold as many idle
// connections to their proxies as they can (more than the server's total
// all together); tenant B's sandbox still reaches its allowed host every
// time, A's extra connections are reset at once (not a hang) and counted,
// and a connection that sends nothing is closed within a few seconds.
func TestEgressFairnessIdleConns(t *testing.T) {
	t.Parallel()
	in := newFakeInternet(t)
	// A total of 256: per key 64, per sandbox 64 (egress.DefaultShares).
	e := newEnv(t, withInternet(in), func(c *server.Config) { c.Egress.MaxProxyConns = 256 })
	allow := &api.NetworkPolicy{Allow: []string{inetAPI}}
	a, b := e.asTenant("tenant-a"), e.asTenant("tenant-b")
	var as []api.Sandbox
	for range 3 {
		as = append(as, a.create(api.CreateSandboxRequest{Network: allow}))
	}
	bs := b.create(api.CreateSandboxRequest{Network: allow})

	// An idle connection: reset by the proxy within a few seconds.
	idle := b.sh(bs.ID, `python3 -c '
import socket, time
s = socket.create_connection(("`+inetAPI+`", 80), timeout=5); s.settimeout(20); t = time.time()
try: s.recv(1)
except OSError: pass
print(round(time.time() - t, 1))'`)
	if secs, err := strconv.ParseFloat(strings.TrimSpace(idle.Stdout), 64); err != nil || secs > 7 {
		t.Errorf("an idle connection was closed after %q s (stderr %q), want within the proxy's 5 s", idle.Stdout, idle.Stderr)
	}

	for _, sb := range as {
		a.must(http.StatusCreated, "POST", "/v1/sandboxes/"+sb.ID+"/processes", agentapi.ExecRequest{Command: holdConns(inetAPI, 120, 20)}, nil)
	}
	waitFor(t, 15*time.Second, "tenant A's sandboxes to hold their connections", func() bool {
		for _, sb := range as {
			if out := a.sh(sb.ID, "cat /tmp/held.tmp 2>/dev/null").Stdout; out == "" || out == "0" {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * time.Second) // every sandbox has filled its share and keeps it
	probe := `for i in 1 2 3 4 5; do ` + curl("http://"+inetAPI+"/") + `; echo; sleep 0.5; done`
	if out := b.sh(bs.ID, probe).Stdout; strings.Count(out, "200") != 5 {
		t.Errorf("while tenant A held idle connections, tenant B's requests answered %q, want 5 × 200", out)
	}
	// A's own new connection is refused at once.
	start := time.Now()
	res := a.sh(as[0].ID, curl("http://"+inetAPI+"/"))
	if took := time.Since(start); res.ExitCode == 0 && strings.HasPrefix(res.Stdout, "200") {
		t.Logf("tenant A's extra connection was served (%q): its share had room", res.Stdout)
	} else if took > 3*time.Second {
		t.Errorf("tenant A's connection over its share took %s to fail (%q %q), want a reset at once", took, res.Stdout, res.Stderr)
	}
	if v := e.metricValue("withruntime_egress_limited_total", `{limit="key"}`); v <= 0 {
		t.Errorf("withruntime_egress_limited_total{limit=\"key\"} = %v, want the resets counted", v)
	}
}

// TestEgressDNSFloodLimited: a sandbox sending DNS queries as fast as it
// can for a few seconds gets about its rate answered (100/s plus a burst of
// 200), the rest dropped; another sandbox's lookups answer meanwhile. The
// server's CPU over the flood is logged.
func TestEgressDNSFloodLimited(t *testing.T) {
	t.Parallel()
	in := newFakeInternet(t)
	e := newEnv(t, withInternet(in))
	allow := &api.NetworkPolicy{Allow: []string{inetAPI}}
	flood := e.create(api.CreateSandboxRequest{Network: allow})
	other := e.create(api.CreateSandboxRequest{Network: allow})
	const secs, most = 4, 40000
	var before syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	t0 := time.Now()
	e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+flood.ID+"/processes", agentapi.ExecRequest{Command: `python3 -c '
import socket, struct, time
gw = open("/etc/resolv.conf").read().split()[1]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.setblocking(False)
name = b"".join(bytes([len(p)]) + p for p in b"` + inetAPI + `".split(b".")) + b"\0"
sent = answered = 0
t = time.time(); end = t + ` + strconv.Itoa(secs) + `
while time.time() < end and sent < ` + strconv.Itoa(most) + `:
    try: s.sendto(struct.pack(">HHHHHH", sent & 0xffff, 0x100, 1, 0, 0, 0) + name + b"\0\1\0\1", (gw, 53)); sent += 1
    except BlockingIOError: pass
    while True:
        try: s.recv(512); answered += 1
        except BlockingIOError: break
late = time.time() + 1
while time.time() < late:
    try: s.recv(512); answered += 1
    except BlockingIOError: time.sleep(0.01)
open("/tmp/flood", "w").write("%d %d %.2f" % (sent, answered, time.time() - t - 1))'`}, nil)
	// The other sandbox's lookups during the flood.
	look := e.sh(other.ID, `for i in 1 2 3 4 5; do getent hosts `+inetAPI+` >/dev/null && echo ok || echo fail; sleep 0.5; done`)
	if n := strings.Count(look.Stdout, "ok"); n != 5 {
		t.Errorf("during another sandbox's DNS flood, lookups answered %d of 5: %q", n, look.Stdout)
	}
	var res string
	waitFor(t, 30*time.Second, "the flood to end", func() bool {
		res = strings.TrimSpace(e.sh(flood.ID, "cat /tmp/flood 2>/dev/null").Stdout)
		return res != ""
	})
	var after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) * time.Nanosecond
	f := strings.Fields(res)
	if len(f) != 3 {
		t.Fatalf("flood result %q", res)
	}
	sent, _ := strconv.Atoi(f[0])
	answered, _ := strconv.Atoi(f[1])
	took, _ := strconv.ParseFloat(f[2], 64)
	t.Logf("DNS flood: %d queries sent in %.2f s, %d answered; the test process (server included) used %.2f CPU-s over %.1f s",
		sent, took, answered, cpu.Seconds(), time.Since(t0).Seconds())
	if sent < 2000 {
		t.Fatalf("the flood sent only %d queries; the test tested nothing", sent)
	}
	// 100/s for the flood's time plus the burst of 200 and the late second.
	if bound := 200 + int(100*(took+1.5)) + 50; answered > bound {
		t.Errorf("a DNS flood of %d queries got %d answers in %.2f s, want at most %d (100/s, burst 200)", sent, answered, took, bound)
	}
	if answered < 100 {
		t.Errorf("a DNS flood got only %d answers, want its burst of about 200 answered", answered)
	}
}
