package podproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/egress/policy"
	"withruntime.dev/runtime/internal/egress/secrets"
)

// These tests run on loopback only. The fake upstreams listen on
// 127.77.0.2 ports 80 and 443 (the only ports the proxy forwards to; the
// tests need root for them), which the guard exempts. Sandbox "sba" is
// whoever connects from 127.77.0.5, "sbb" from 127.77.0.6; any other
// source is no sandbox.

const upstreamIP = "127.77.0.2"

type mapResolver map[string][]netip.Addr

func (r mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

type fixture struct {
	proxy string // host:port
	ca    *secrets.CA
	env   map[string]string // sba's secret placeholders

	mu     sync.Mutex
	loaded []string // sandboxes Load was asked for
	seen   []string // Authorization headers the upstream saw
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen = append(f.seen, r.Header.Get("Authorization"))
		f.mu.Unlock()
		fmt.Fprintf(w, "upstream saw host=%s tls=%v", r.Host, r.TLS != nil)
	})
	var roots *x509.CertPool
	for _, port := range []string{"80", "443"} {
		l, err := net.Listen("tcp", net.JoinHostPort(upstreamIP, port))
		if err != nil {
			t.Skipf("cannot listen on %s:%s (needs root): %v", upstreamIP, port, err)
		}
		s := &httptest.Server{Listener: l, Config: &http.Server{Handler: handler}}
		if port == "443" {
			s.StartTLS() // its certificate is for example.com
			roots = x509.NewCertPool()
			roots.AddCert(s.Certificate())
		} else {
			s.Start()
		}
		t.Cleanup(s.Close)
	}
	ca, err := secrets.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	f.ca = ca
	guard := policy.NewGuard(netip.MustParsePrefix(upstreamIP + "/32"))
	compile := func(p policy.Policy) *policy.Matcher {
		m, err := policy.Compile(p, guard)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	set, env, err := secrets.NewSet(ca.PlaceholderKey(), "sba", []secrets.Secret{{Name: "API_TOKEN", Value: "s3cret-value", Hosts: []string{"example.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	f.env = env
	egress := map[string]Egress{
		"sba": {Policy: compile(policy.Policy{Allow: []string{"example.com", "plain.example.org"}}), Secrets: set},
		"sbb": {Policy: compile(policy.Policy{Allow: []string{"other.example.net"}})},
	}
	s := &Server{
		Identify: func(ip netip.Addr) (string, bool) {
			switch ip.String() {
			case "127.77.0.5":
				return "sba", true
			case "127.77.0.6":
				return "sbb", true
			}
			return "", false
		},
		Load: func(_ context.Context, id string) (Egress, error) {
			f.mu.Lock()
			f.loaded = append(f.loaded, id)
			f.mu.Unlock()
			e, ok := egress[id]
			if !ok {
				return Egress{}, errors.New("no such sandbox")
			}
			return e, nil
		},
		Resolver: mapResolver{
			"example.com":       {netip.MustParseAddr(upstreamIP)},
			"plain.example.org": {netip.MustParseAddr(upstreamIP)},
			"other.example.net": {netip.MustParseAddr(upstreamIP)},
		},
		Guard:         guard,
		CA:            ca,
		UpstreamRoots: roots,
	}
	l, err := net.Listen("tcp", "127.77.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { l.Close(); s.Close() })
	f.proxy = l.Addr().String()
	return f
}

// client is an HTTP client whose connections come from src and go through
// the proxy, trusting the Runtime CA (as a sandbox with secrets does).
func (f *fixture) client(src string) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(f.ca.CertPEM())
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: f.proxy}),
		DialContext:       d.DialContext,
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		DisableKeepAlives: true,
	}}
}

func get(c *http.Client, u, auth string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestAllowedHostWithSecretThroughConnect: a sandbox's HTTPS request to a
// host on its allow list goes through CONNECT, is intercepted for its
// secret (the placeholder it holds becomes the value on the way out, the
// value never comes back), and a plain-HTTP request goes through too.
func TestAllowedHostWithSecretThroughConnect(t *testing.T) {
	f := newFixture(t)
	c := f.client("127.77.0.5")
	ph := f.env["API_TOKEN"]
	if ph == "" || strings.Contains(ph, "s3cret") {
		t.Fatalf("placeholder %q", ph)
	}
	code, body, err := get(c, "https://example.com/", "Bearer "+ph)
	if err != nil || code != 200 || !strings.Contains(body, "host=example.com tls=true") {
		t.Fatalf("https://example.com/ through the proxy: %d %q %v", code, body, err)
	}
	code, body, err = get(c, "http://plain.example.org/", "")
	if err != nil || code != 200 || !strings.Contains(body, "host=plain.example.org tls=false") {
		t.Fatalf("http://plain.example.org/ through the proxy: %d %q %v", code, body, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) == 0 || f.seen[0] != "Bearer s3cret-value" {
		t.Fatalf("upstream saw Authorization %q, want the secret's value injected", f.seen)
	}
}

// TestDisallowedHostRefused: hosts off the allow list are refused, over
// CONNECT (TLS) and plain HTTP (403 with the reason), and CONNECT to a
// port other than 80 and 443 is refused outright.
func TestDisallowedHostRefused(t *testing.T) {
	f := newFixture(t)
	c := f.client("127.77.0.5")
	if code, body, err := get(c, "https://other.example.net/", ""); err == nil {
		t.Fatalf("https://other.example.net/ went through: %d %q", code, body)
	}
	code, body, err := get(c, "http://other.example.net/", "")
	if err != nil || code != http.StatusForbidden || !strings.Contains(body, "not on this sandbox's allow list") {
		t.Fatalf("http://other.example.net/: %d %q %v, want 403 saying why", code, body, err)
	}
	conn := dialFrom(t, "127.77.0.5", f.proxy)
	fmt.Fprint(conn, "CONNECT example.com:22 HTTP/1.1\r\nHost: example.com:22\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("CONNECT to port 22: %v %v, want 403", resp, err)
	}
}

// TestSpoofedIdentityRefused: the sandbox is its source address, whatever
// the client says. Sandbox sbb claims to be sba (a proxy credential and a
// header naming it) to reach sba's allowed host and secret: refused, and
// only sbb's policy was ever loaded. A source that is no sandbox's is reset
// before anything is read or loaded.
func TestSpoofedIdentityRefused(t *testing.T) {
	f := newFixture(t)
	conn := dialFrom(t, "127.77.0.6", f.proxy)
	fmt.Fprint(conn, "GET http://plain.example.org/ HTTP/1.1\r\nHost: plain.example.org\r\n"+
		"Proxy-Authorization: Basic "+basic("sba", "sba")+"\r\nX-Runtime-Sandbox: sba\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("sbb posing as sba: %v %v, want 403", resp, err)
	}
	if code, body, err := get(f.client("127.77.0.6"), "https://example.com/", "Bearer "+f.env["API_TOKEN"]); err == nil {
		t.Fatalf("sbb reached sba's secret host: %d %q", code, body)
	}

	// The proxy resets a stranger as soon as it accepts, so the reset can
	// reach the client before its connect returns: the same refusal.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.77.0.9")}, Timeout: 5 * time.Second}
	if stranger, err := d.Dial("tcp", f.proxy); err == nil {
		defer stranger.Close()
		_, _ = fmt.Fprint(stranger, "GET http://plain.example.org/ HTTP/1.1\r\nHost: plain.example.org\r\nX-Runtime-Sandbox: sba\r\n\r\n")
		_ = stranger.SetReadDeadline(time.Now().Add(5 * time.Second))
		// A write that meets the reset consumes the socket's error, and
		// later reads see end of file: what matters is that no byte came back.
		if b, err := io.ReadAll(stranger); len(b) > 0 {
			t.Fatalf("a source no sandbox has got %q (%v), want the connection reset", b, err)
		}
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a source no sandbox has: dial: %v, want a reset", err)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range f.loaded {
		if id != "sbb" {
			t.Fatalf("loaded %v: want only sbb's egress", f.loaded)
		}
	}
	for _, a := range f.seen {
		if strings.Contains(a, "s3cret") {
			t.Fatalf("the secret went out for another sandbox: %q", f.seen)
		}
	}
}

func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func basic(u, p string) string {
	r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	r.SetBasicAuth(u, p)
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ")
}

func TestConnectTarget(t *testing.T) {
	for in, want := range map[string]string{
		"example.com:443": "", "example.com:80": "", "203.0.113.7:443": "", "[2001:db8::1]:80": "",
		"example.com:22": "port 22", "example.com": "want host:port", "example.com:x": "port x",
	} {
		_, reason := connectTarget(in)
		if want == "" && reason != "" || want != "" && !strings.Contains(reason, want) {
			t.Errorf("connectTarget(%q) = %q, want %q", in, reason, want)
		}
	}
	if a, _ := connectTarget("203.0.113.7:443"); a.String() != "203.0.113.7:443" {
		t.Errorf("address target %v", a)
	}
}
