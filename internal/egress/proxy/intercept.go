package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/egress/secrets"
)

// intercept terminates the sandbox's TLS for host with a certificate from
// the Runtime CA, swaps secret placeholders in each request's headers for
// their values, and forwards the requests over TLS verified against
// UpstreamRoots. Requests for another Host on the same connection are
// refused (421), so a value only ever goes to its own host.
func (p *Proxy) intercept(c net.Conn, req *request, targets []netip.Addr, port uint16, set *secrets.Set, upstream *url.URL) {
	host := req.host
	cert, err := p.CA.Certificate(host)
	if err != nil {
		p.logf(slog.LevelError, "egress: cannot intercept", "host", host, "err", err)
		resetConn(c)
		return
	}
	replay := &replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(req.head), c)}
	tc := tls.Server(replay, &tls.Config{
		Certificates: []tls.Certificate{*cert},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	hctx, cancel := context.WithTimeout(context.Background(), p.peekTimeout())
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		p.logf(slog.LevelInfo, "egress: intercepted handshake failed", "host", host, "err", err)
		return
	}

	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return p.dial(ctx, targets, port)
		},
		TLSClientConfig:     &tls.Config{ServerName: host, RootCAs: p.UpstreamRoots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
	}
	if upstream != nil {
		tr.Proxy = http.ProxyURL(upstream)
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return dialUpstreamTCP(ctx, upstream) }
	}
	defer tr.CloseIdleConnections()
	target := host
	if port != 443 {
		target = net.JoinHostPort(host, strconv.Itoa(int(port)))
	}
	quiet := log.New(io.Discard, "", 0)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "https"
			pr.Out.URL.Host = target
			pr.Out.Host = pr.In.Host
			n := set.Inject(pr.Out.Header, host)
			p.logf(slog.LevelInfo, "egress: secret request", "host", host, "method", pr.In.Method, "injected", n)
		},
		Transport:      tr,
		FlushInterval:  -1, // stream responses (server-sent events) as they come
		ModifyResponse: func(r *http.Response) error { set.Scrub(r.Header); return nil },
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.logf(slog.LevelInfo, "egress: secret request failed", "host", host, "err", err)
			http.Error(w, "Runtime egress: cannot reach "+host, http.StatusBadGateway)
		},
		ErrorLog: quiet,
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Host
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		}
		if !sameHost(h, host) {
			http.Error(w, fmt.Sprintf("Runtime egress: this connection is for %s, not %s", host, h), http.StatusMisdirectedRequest)
			return
		}
		rp.ServeHTTP(w, r)
	})
	serveOneConn(tc, handler, quiet)
}

func sameHost(a, b string) bool {
	norm := func(s string) string {
		return string(bytes.ToLower(bytes.TrimSuffix([]byte(s), []byte("."))))
	}
	return norm(a) == norm(b)
}

// replayConn reads the bytes already consumed from the connection first.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// oneConnListener hands out one connection, then reports itself closed.
type oneConnListener struct {
	mu sync.Mutex
	c  net.Conn
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c == nil {
		return nil, net.ErrClosed
	}
	c := l.c
	l.c = nil
	return c, nil
}

func (l *oneConnListener) Close() error { return nil }

func (l *oneConnListener) Addr() net.Addr { return &net.TCPAddr{} }
