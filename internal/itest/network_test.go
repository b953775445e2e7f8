package itest

// Sandbox networks against a fake internet: a network namespace made by the
// test, holding HTTP and HTTPS servers (certificates from the test's own
// CA) on an address from the benchmarking range 198.18.0.0/15, with names
// resolved by a map handed to the server. No packet goes anywhere but these
// namespaces and loopback.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	vnetns "github.com/vishvananda/netns"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/driver/gvisor"
	"withruntime.dev/runtime/internal/egress/netns"
	"withruntime.dev/runtime/internal/server"
)

// Names of the fake internet.
const (
	inetAPI     = "api.net.test"   // allowed in the tests
	inetOther   = "other.net.test" // on the fake internet, not allowed at first
	inetPrivate = "private.net.test"
)

// mapResolver resolves from a map and records what it was asked.
type mapResolver struct {
	mu    sync.Mutex
	addrs map[string][]netip.Addr
	asked []string
}

func (r *mapResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	r.asked = append(r.asked, host)
	var out []netip.Addr
	for _, a := range r.addrs[host] {
		if network == "ip" || network == "ip4" && a.Is4() || network == "ip6" && a.Is6() {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

func (r *mapResolver) askedFor() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}

// fakeInternet is the test's internet: one namespace with an HTTP server on
// :80 and an HTTPS server on :443 that echo what they saw.
type fakeInternet struct {
	ip       netip.Addr
	caPEM    []byte
	roots    *x509.CertPool
	resolver *mapResolver
	mu       sync.Mutex
	auths    []string
	// serverLog is what the fake internet's servers logged and no test
	// has claimed (certificateRefused claims its line): one entry a line.
	// Checked empty when the test ends.
	serverLog []string
}

func (in *fakeInternet) seenAuths() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return strings.Join(in.auths, "\n")
}

// serverLogWriter is the fake internet's servers' ErrorLog: it keeps the
// lines (a TLS handshake error, say) for the test to claim or be failed by,
// instead of printing them into the run's output.
type serverLogWriter struct{ in *fakeInternet }

func (w serverLogWriter) Write(p []byte) (int, error) {
	w.in.mu.Lock()
	defer w.in.mu.Unlock()
	w.in.serverLog = append(w.in.serverLog, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// refusedCertificate is the HTTPS server's log line for a client that
// refused its certificate. Over TLS 1.2 the client's unknown_ca alert
// reads as one. Over TLS 1.3 OpenSSL (curl, Python) sends that alert in
// plaintext after the server has switched to the handshake keys, so Go's
// server, which cannot authenticate the plaintext record, reports
// "bad record MAC": the same refusal, not altered bytes.
// alteredBytes matches a server log line that says a client's TLS records
// could not be authenticated or parsed: altered, spliced or mixed-up bytes.
var alteredBytes = regexp.MustCompile(`bad record MAC|decryption failed|record overflow|unexpected message|first record does not look like a TLS handshake`)

var refusedCertificate = regexp.MustCompile(`^http: TLS handshake error from [0-9.]+:[0-9]+: (local error: tls: bad record MAC|remote error: tls: unknown certificate authority)$`)

// certificateRefused runs request, a sandbox's curl to https://inetAPI/
// that no secret covers, so the egress proxy splices it to the fake
// internet and the sandbox checks the certificate itself against roots
// that do not hold the fake internet's CA. It must end as that refusal
// does: curl exits 60 ("SSL certificate problem"), and the fake HTTPS
// server logs exactly one refused handshake, which this claims. Anything
// else (a 200, another error, two lines) is reported.
func (in *fakeInternet) certificateRefused(t *testing.T, request func() agentapi.ExecResult) agentapi.ExecResult {
	t.Helper()
	in.mu.Lock()
	n := len(in.serverLog)
	in.mu.Unlock()
	res := request()
	if res.ExitCode != 60 || !strings.Contains(res.Stderr, "SSL certificate problem") {
		t.Errorf("a request the sandbox's own TLS check should refuse: %+v, want curl's exit 60, SSL certificate problem", res)
	}
	// The server logs when it reads the alert, just after curl exits.
	var lines []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		in.mu.Lock()
		lines = append([]string(nil), in.serverLog[n:]...)
		in.mu.Unlock()
		if len(lines) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // a second line would come now
	in.mu.Lock()
	lines = append([]string(nil), in.serverLog[n:]...)
	if len(lines) == 1 && refusedCertificate.MatchString(lines[0]) {
		in.serverLog = in.serverLog[:n]
	}
	in.mu.Unlock()
	if len(lines) != 1 || !refusedCertificate.MatchString(lines[0]) {
		t.Errorf("the fake internet's HTTPS server logged %q during the refused request, want exactly one line matching %s", lines, refusedCertificate)
	}
	return res
}

var inetMu sync.Mutex

func newFakeInternet(t *testing.T) *fakeInternet {
	t.Helper()
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	nc := netns.Config{
		NamePrefix:  "writinet" + h + "-",
		LinkPrefix:  "wn" + h,
		AliasPrefix: "writinet" + h + ":",
		Pool:        netip.MustParsePrefix("198.18.0.0/15"),
	}
	// Address allocation picks a free /30 but is not atomic across
	// concurrent creates: one at a time, with different ids.
	inetMu.Lock()
	link, err := nc.Create("up" + h)
	inetMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nc.Delete("up" + h); err != nil {
			t.Error(err)
		}
	})
	in := &fakeInternet{ip: link.Addr.Addr()}
	in.resolver = &mapResolver{addrs: map[string][]netip.Addr{
		inetAPI:     {in.ip},
		inetOther:   {in.ip},
		inetPrivate: {netip.MustParseAddr("127.0.0.1")},
	}}
	cert := inetCertificate(t, in, []string{inetAPI, inetOther})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in.mu.Lock()
		in.auths = append(in.auths, r.Host+" "+r.Header.Get("Authorization"))
		in.mu.Unlock()
		fmt.Fprintf(w, "hello from %s", r.Host)
	})
	var ls []net.Listener
	err = inNetns(link.NetnsPath, func() error {
		for _, port := range []string{"80", "443"} {
			l, err := net.Listen("tcp", net.JoinHostPort(in.ip.String(), port))
			if err != nil {
				return err
			}
			ls = append(ls, l)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	errLog := log.New(serverLogWriter{in}, "", 0)
	plain := &http.Server{Handler: handler, ErrorLog: errLog}
	secure := &http.Server{Handler: handler, ErrorLog: errLog, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go func() { _ = plain.Serve(ls[0]) }()
	go func() { _ = secure.ServeTLS(ls[1], "", "") }()
	// After the servers close (cleanups run last first): no unclaimed line
	// that says bytes were altered or mixed up. Other lines (a client gone
	// mid-handshake: EOF, a reset, a timeout, as when a test destroys a
	// sandbox with connections open) are logged, not failed.
	t.Cleanup(func() {
		in.mu.Lock()
		defer in.mu.Unlock()
		for _, line := range in.serverLog {
			if alteredBytes.MatchString(line) {
				t.Errorf("the fake internet's server logged what this test does not expect (altered or mixed-up bytes, or an attack the test does not claim): %s", line)
			} else {
				t.Logf("the fake internet's server logged: %s", line)
			}
		}
	})
	t.Cleanup(func() {
		_ = plain.Close()
		_ = secure.Close()
	})
	return in
}

// withInternet points a server at the fake internet: its range is exempt
// from the guard, names resolve from its map, its CA stands for the roots.
func withInternet(in *fakeInternet) option {
	return func(c *server.Config) {
		c.Egress.Exempt = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")}
		c.Egress.Resolver = in.resolver
		c.Egress.UpstreamRoots = in.roots
	}
}

// inNetns runs fn on an OS thread inside the namespace at path; the thread
// is never returned to the scheduler (it exits with the goroutine).
func inNetns(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked
		ns, err := vnetns.GetFromPath(path)
		if err != nil {
			errc <- err
			return
		}
		defer ns.Close()
		if err := vnetns.Set(ns); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

func inetCertificate(t *testing.T, in *fakeInternet, names []string) tls.Certificate {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "itest fake internet CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: names, IPAddresses: []net.IP{in.ip.AsSlice()},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	in.roots = x509.NewCertPool()
	in.roots.AddCert(ca)
	in.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// probe is one timed command's outcome inside a sandbox.
type probe struct {
	rc, ms int
	out    string
}

var probeLine = regexp.MustCompile(`^(\S+) rc=(\d+) ms=(\d+) out=(.*)$`)

// probes runs named commands in a sandbox, each timed, and returns their
// outcomes by name.
func (e *env) probes(id string, cmds [][2]string) map[string]probe {
	e.t.Helper()
	lines := []string{`t() { name=$1; shift; s=$(date +%s%N); out=$("$@" 2>&1); rc=$?; e=$(date +%s%N); echo "$name rc=$rc ms=$(( (e-s)/1000000 )) out=$(echo $out | tr '\n' ' ' | cut -c1-200)"; }`}
	for _, c := range cmds {
		lines = append(lines, "t "+c[0]+" "+c[1])
	}
	res := e.exec(id, agentapi.ExecRequest{Command: strings.Join(lines, "\n"), TimeoutSeconds: 120})
	out := map[string]probe{}
	for _, line := range strings.Split(res.Stdout, "\n") {
		m := probeLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		rc, _ := strconv.Atoi(m[2])
		ms, _ := strconv.Atoi(m[3])
		out[m[1]] = probe{rc: rc, ms: ms, out: strings.TrimSpace(m[4])}
	}
	for _, c := range cmds {
		if _, ok := out[c[0]]; !ok {
			e.t.Errorf("probe %s: no result; stdout:\n%s\nstderr:\n%s", c[0], res.Stdout, res.Stderr)
		}
	}
	return out
}

// expectOK checks that a probe succeeded with output starting with want.
func expectOK(t *testing.T, ps map[string]probe, name, want string) {
	t.Helper()
	if p, ok := ps[name]; ok && (p.rc != 0 || !strings.HasPrefix(p.out, want)) {
		t.Errorf("%s: %+v, want success with %q", name, p, want)
	}
}

// expectBlocked checks that a probe failed (or got the proxy's 403) within
// 2 seconds.
func expectBlocked(t *testing.T, ps map[string]probe, name string) {
	t.Helper()
	p, ok := ps[name]
	if !ok {
		return
	}
	if p.rc == 0 && !strings.HasPrefix(p.out, "403") {
		t.Errorf("%s: %+v, want it blocked", name, p)
	}
	if p.ms >= 2000 {
		t.Errorf("%s: took %d ms, want a failure well under 2 s", name, p.ms)
	}
}

func curl(args string) string {
	return `curl -sS -m 5 -o /dev/null -w '%{http_code}' ` + args
}

func TestNetworkNone(t *testing.T) {
	t.Parallel()
	in := newFakeInternet(t)
	e := newEnv(t, withInternet(in))
	sb := e.create(api.CreateSandboxRequest{})
	var pol api.NetworkPolicy
	e.must(http.StatusOK, "GET", "/v1/sandboxes/"+sb.ID+"/network", nil, &pol)
	if pol.Internet || len(pol.Allow) > 0 {
		t.Errorf("default network: %+v, want {internet: false}", pol)
	}
	ip := in.ip.String()
	ps := e.probes(sb.ID, [][2]string{
		{"getent", "getent hosts " + inetAPI},
		{"curl_name", curl("http://" + inetAPI + "/")},
		{"curl_https", curl("https://" + inetAPI + "/")},
		{"curl_ip", curl("http://" + ip + "/")},
		{"python", `python3 -c "import urllib.request as u; print(u.urlopen('http://` + inetAPI + `/', timeout=5).status)"`},
		{"node", `node -e "fetch('http://` + inetAPI + `/').then(r=>console.log(r.status)).catch(e=>{console.log(String(e.cause&&e.cause.code||e));process.exit(1)})"`},
	})
	for _, n := range []string{"getent", "curl_name", "curl_https", "curl_ip", "python", "node"} {
		// Plain HTTP to an address reaches the host's proxy, which refuses
		// it with a 403; everything else fails.
		if p := ps[n]; p.rc == 0 && !(n == "curl_ip" && strings.HasPrefix(p.out, "403")) {
			t.Errorf("%s: %+v, want a failure", n, p)
		}
		expectBlocked(t, ps, n)
	}
	if asked := in.resolver.askedFor(); len(asked) > 0 {
		t.Errorf("the upstream resolver was asked %v; with internet false no query may leave the host", asked)
	}
}

func TestNetworkAllowListAndUpdate(t *testing.T) {
	t.Parallel()
	in := newFakeInternet(t)
	e := newEnv(t, withInternet(in))

	// Invalid policies are refused with the engine's message.
	for _, bad := range []any{
		map[string]any{"network": map[string]any{"allow": []string{"not a host!"}}},
		map[string]any{"network": map[string]any{"allow": []string{"10.0.0.0/8"}}},
	} {
		status, data := e.do("POST", "/v1/sandboxes", bad)
		if status != http.StatusBadRequest || errorCode(t, data) != agentapi.CodeBadRequest || !strings.Contains(string(data), "network") {
			t.Errorf("create with %v: %d %s, want 400 naming the network policy", bad, status, data)
		}
	}
	status, data := e.do("POST", "/v1/sandboxes", map[string]any{"secrets": []string{"NO_SUCH_SECRET"}})
	if status != http.StatusNotFound {
		t.Errorf("create with an unknown secret: %d %s, want 404 (as for another key's)", status, data)
	}

	sb := e.create(api.CreateSandboxRequest{Network: &api.NetworkPolicy{Allow: []string{inetAPI, inetPrivate}}})
	var pol api.NetworkPolicy
	e.must(http.StatusOK, "GET", "/v1/sandboxes/"+sb.ID+"/network", nil, &pol)
	if pol.Internet || strings.Join(pol.Allow, ",") != inetAPI+","+inetPrivate {
		t.Errorf("network read back: %+v", pol)
	}
	e.exec(sb.ID, agentapi.ExecRequest{Command: "cat > /tmp/inet.pem", Stdin: string(in.caPEM)})
	ip := in.ip.String()
	ps := e.probes(sb.ID, [][2]string{
		{"getent", "getent hosts " + inetAPI},
		{"http", curl("http://" + inetAPI + "/")},
		{"https", curl("--cacert /tmp/inet.pem https://" + inetAPI + "/")},
		{"python", `python3 -c "import urllib.request as u; print(u.urlopen('http://` + inetAPI + `/', timeout=5).status)"`},
		{"node_fetch", `node -e "fetch('http://` + inetAPI + `/').then(r=>console.log(r.status)).catch(e=>{console.log(String(e.cause&&e.cause.code||e));process.exit(1)})"`},
		{"node_lookup", `node -e "require('dns').lookup('` + inetAPI + `',(e,a)=>{console.log(e?e.code:a);process.exit(e?1:0)})"`},
		{"other_name", curl("--cacert /tmp/inet.pem https://" + inetOther + "/")},
		{"other_resolve", curl("--cacert /tmp/inet.pem --resolve " + inetOther + ":443:" + ip + " https://" + inetOther + "/")},
		{"ip_literal", curl("http://" + ip + "/")},
		{"ip_literal_tls", curl("-k https://" + ip + "/")},
		{"private", curl("http://" + inetPrivate + "/")},
		{"private_resolve", curl("--resolve " + inetPrivate + ":80:" + ip + " http://" + inetPrivate + "/")},
	})
	expectOK(t, ps, "getent", ip+" ")
	expectOK(t, ps, "http", "200")
	expectOK(t, ps, "https", "200")
	expectOK(t, ps, "python", "200")
	expectOK(t, ps, "node_fetch", "200")
	expectOK(t, ps, "node_lookup", ip)
	for _, n := range []string{"other_name", "other_resolve", "ip_literal", "ip_literal_tls", "private"} {
		expectBlocked(t, ps, n)
	}
	// An allowed name forced to the right address still goes through the
	// proxy's own resolution, which points at loopback: refused.
	expectBlocked(t, ps, "private_resolve")

	// Changing the policy of the running sandbox applies to new connections.
	status, data = e.do("PUT", "/v1/sandboxes/"+sb.ID+"/network", map[string]any{"allow": []string{"bad host name!"}})
	if status != http.StatusBadRequest || !strings.Contains(string(data), "network policy") {
		t.Errorf("PUT an invalid policy: %d %s, want 400", status, data)
	}
	e.must(http.StatusOK, "PUT", "/v1/sandboxes/"+sb.ID+"/network", api.NetworkPolicy{Allow: []string{inetOther}}, &pol)
	if strings.Join(pol.Allow, ",") != inetOther {
		t.Errorf("PUT answered %+v", pol)
	}
	e.must(http.StatusOK, "GET", "/v1/sandboxes/"+sb.ID+"/network", nil, &pol)
	if strings.Join(pol.Allow, ",") != inetOther {
		t.Errorf("network read back after PUT: %+v", pol)
	}
	ps = e.probes(sb.ID, [][2]string{
		{"api_now", curl("http://" + inetAPI + "/")},
		{"other_now", curl("http://" + inetOther + "/")},
	})
	expectBlocked(t, ps, "api_now")
	expectOK(t, ps, "other_now", "200")

	// internet: true, with a deny list.
	e.must(http.StatusOK, "PUT", "/v1/sandboxes/"+sb.ID+"/network", api.NetworkPolicy{Internet: true, Deny: []string{inetOther}}, &pol)
	ps = e.probes(sb.ID, [][2]string{
		{"api_internet", curl("http://" + inetAPI + "/")},
		{"other_denied", curl("http://" + inetOther + "/")},
		{"private_internet", curl("http://" + inetPrivate + "/")},
	})
	expectOK(t, ps, "api_internet", "200")
	expectBlocked(t, ps, "other_denied")
	expectBlocked(t, ps, "private_internet")

	// Back to nothing.
	e.must(http.StatusOK, "PUT", "/v1/sandboxes/"+sb.ID+"/network", api.NetworkPolicy{}, &pol)
	ps = e.probes(sb.ID, [][2]string{{"api_none", curl("http://" + inetAPI + "/")}})
	expectBlocked(t, ps, "api_none")
	if ps["api_none"].rc == 0 {
		t.Errorf("api_none: %+v, want a failure", ps["api_none"])
	}
}

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestNetworkSecret(t *testing.T) {
	t.Parallel()
	in := newFakeInternet(t)
	logs := &lockedBuffer{}
	e := newEnv(t, withInternet(in), func(c *server.Config) {
		c.Log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	// The value is built in two halves so that no command sent to the
	// sandbox ever holds it whole.
	const half1, half2 = "sk-itest-9f8e7d", "6c5b4a3f2e1d"
	const value = half1 + half2
	var responses []string
	record := func(status int, data []byte) []byte {
		responses = append(responses, string(data))
		return data
	}

	var sec api.Secret
	status, data := e.do("POST", "/v1/secrets", api.CreateSecretRequest{Name: "API_KEY", Value: value, Hosts: []string{inetAPI}})
	record(status, data)
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/secrets: %d %s", status, data)
	}
	_ = json.Unmarshal(data, &sec)
	if sec.Name != "API_KEY" || strings.Join(sec.Hosts, ",") != inetAPI {
		t.Errorf("created secret: %+v", sec)
	}
	status, data = e.do("POST", "/v1/secrets", map[string]any{"name": "bad name", "value": value, "hosts": []string{inetAPI}})
	record(status, data)
	if status != http.StatusBadRequest {
		t.Errorf("POST a bad secret name: %d %s", status, data)
	}
	status, data = e.do("GET", "/v1/secrets", nil)
	record(status, data)
	if status != http.StatusOK || !strings.Contains(string(data), `"API_KEY"`) {
		t.Errorf("GET /v1/secrets: %d %s", status, data)
	}

	status, data = e.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{
		Network: &api.NetworkPolicy{Allow: []string{inetAPI}}, Secrets: []string{"API_KEY"},
	})
	record(status, data)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, data)
	}
	var sb api.Sandbox
	_ = json.Unmarshal(data, &sb)
	for _, path := range []string{"/v1/sandboxes/" + sb.ID, "/v1/sandboxes", "/v1/sandboxes/" + sb.ID + "/network"} {
		record(e.do("GET", path, nil))
	}

	run := func(cmd string) agentapi.ExecResult {
		status, data := e.do("POST", "/v1/sandboxes/"+sb.ID+"/exec", agentapi.ExecRequest{Command: cmd, TimeoutSeconds: 300})
		record(status, data)
		var res agentapi.ExecResult
		if status != http.StatusOK {
			t.Fatalf("exec %q: %d %s", cmd, status, data)
		}
		_ = json.Unmarshal(data, &res)
		return res
	}
	res := run(`test -n "$API_KEY" && echo "placeholder=$API_KEY"; ` +
		curl(`-H "Authorization: Bearer $API_KEY" https://`+inetAPI+`/`) + `; echo; ` +
		`python3 -c "import os,urllib.request as u; r=u.Request('https://` + inetAPI + `/', headers={'Authorization':'Bearer '+os.environ['API_KEY']}); print(u.urlopen(r, timeout=5).status)"`)
	if !strings.Contains(res.Stdout, "placeholder=") || !strings.Contains(res.Stdout, "200\n200") {
		t.Errorf("requests with the secret: %+v", res)
	}
	if n := strings.Count(in.seenAuths(), inetAPI+" Bearer "+value); n < 2 {
		t.Errorf("the upstream got the secret %d times, want 2; it saw:\n%s", n, in.seenAuths())
	}

	// The value is nowhere inside: no process's environment or arguments,
	// no file.
	res = run(`a=` + half1 + `; b=` + half2 + `; v="$a$b"
for f in /proc/[0-9]*/environ; do if tr '\0' '\n' < "$f" 2>/dev/null | grep -qF "$v"; then echo "ENV $f"; fi; done
for f in /proc/[0-9]*/cmdline; do case "$f" in /proc/$$/*|/proc/self/*) continue;; esac; if tr '\0' ' ' < "$f" 2>/dev/null | grep -qF -- "$v"; then echo "CMD $f $(tr '\0' ' ' < $f | cut -c1-40)"; fi; done
for d in /*; do case "$d" in /proc|/sys|/dev) ;; *) grep -rlF -- "$v" "$d" 2>/dev/null | sed 's/^/FILE /';; esac; done
echo done`)
	for _, line := range strings.Split(res.Stdout, "\n") {
		// The grep and tr processes of the check itself hold the value.
		if strings.HasPrefix(line, "ENV") || strings.HasPrefix(line, "FILE") ||
			strings.HasPrefix(line, "CMD") && !strings.Contains(line, "grep") {
			t.Errorf("the secret's value is inside the sandbox: %s", line)
		}
	}
	if !strings.Contains(res.Stdout, "done") {
		t.Errorf("the search did not finish: %+v", res)
	}
	for _, r := range responses {
		if strings.Contains(r, value) {
			t.Errorf("an API response holds the secret's value: %.300s", r)
		}
	}
	if strings.Contains(logs.String(), value) {
		t.Error("the server log holds the secret's value")
	}

	// Rotating the secret reaches the running sandbox's next request;
	// deleting it stops the injection (the placeholder goes out as is).
	const rotated = "sk-rotated-0a1b2c3d4e5f"
	if status, data := e.do("POST", "/v1/secrets", api.CreateSecretRequest{Name: "API_KEY", Value: rotated, Hosts: []string{inetAPI}}); status != http.StatusCreated {
		t.Fatalf("rotate the secret: %d %s", status, data)
	}
	run(curl(`-H "Authorization: Bearer $API_KEY" https://` + inetAPI + `/`))
	if !strings.Contains(in.seenAuths(), inetAPI+" Bearer "+rotated) {
		t.Errorf("after rotation the upstream did not get the new value; it saw:\n%s", in.seenAuths())
	}
	status, data = e.do("DELETE", "/v1/secrets/API_KEY", nil)
	if status != http.StatusNoContent {
		t.Errorf("DELETE secret: %d %s", status, data)
	}
	// The proxy splices the sandbox's TLS to the upstream now, whose CA the
	// sandbox does not trust: curl refuses the certificate.
	before := strings.Count(in.seenAuths(), "Bearer sk-")
	in.certificateRefused(t, func() agentapi.ExecResult {
		return run(curl(`-H "Authorization: Bearer $API_KEY" https://` + inetAPI + `/`))
	})
	if after := strings.Count(in.seenAuths(), "Bearer sk-"); after != before {
		t.Errorf("after deletion a request still carried a secret value; the upstream saw:\n%s", in.seenAuths())
	}
	status, _ = e.do("DELETE", "/v1/secrets/API_KEY", nil)
	if status != http.StatusNotFound {
		t.Errorf("DELETE a deleted secret: %d, want 404", status)
	}
}

// TestNetworkCreateCost compares creating a sandbox with an allow list
// against one with the default (attached, internet false).
func TestNetworkCreateCost(t *testing.T) {
	in := newFakeInternet(t)
	e := newEnv(t, withInternet(in))
	const n = 5
	timeIt := func(req api.CreateSandboxRequest) time.Duration {
		var total time.Duration
		for i := 0; i < n; i++ {
			start := time.Now()
			sb := e.create(req)
			total += time.Since(start)
			e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
		}
		return total / n
	}
	off := newEnv(t, func(c *server.Config) { c.Egress.Disabled = true })
	var bare time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		sb := off.create(api.CreateSandboxRequest{})
		bare += time.Since(start)
		off.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
	}
	none := timeIt(api.CreateSandboxRequest{})
	allow := timeIt(api.CreateSandboxRequest{Network: &api.NetworkPolicy{Allow: []string{inetAPI}}})
	t.Logf("create (mean of %d): no network (egress disabled) %v, attached with internet false %v, allow list %v", n, bare/n, none, allow)
}

// TestNetworkSurvivesRestart: a server restart re-attaches a running
// sandbox's network with its policy and secrets, and removes the network of
// a sandbox that stopped while no server ran.
func TestNetworkSurvivesRestart(t *testing.T) {
	t.Parallel()
	in := newFakeInternet(t)
	dataDir, err := os.MkdirTemp("/tmp", "wr-netrestart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	const value = "sk-restart-0a1b2c3d4e5f"
	a := newEnv(t, withDataDir(dataDir), withInternet(in))
	a.must(http.StatusCreated, "POST", "/v1/secrets", api.CreateSecretRequest{Name: "API_KEY", Value: value, Hosts: []string{inetAPI}}, nil)
	x := a.create(api.CreateSandboxRequest{Network: &api.NetworkPolicy{Allow: []string{inetAPI}}, Secrets: []string{"API_KEY"}})
	gone := a.create(api.CreateSandboxRequest{})
	a.detach()
	// gone stops while no server runs: its namespace is a leftover.
	d, err := gvisor.New(gvisor.Config{Runsc: runscBin, AgentBinary: agentBin, StateDir: filepath.Join(dataDir, "gvisor")})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Destroy(context.Background(), gone.ID); err != nil {
		t.Fatal(err)
	}
	_ = d.Close()

	b := newEnv(t, withDataDir(dataDir), withInternet(in))
	for _, l := range networkLeftovers(b.egress) {
		if strings.Contains(l, gone.ID) {
			t.Errorf("left after restart: %s", l)
		}
	}
	var pol api.NetworkPolicy
	b.must(http.StatusOK, "GET", "/v1/sandboxes/"+x.ID+"/network", nil, &pol)
	if strings.Join(pol.Allow, ",") != inetAPI {
		t.Errorf("policy after restart: %+v", pol)
	}
	ps := b.probes(x.ID, [][2]string{
		{"allowed", curl("http://" + inetAPI + "/")},
		{"denied", curl("http://" + inetOther + "/")},
		{"secret", curl(`-H "Authorization: Bearer $API_KEY" https://` + inetAPI + `/`)},
	})
	expectOK(t, ps, "allowed", "200")
	expectBlocked(t, ps, "denied")
	expectOK(t, ps, "secret", "200")
	if !strings.Contains(in.seenAuths(), inetAPI+" Bearer "+value) {
		t.Errorf("after the restart the upstream did not get the secret; it saw:\n%s", in.seenAuths())
	}
}
