package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/egress/policy"
)

// These tests run on loopback only: the fake upstreams listen on 127.0.0.2,
// which the guard exempts, while the rest of 127.0.0.0/8 stays refused.
// internal/egress has the same checks through real namespaces and nftables.

type mapResolver struct {
	mu    sync.Mutex
	addrs map[string][]netip.Addr
	asked []string
}

func (r *mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	if a, ok := r.addrs[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

type fixture struct {
	proxyAddr string
	pol       atomic.Pointer[policy.Matcher]
	guard     *policy.Guard
	dst       atomic.Value // netip.AddrPort the "client" meant
	httpPort  uint16
	httpsPort uint16
	roots     *x509.CertPool
}

func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// newFixture starts a proxy on loopback; wrap, when given, wraps its
// listener.
func newFixture(t *testing.T, wrap ...func(net.Listener) net.Listener) *fixture {
	t.Helper()
	f := &fixture{guard: policy.NewGuard(netip.MustParsePrefix("127.0.0.2/32"))}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream saw host=%s tls=%v", r.Host, r.TLS != nil)
	})
	hs := &httptest.Server{Listener: listen(t, "127.0.0.2:0"), Config: &http.Server{Handler: handler}}
	hs.Start()
	t.Cleanup(hs.Close)
	ts := &httptest.Server{Listener: listen(t, "127.0.0.2:0"), Config: &http.Server{Handler: handler}}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	f.httpPort = uint16(hs.Listener.Addr().(*net.TCPAddr).Port)
	f.httpsPort = uint16(ts.Listener.Addr().(*net.TCPAddr).Port)
	f.roots = x509.NewCertPool()
	f.roots.AddCert(ts.Certificate())

	res := &mapResolver{addrs: map[string][]netip.Addr{
		"example.com":         {netip.MustParseAddr("127.0.0.2")}, // httptest's certificate is for example.com
		"allowed.example.org": {netip.MustParseAddr("127.0.0.2")},
		"rebind.example.org":  {netip.MustParseAddr("127.0.0.1")},
		"private.example.org": {netip.MustParseAddr("10.9.8.7"), netip.MustParseAddr("169.254.169.254")},
	}}
	f.setPolicy(t, policy.Policy{Allow: []string{"example.com", "*.example.org", "127.0.0.2"}})
	p := &Proxy{
		Policy:   f.pol.Load,
		Resolver: res,
		Guard:    f.guard,
		OriginalDst: func(net.Conn) (netip.AddrPort, error) {
			return f.dst.Load().(netip.AddrPort), nil
		},
	}
	var l net.Listener = listen(t, "127.0.0.3:0")
	for _, w := range wrap {
		l = w(l)
	}
	go func() { _ = p.Serve(l) }()
	t.Cleanup(func() { l.Close(); p.Close() })
	f.proxyAddr = l.Addr().String()
	return f
}

func (f *fixture) setPolicy(t *testing.T, p policy.Policy) {
	t.Helper()
	m, err := policy.Compile(p, f.guard)
	if err != nil {
		t.Fatal(err)
	}
	f.pol.Store(m)
}

// httpGet sends a plain HTTP request with the given Host through the proxy,
// as if the client had connected to dst.
func (f *fixture) httpGet(t *testing.T, dst netip.AddrPort, host string) (int, string) {
	t.Helper()
	f.dst.Store(dst)
	c, err := net.DialTimeout("tcp", f.proxyAddr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if host == "" {
		fmt.Fprintf(c, "GET / HTTP/1.0\r\n\r\n")
	} else {
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET Host %q: %v", host, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (f *fixture) httpsGet(t *testing.T, sni string) (string, error) {
	t.Helper()
	f.dst.Store(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), f.httpsPort))
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: f.roots, ServerName: sni},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", f.proxyAddr)
		},
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := client.Get("https://" + sni + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body), nil
}

func TestHTTPHostMatching(t *testing.T) {
	f := newFixture(t)
	up := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), f.httpPort)
	if code, body := f.httpGet(t, up, "allowed.example.org"); code != 200 || body != "upstream saw host=allowed.example.org tls=false" {
		t.Fatalf("allowed Host: %d %q", code, body)
	}
	if code, body := f.httpGet(t, up, "Allowed.Example.Org.:80"); code != 200 {
		t.Fatalf("allowed Host with case, dot and port: %d %q", code, body)
	}
	for host, want := range map[string]string{
		"evil.example.net":    "not on this sandbox's allow list",
		"example.org":         "not on this sandbox's allow list",
		"rebind.example.org":  "resolves only to private",
		"private.example.org": "resolves only to private",
		"127.0.0.1":           "private, loopback",
		"169.254.169.254":     "private, loopback",
		"[::1]":               "private, loopback",
	} {
		start := time.Now()
		code, body := f.httpGet(t, up, host)
		if code != http.StatusForbidden || !strings.Contains(body, want) {
			t.Errorf("Host %q: %d %q, want 403 with %q", host, code, body, want)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Host %q refused after %v", host, d)
		}
	}
	// No Host at all: the original destination address decides.
	if code, _ := f.httpGet(t, up, ""); code != 200 {
		t.Errorf("no Host, allowed address: %d", code)
	}
	meta := netip.MustParseAddrPort("169.254.169.254:80")
	if code, body := f.httpGet(t, meta, ""); code != http.StatusForbidden {
		t.Errorf("no Host to the metadata address: %d %q", code, body)
	}
	// A policy change applies to the next connection.
	f.setPolicy(t, policy.Policy{Allow: []string{"example.com"}})
	if code, _ := f.httpGet(t, up, "allowed.example.org"); code != http.StatusForbidden {
		t.Errorf("after narrowing the policy: %d", code)
	}
	// With the network off a connection is reset, as if there were no
	// route: clients fail at once rather than read a 403 as an answer.
	f.setPolicy(t, policy.Policy{})
	f.dst.Store(up)
	c, err := net.DialTimeout("tcp", f.proxyAddr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
		t.Errorf("with the network off: got an answer (%s), want the connection reset", resp.Status)
	}
}

func TestTLSSNIMatching(t *testing.T) {
	f := newFixture(t)
	body, err := f.httpsGet(t, "example.com")
	if err != nil || body != "upstream saw host=example.com tls=true" {
		t.Fatalf("allowed SNI: %q, %v", body, err)
	}
	for _, sni := range []string{"blocked.example.net", "rebind.example.org"} {
		start := time.Now()
		_, err := f.httpsGet(t, sni)
		if err == nil || !strings.Contains(err.Error(), "access denied") {
			t.Errorf("SNI %q: %v, want a TLS access_denied alert", sni, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("SNI %q refused after %v", sni, d)
		}
	}
	f.setPolicy(t, policy.Policy{Allow: []string{"*.example.org"}})
	if _, err := f.httpsGet(t, "example.com"); err == nil {
		t.Error("SNI allowed after the policy dropped it")
	}
}

// emfileListener fails its first n Accepts as a process out of file
// descriptors does (accept4: too many open files).
type emfileListener struct {
	net.Listener
	n atomic.Int32
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.n.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestServeSurvivesEMFILE: a server out of file descriptors for a moment
// (any client holding many connections can cause it) must not stop a
// sandbox's proxy for good: the sandbox's network would stay dead.
func TestServeSurvivesEMFILE(t *testing.T) {
	f := newFixture(t, func(l net.Listener) net.Listener {
		el := &emfileListener{Listener: l}
		el.n.Store(3)
		return el
	})
	dst := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), f.httpPort)
	if status, body := f.httpGet(t, dst, "127.0.0.2"); status != 200 || !strings.Contains(body, "upstream saw") {
		t.Fatalf("after EMFILE on accept: status %d %q", status, body)
	}
}

func TestGarbageIsReset(t *testing.T) {
	f := newFixture(t)
	f.dst.Store(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), f.httpPort))
	c, err := net.Dial("tcp", f.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	fmt.Fprintf(c, "\x00\x01 not http\r\n\r\n")
	if n, err := c.Read(make([]byte, 10)); err == nil {
		t.Fatalf("garbage got %d bytes back", n)
	}
}
