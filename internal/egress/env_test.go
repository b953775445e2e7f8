package egress

// The test "internet": a network namespace made by the test, holding fake
// upstream servers on an address from the benchmarking range 198.18.0.0/15,
// with names resolved by a map (never by real DNS). Sandboxes are namespaces
// made by the Manager under test, and test clients run inside them. No
// packet goes anywhere but these namespaces and loopback.

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	vnetns "github.com/vishvananda/netns"

	"withruntime.dev/runtime/internal/egress/firewall"
	"withruntime.dev/runtime/internal/egress/netns"
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
	r.asked = append(r.asked, host)
	a, ok := r.addrs[strings.ToLower(strings.TrimSuffix(host, "."))]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, x := range a {
		if network == "ip" || network == "ip4" && x.Is4() || network == "ip6" && x.Is6() {
			out = append(out, x)
		}
	}
	return out, nil
}

func (r *mapResolver) wasAsked(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.asked {
		if strings.EqualFold(strings.TrimSuffix(n, "."), name) {
			return true
		}
	}
	return false
}

// inNetns runs fn on an OS thread inside the namespace at path. The thread
// is never returned to the scheduler (it exits with the goroutine), so no
// other goroutine runs in the namespace. Sockets fn creates stay in it.
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

func dialIn(path, network, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := inNetns(path, func() error {
		var err error
		c, err = net.DialTimeout(network, addr, timeout)
		return err
	})
	return c, err
}

// internet is the fake internet: one namespace with an HTTP server on :80,
// an HTTPS server on :443 (certificate from the test's own CA), and a plain
// TCP server on :22 that sandboxes must never reach.
type internet struct {
	link     *netns.Link
	nc       netns.Config
	ip       netip.Addr
	roots    *x509.CertPool
	caPEM    []byte
	names    []string
	mu       sync.Mutex
	lastHost string
	lastAuth string
	auths    []string
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newInternet(t *testing.T, names []string) *internet {
	t.Helper()
	h := randHex(2)
	nc := netns.Config{
		NamePrefix:  "wrtest-inet" + h + "-",
		LinkPrefix:  "wi" + h,
		AliasPrefix: "wrtest-inet" + h + ":",
		Pool:        netip.MustParsePrefix("198.18.0.0/15"),
	}
	link, err := nc.Create("up")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nc.Delete("up"); err != nil {
			t.Error(err)
		}
	})
	in := &internet{link: link, nc: nc, ip: link.Addr.Addr(), names: names}
	cert, roots, caPEM := testCertificate(t, names, in.ip)
	in.roots, in.caPEM = roots, caPEM

	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in.mu.Lock()
		in.lastHost, in.lastAuth = r.Host, r.Header.Get("Authorization")
		in.auths = append(in.auths, r.Host+" "+r.Header.Get("Authorization"))
		in.mu.Unlock()
		w.Header().Set("X-Seen-Authorization", r.Header.Get("Authorization"))
		fmt.Fprintf(w, "hello from %s tls=%v", r.Host, r.TLS != nil)
	})
	var ls []net.Listener
	err = inNetns(link.NetnsPath, func() error {
		for _, port := range []string{"80", "443", "22"} {
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
	plain := &http.Server{Handler: handler}
	secure := &http.Server{Handler: handler, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go func() { _ = plain.Serve(ls[0]) }()
	go func() { _ = secure.ServeTLS(ls[1], "", "") }()
	go func() {
		for {
			c, err := ls[2].Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("SSH-2.0-fake\r\n"))
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = plain.Close()
		_ = secure.Close()
		_ = ls[2].Close()
	})
	return in
}

func (in *internet) seen() (host, auth string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.lastHost, in.lastAuth
}

// testCertificate makes a CA and a server certificate for names and ip.
func testCertificate(t *testing.T, names []string, ip netip.Addr) (tls.Certificate, *x509.CertPool, []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "egress test CA"},
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
		DNSNames: names, IPAddresses: []net.IP{ip.AsSlice()},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool, caPEM
}

// newTestManager returns a Manager whose table, names and pool no other
// test run uses, and checks at the end that it left nothing behind.
func newTestManager(t *testing.T, res Resolver, opts ...func(*Config)) *Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("egress tests create network namespaces and nftables tables and need root")
	}
	h := randHex(2)
	b := make([]byte, 1)
	_, _ = rand.Read(b)
	cfg := Config{
		Name:       "wrtest" + h,
		LinkPrefix: "wt" + h,
		Pool:       netip.PrefixFrom(netip.AddrFrom4([4]byte{100, 64 + b[0]%64, 0, 0}), 16),
		Resolver:   res,
		Exempt:     []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")},
	}
	for _, o := range opts {
		o(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Destroy(context.Background()); err != nil {
			t.Errorf("Destroy: %v", err)
		}
		assertNothingLeft(t, cfg)
	})
	return m
}

// sandboxClient is code running inside a sandbox's namespace.
type sandboxClient struct {
	t   *testing.T
	att *Attachment
}

// resolve asks the sandbox's DNS server (the resolv.conf nameserver).
func (s *sandboxClient) resolve(name string) (*dns.Msg, error) {
	return s.queryAt(s.att.Gateway.String()+":53", name, dns.TypeA)
}

func (s *sandboxClient) queryAt(server, name string, qtype uint16) (*dns.Msg, error) {
	c, err := dialIn(s.att.NetnsPath, "udp", server, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	r, _, err := (&dns.Client{}).ExchangeWithConn(m, &dns.Conn{Conn: c})
	return r, err
}

// get sends one HTTP or HTTPS GET for host to addr from inside the sandbox.
func (s *sandboxClient) get(scheme, host string, addr netip.AddrPort, roots *x509.CertPool, header http.Header) (*http.Response, string, error) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialIn(s.att.NetnsPath, "tcp", addr.String(), 2*time.Second)
		},
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", scheme+"://"+host+"/", nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body), nil
}

// rawHTTP sends a request with the given Host on an open connection and
// reads the response.
func rawHTTP(c net.Conn, br *bufio.Reader, host string) (int, string, error) {
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

// assertNothingLeft checks that a configuration left no namespace, veth or
// nftables table.
func assertNothingLeft(t *testing.T, cfg Config) {
	t.Helper()
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), cfg.Name+"-") {
			t.Errorf("namespace left: %s", e.Name())
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if strings.HasPrefix(i.Name, cfg.LinkPrefix) {
			t.Errorf("link left: %s", i.Name)
		}
	}
	fw, err := firewall.New(cfg.Name, cfg.LinkPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := fw.Exists(); err != nil || ok {
		t.Errorf("nftables table %s left (%v)", cfg.Name, err)
	}
}
