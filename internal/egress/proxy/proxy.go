// Package proxy is the transparent TCP proxy that a networked sandbox's
// outbound 80/443 connections are redirected to. It reads the destination
// name from the HTTP Host header or the TLS SNI (peeking at the ClientHello,
// without terminating TLS), checks it against the sandbox's policy, resolves
// the name itself, refuses addresses no sandbox may reach, and then splices
// the two connections.
package proxy

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"withruntime.dev/runtime/internal/egress/policy"
	"withruntime.dev/runtime/internal/egress/secrets"
)

// Resolver resolves a host name to addresses. *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// maxHeaderBytes bounds what is read before the destination is known.
const maxHeaderBytes = 64 << 10

// Proxy serves one sandbox's redirected connections.
type Proxy struct {
	// Policy returns the sandbox's current policy; nil refuses everything.
	// It is read once per connection, so a change applies to new connections.
	Policy func() *policy.Matcher
	// Resolver resolves allowed names. Required.
	Resolver Resolver
	// Guard refuses destination addresses no sandbox may reach.
	Guard *policy.Guard
	// OriginalDst returns where the client was connecting before the
	// redirect. The default reads SO_ORIGINAL_DST from conntrack.
	OriginalDst func(net.Conn) (netip.AddrPort, error)
	// PeekTimeout bounds the wait for the request head, the TLS
	// ClientHello or the HTTP request head, from the connection's accept
	// (default DefaultPeekTimeout). A connection that sends none in time
	// is reset: an idle connection holds a slot of its shares.
	PeekTimeout time.Duration
	// DialTimeout bounds resolving and connecting upstream (default 10 s).
	DialTimeout time.Duration
	// Secrets returns the sandbox's secrets (optional). TLS to a host that
	// one of them covers is intercepted: terminated with a certificate from
	// CA, the placeholders in request headers swapped for the values, and
	// forwarded over TLS verified against UpstreamRoots. Every other
	// connection is tunneled untouched.
	Secrets func() *secrets.Set
	// CA mints the certificates for intercepted hosts.
	CA *secrets.CA
	// UpstreamRoots verifies intercepted hosts (nil: the host's roots).
	UpstreamRoots *x509.CertPool
	// MaxConns caps the connections served at once: the sandbox's share
	// (default 1024); past it new connections are reset.
	MaxConns int
	// Shared, when set, also caps the connections served at once by every
	// proxy that shares it (every sandbox's), in total and per key (see
	// NewShares); past it new connections are reset.
	Shared *Slots
	// Tenant, when set, returns the key whose share of Shared this
	// sandbox's connections count in; read once per connection ("" or nil:
	// the total only).
	Tenant func() string
	// Limited, when set, hears each connection reset at accept for a full
	// share: LimitSandbox, LimitKey or LimitServer. It runs on the accept
	// loop: keep it short.
	Limited func(limit string)
	// Log receives one line per connection (optional).
	Log *slog.Logger
	// Upstream, when set, returns the HTTP proxy to reach host through for
	// scheme ("http" for port 80, "https" for 443), or nil to connect
	// directly (see upstream.go). The server builds it from its own
	// HTTPS_PROXY, HTTP_PROXY and NO_PROXY.
	Upstream func(scheme, host string) *url.URL
	// Observe, when set, hears each connection's decision and, for a
	// spliced one, the bytes it carried each way (out: from the sandbox),
	// for metrics; intercepted and forwarded ones report 0 bytes.
	Observe func(allowed bool, out, in int64)

	mu     sync.Mutex
	conns  map[net.Conn]string // the key each holds a slot of Shared for
	closed bool
	wg     sync.WaitGroup
}

// Serve accepts connections on l until it is closed. A failure to accept
// that passes (a timeout; the process out of file descriptors or memory for
// a moment, which any client holding enough connections can cause) is
// waited out, 5 ms doubling to 1 s, as net/http does: returning would leave
// the sandbox without a network for good.
func (p *Proxy) Serve(l net.Listener) error {
	var wait time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			if !temporaryAcceptError(err) {
				return err
			}
			wait = min(max(2*wait, 5*time.Millisecond), time.Second)
			time.Sleep(wait)
			continue
		}
		wait = 0
		if limit := p.track(c); limit != "" {
			resetConn(c)
			if p.Limited != nil && limit != errClosed {
				p.Limited(limit)
			}
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.ServeConn(c)
		}()
	}
}

// temporaryAcceptError reports whether a failed Accept may succeed later.
func temporaryAcceptError(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// DefaultPeekTimeout is Proxy.PeekTimeout's default: clients send their
// ClientHello or request line right after connecting, so a few seconds
// cover a loaded sandbox and still free an idle connection's slot early.
const DefaultPeekTimeout = 5 * time.Second

// DefaultMaxConns is Proxy.MaxConns's default, one sandbox's share.
const DefaultMaxConns = 1024

// errClosed is track's answer once the proxy is closed (not a share).
const errClosed = "closed"

// track admits c, or returns the limit that is full.
func (p *Proxy) track(c net.Conn) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	max := p.MaxConns
	if max == 0 {
		max = DefaultMaxConns
	}
	if p.closed {
		return errClosed
	}
	if len(p.conns) >= max {
		return LimitSandbox
	}
	var key string
	if p.Tenant != nil {
		key = p.Tenant()
	}
	if p.Shared != nil {
		if limit := p.Shared.acquire(key); limit != "" {
			return limit
		}
	}
	if p.conns == nil {
		p.conns = map[net.Conn]string{}
	}
	p.conns[c] = key
	return ""
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	if key, ok := p.conns[c]; ok {
		delete(p.conns, c)
		if p.Shared != nil {
			p.Shared.release(key)
		}
	}
	p.mu.Unlock()
}

// Close closes every connection the proxy serves and waits for them. Close
// the listener first so that no new one arrives.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// request is what the proxy learned from the first bytes of a connection.
type request struct {
	tls  bool
	host string // SNI or Host (without port); "" when the client sent none
	head []byte // every byte read from the client so far, replayed upstream
}

// ServeConn proxies one connection and closes it.
func (p *Proxy) ServeConn(c net.Conn) {
	defer c.Close()
	start := time.Now()
	dst, err := p.originalDst(c)
	if err != nil {
		// Not redirected (a connection straight to the proxy's address).
		la, ok := c.LocalAddr().(*net.TCPAddr)
		if !ok {
			return
		}
		dst = la.AddrPort()
	}
	_ = c.SetReadDeadline(start.Add(p.peekTimeout()))
	req, err := readRequest(c)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		p.logf(slog.LevelInfo, "egress: unreadable request", "dst", dst, "err", err)
		resetConn(c)
		return
	}
	// A connection made straight to the proxy's own address (not
	// redirected) gets the protocol's usual port.
	port := dst.Port()
	if la, ok := c.LocalAddr().(*net.TCPAddr); ok && la.AddrPort().Addr().Unmap() == dst.Addr().Unmap() && la.AddrPort().Port() == port {
		port = 80
		if req.tls {
			port = 443
		}
	}
	var m *policy.Matcher
	if p.Policy != nil {
		m = p.Policy()
	}
	upstream := p.upstreamFor(req, dst.Addr(), port)
	var targets []netip.Addr
	var reason string
	if upstream != nil {
		reason = p.decideUpstream(m, req.host, dst.Addr())
	} else {
		targets, reason = p.decide(m, req.host, dst.Addr())
	}
	attrs := []any{"host", req.host, "dst", dst, "tls", req.tls, "viaUpstream", upstream != nil}
	if reason != "" {
		p.observe(false, 0, 0)
		p.logf(slog.LevelInfo, "egress: refused", append(attrs, "reason", reason)...)
		if m == nil || m.None() {
			// Network off: behave as if there were no route at all, so
			// every client fails at once (curl exits non-zero) instead
			// of reading a 403 as an answer.
			resetConn(c)
			return
		}
		refuse(c, req, reason)
		return
	}
	var sent, received int64
	defer func() { p.observe(true, sent, received) }()
	if req.tls && req.host != "" && p.Secrets != nil && p.CA != nil {
		if set := p.Secrets(); set.Covers(req.host) {
			p.logf(slog.LevelInfo, "egress: intercepting for secrets", attrs...)
			p.intercept(c, req, targets, port, set, upstream)
			return
		}
	}
	if upstream != nil && !req.tls {
		p.forwardHTTP(c, req, port, upstream)
		return
	}
	timeout := p.DialTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	var up net.Conn
	if upstream != nil {
		up, err = connectVia(ctx, upstream, net.JoinHostPort(displayHost(req.host, dst.Addr()), strconv.Itoa(int(port))))
	} else {
		up, err = p.dial(ctx, targets, port)
	}
	cancel()
	if err != nil {
		p.logf(slog.LevelInfo, "egress: upstream unreachable", append(attrs, "err", err)...)
		fail(c, req, "cannot connect to "+displayHost(req.host, dst.Addr())+": "+err.Error())
		return
	}
	defer up.Close()
	p.logf(slog.LevelInfo, "egress: allowed", append(attrs, "upstream", up.RemoteAddr().String(), "setup", time.Since(start))...)
	if _, err := up.Write(req.head); err != nil {
		return
	}
	sent, received = splice(c, up)
	sent += int64(len(req.head))
}

func (p *Proxy) peekTimeout() time.Duration {
	if p.PeekTimeout > 0 {
		return p.PeekTimeout
	}
	return DefaultPeekTimeout
}

func (p *Proxy) observe(allowed bool, out, in int64) {
	if p.Observe != nil {
		p.Observe(allowed, out, in)
	}
}

func displayHost(host string, dst netip.Addr) string {
	if host != "" {
		return host
	}
	return dst.String()
}

// decide returns the addresses to dial, or why the connection is refused.
// A name is resolved here, never trusted from the client; an address
// (literal or the original destination when no name was sent) must be on
// the allow list itself.
func (p *Proxy) decide(m *policy.Matcher, host string, dst netip.Addr) ([]netip.Addr, string) {
	if m == nil || m.None() {
		return nil, "the network is off for this sandbox (internet: false, no allow list)"
	}
	addr, isLiteral := parseAddrLiteral(host)
	if host == "" {
		addr, isLiteral = dst.Unmap(), true
	}
	if isLiteral {
		if reason := p.checkAddr(m, addr); reason != "" {
			return nil, reason
		}
		return []netip.Addr{addr}, ""
	}
	if !m.AllowName(host) {
		return nil, fmt.Sprintf("%s is not on this sandbox's allow list", host)
	}
	timeout := p.DialTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	addrs, err := p.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Sprintf("cannot resolve %s: %v", host, err)
	}
	var ok []netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if p.Guard.Blocked(a) || m.DenyAddr(a) {
			continue
		}
		ok = append(ok, a)
	}
	if len(ok) == 0 {
		return nil, fmt.Sprintf("%s resolves only to private, loopback, link-local, metadata, this host's own or denied addresses, which no sandbox may reach", host)
	}
	return ok, ""
}

// checkAddr says why a sandbox may not connect to the address addr, or "".
func (p *Proxy) checkAddr(m *policy.Matcher, addr netip.Addr) string {
	if p.Guard.Blocked(addr) {
		return addr.String() + " is a private, loopback, link-local or metadata address or one of this host's own, which no sandbox may reach"
	}
	if !m.AllowAddr(addr) {
		return addr.String() + " is not on this sandbox's allow list"
	}
	return ""
}

func parseAddrLiteral(host string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// dial connects to the first target that answers. The dialer checks every
// address again just before connecting.
func (p *Proxy) dial(ctx context.Context, targets []netip.Addr, port uint16) (net.Conn, error) {
	d := net.Dialer{Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		if p.Guard.Blocked(ap.Addr()) {
			return fmt.Errorf("refusing to connect to %s", ap.Addr())
		}
		return nil
	}}
	var errs []error
	for _, a := range targets {
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, port).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// readRequest reads the first bytes of a connection: a TLS ClientHello (for
// the SNI) or an HTTP request head (for the Host).
func readRequest(c net.Conn) (*request, error) {
	rec := &recorder{r: io.LimitReader(c, maxHeaderBytes)}
	var first [1]byte
	if _, err := io.ReadFull(rec, first[:]); err != nil {
		return nil, err
	}
	req := &request{}
	if first[0] == 0x16 { // TLS handshake record
		req.tls = true
		hello, err := readClientHello(io.MultiReader(strings.NewReader(string(first[:])), rec))
		if err != nil {
			return nil, fmt.Errorf("reading TLS ClientHello: %w", err)
		}
		req.host = strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))
	} else {
		br := bufio.NewReaderSize(io.MultiReader(strings.NewReader(string(first[:])), rec), 4096)
		hr, err := http.ReadRequest(br)
		if err != nil {
			return nil, fmt.Errorf("reading HTTP request: %w", err)
		}
		host := hr.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		req.host = strings.ToLower(strings.TrimSuffix(host, "."))
	}
	req.head = rec.buf
	return req, nil
}

// recorder keeps every byte read through it.
type recorder struct {
	r   io.Reader
	buf []byte
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	return n, err
}

// refuse tells the client why it was refused: a 403 with the reason for
// HTTP, a TLS access_denied alert for TLS (there is no way to say more
// without terminating TLS).
func refuse(c net.Conn, req *request, reason string) {
	_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	if req.tls {
		_, _ = c.Write(tlsAlert(49)) // access_denied
		return
	}
	writeHTTPError(c, http.StatusForbidden, "Runtime egress: "+reason+"\n")
}

// fail reports an upstream failure: 502 for HTTP, a reset for TLS.
func fail(c net.Conn, req *request, reason string) {
	if req.tls {
		resetConn(c)
		return
	}
	_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	writeHTTPError(c, http.StatusBadGateway, "Runtime egress: "+reason+"\n")
}

func writeHTTPError(c net.Conn, code int, body string) {
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %s\r\nConnection: close\r\nX-Runtime-Egress: refused\r\n\r\n%s",
		code, http.StatusText(code), strconv.Itoa(len(body)), body)
}

// tlsAlert is a fatal TLS alert record (TLS 1.0 record version, which every
// client accepts before the version is negotiated).
func tlsAlert(desc byte) []byte {
	return []byte{0x15, 0x03, 0x01, 0x00, 0x02, 0x02, desc}
}

// resetConn closes a TCP connection with a reset, so the client fails at once.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// splice copies both ways until both directions are done (with half-close),
// using splice(2) between TCP sockets, and returns the bytes copied from a
// to b and from b to a.
func splice(a, b net.Conn) (ab, ba int64) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ab, _ = io.Copy(b, a)
		closeWrite(b)
	}()
	ba, _ = io.Copy(a, b)
	closeWrite(a)
	wg.Wait()
	return ab, ba
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

func (p *Proxy) originalDst(c net.Conn) (netip.AddrPort, error) {
	if p.OriginalDst != nil {
		return p.OriginalDst(c)
	}
	return OriginalDst(c)
}

func (p *Proxy) logf(level slog.Level, msg string, args ...any) {
	if p.Log != nil {
		p.Log.Log(context.Background(), level, msg, args...)
	}
}
