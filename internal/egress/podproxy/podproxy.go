// Package podproxy is Runtime's egress proxy for sandboxes that reach it
// over a shared network (Kubernetes: the pod network, through a Service)
// instead of a veth of their own: one listener serves every sandbox, and
// sandbox programs use it as their HTTP and HTTPS proxy (HTTP_PROXY,
// HTTPS_PROXY).
//
// A connection's sandbox is known by its source address alone (Identify:
// the sandbox whose pod has that IP), never by anything the client says:
// no header, no proxy credentials, no host name. A source no sandbox has is
// reset. The cluster's NetworkPolicy keeps sandbox pods from reaching
// anything but this proxy (and the addresses their policy allows), so a
// program that ignores the proxy variables gets nowhere, and from one
// another, and the CNI's anti-spoofing keeps a pod from sending with
// another pod's address.
//
// Each request then goes through package proxy exactly as on a single
// host: the destination is the TLS SNI or the HTTP Host, checked against
// the sandbox's policy, resolved by the proxy itself, private and metadata
// addresses refused, and TLS to a secret's host intercepted with the
// Runtime CA to swap placeholders for values. A CONNECT is answered 200 and
// its tunnel read like a redirected connection; a plain request
// (absolute-form, "GET http://host/ HTTP/1.1") is read like one. Only ports
// 80 and 443 are proxied, as on a single host.
package podproxy

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/egress/policy"
	"withruntime.dev/runtime/internal/egress/proxy"
	"withruntime.dev/runtime/internal/egress/secrets"
)

// Egress is what a sandbox may reach: its compiled policy (nil: nothing)
// and the secrets the proxy injects for it (nil: none).
type Egress struct {
	Policy  *policy.Matcher
	Secrets *secrets.Set
}

// Server serves every sandbox's proxied connections on one listener.
type Server struct {
	// Identify returns the sandbox whose pod has address ip (IPv4 addresses
	// come unmapped), or false when none has it or the answer is not
	// certain (two pods with that address). Required.
	Identify func(ip netip.Addr) (sandboxID string, ok bool)
	// Load returns a sandbox's egress (policy and secrets), read fresh
	// from where the server records it (the store, shared by every
	// replica). Required. An error refuses the connection.
	Load func(ctx context.Context, sandboxID string) (Egress, error)
	// CacheFor is how long a Load answer is reused (default 2 s): a policy
	// change made on another replica applies to new connections within it.
	CacheFor time.Duration
	// Resolver resolves allowed names (default net.DefaultResolver).
	Resolver proxy.Resolver
	// Guard refuses destinations no sandbox may reach (default
	// policy.NewGuard()).
	Guard *policy.Guard
	// CA mints the certificates of intercepted hosts (nil: secrets are not
	// injected).
	CA *secrets.CA
	// UpstreamRoots verifies intercepted hosts (nil: the host's roots).
	UpstreamRoots *x509.CertPool
	// MaxConns caps the connections served at once, all sandboxes
	// together (default 4096); past it new connections are reset.
	MaxConns int
	// Log receives one line per connection (optional). Secret values are
	// never logged.
	Log *slog.Logger

	once sync.Once

	mu     sync.Mutex
	cache  map[string]cached
	conns  map[net.Conn]string // connection -> sandbox
	closed bool
	wg     sync.WaitGroup
}

type cached struct {
	e    Egress
	err  error
	when time.Time
}

// peekTimeout bounds the wait for a CONNECT or request line.
const peekTimeout = 10 * time.Second

func (s *Server) init() {
	s.once.Do(func() {
		if s.MaxConns <= 0 {
			s.MaxConns = 4096
		}
		if s.CacheFor <= 0 {
			s.CacheFor = 2 * time.Second
		}
		if s.Resolver == nil {
			s.Resolver = net.DefaultResolver
		}
		if s.Guard == nil {
			s.Guard = policy.NewGuard()
		}
		s.cache = map[string]cached{}
		s.conns = map[net.Conn]string{}
	})
}

// Serve accepts connections on l until it is closed (nil) or fails for
// good. A failure to accept that passes (out of file descriptors for a
// moment) is waited out.
func (s *Server) Serve(l net.Listener) error {
	s.init()
	var wait time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				wait = min(max(2*wait, 5*time.Millisecond), time.Second)
				time.Sleep(wait)
				continue
			}
			return err
		}
		wait = 0
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.ServeConn(c)
		}()
	}
}

func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

// Close closes every connection served and waits for them. Close the
// listener first.
func (s *Server) Close() error {
	s.init()
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// ServeConn serves one connection and closes it: identified by its source
// address, then proxied under that sandbox's egress.
func (s *Server) ServeConn(c net.Conn) {
	s.init()
	defer c.Close()
	src, ok := remoteAddr(c)
	if !ok {
		reset(c)
		return
	}
	id, ok := s.Identify(src)
	if !ok {
		s.logf("egress: refused: no sandbox has this source address", "src", src)
		reset(c)
		return
	}
	if !s.track(c, id) {
		reset(c)
		return
	}
	defer s.untrack(c)
	e, err := s.egress(id)
	if err != nil {
		s.logf("egress: refused: cannot load the sandbox's policy", "sandbox", id, "err", err)
		reset(c)
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(peekTimeout))
	br := bufio.NewReaderSize(c, 4096)
	first, err := br.Peek(len("CONNECT "))
	if err != nil {
		reset(c)
		return
	}
	var dst func(net.Conn) (netip.AddrPort, error)
	if string(first) == "CONNECT " {
		req, err := http.ReadRequest(br)
		if err != nil {
			reset(c)
			return
		}
		target, reason := connectTarget(req.Host)
		if reason != "" {
			s.logf("egress: refused CONNECT", "sandbox", id, "target", req.Host, "reason", reason)
			writeError(c, http.StatusForbidden, reason)
			return
		}
		dst = func(net.Conn) (netip.AddrPort, error) {
			if !target.IsValid() {
				return netip.AddrPort{}, errors.New("CONNECT to a name: the proxy port stands for 80 or 443")
			}
			return target, nil
		}
		if _, err := fmt.Fprint(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
	} else {
		dst = func(net.Conn) (netip.AddrPort, error) { return netip.AddrPort{}, errors.New("a plain proxy request") }
	}
	_ = c.SetReadDeadline(time.Time{})
	p := &proxy.Proxy{
		Policy:        func() *policy.Matcher { return e.Policy },
		Secrets:       func() *secrets.Set { return e.Secrets },
		Resolver:      s.Resolver,
		Guard:         s.Guard,
		CA:            s.CA,
		UpstreamRoots: s.UpstreamRoots,
		OriginalDst:   dst,
		Log:           s.logger().With("sandbox", id),
	}
	p.ServeConn(&bufferedConn{Conn: c, r: br})
}

// connectTarget checks a CONNECT's host:port: port 80 or 443, as on a
// single host. An address target is returned as the destination (checked
// against the policy when the tunnel sends no name); a name is not (the
// tunnel's SNI or Host decides).
func connectTarget(hostport string) (netip.AddrPort, string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return netip.AddrPort{}, fmt.Sprintf("CONNECT %q: want host:port", hostport)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n != 80 && n != 443 {
		return netip.AddrPort{}, fmt.Sprintf("CONNECT to port %s: sandboxes reach ports 80 and 443 only through Runtime's egress proxy", port)
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return netip.AddrPortFrom(a.Unmap().WithZone(""), uint16(n)), ""
	}
	return netip.AddrPort{}, ""
}

func (s *Server) egress(id string) (Egress, error) {
	now := time.Now()
	s.mu.Lock()
	if c, ok := s.cache[id]; ok && now.Sub(c.when) < s.CacheFor {
		s.mu.Unlock()
		return c.e, c.err
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e, err := s.Load(ctx, id)
	s.mu.Lock()
	if len(s.cache) > 4*s.MaxConns { // ids of sandboxes long gone
		clear(s.cache)
	}
	s.cache[id] = cached{e: e, err: err, when: now}
	s.mu.Unlock()
	return e, err
}

func (s *Server) track(c net.Conn, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.conns) >= s.MaxConns {
		return false
	}
	s.conns[c] = id
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *Server) logger() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

func (s *Server) logf(msg string, args ...any) { s.logger().Info(msg, args...) }

// remoteAddr is the connection's source IP.
func remoteAddr(c net.Conn) (netip.Addr, bool) {
	ta, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	a, ok := netip.AddrFromSlice(ta.IP)
	return a.Unmap(), ok
}

func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func writeError(c net.Conn, code int, reason string) {
	body := "Runtime egress: " + reason + "\n"
	_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\nX-Runtime-Egress: refused\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}

// bufferedConn reads what the CONNECT's reader holds before the
// connection. It keeps the TCP connection's resets and half-closes.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// CloseWrite half-closes the TCP connection.
func (b *bufferedConn) CloseWrite() error {
	if cw, ok := b.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return b.Conn.Close()
}

// ProxyURL is the proxy's address as sandbox programs are given it
// (HTTP_PROXY and HTTPS_PROXY): http://ADDR:PORT.
func ProxyURL(addr netip.AddrPort) string {
	return (&url.URL{Scheme: "http", Host: addr.String()}).String()
}
