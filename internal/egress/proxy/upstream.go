package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
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

	"withruntime.dev/runtime/internal/egress/policy"
)

// Dialing out through an upstream HTTP proxy: on networks where only a
// proxy reaches the internet, the egress proxy connects through it — TLS
// (and anything the sandbox sends to port 443) with CONNECT, plain HTTP as
// absolute-form requests (many proxies refuse CONNECT to port 80). The
// upstream's address and credentials stay on the host: the sandbox sees
// only its own transparent connection.
//
// Names are not resolved on the host then (the upstream resolves them), so
// the guard's address checks apply to literal addresses only, and deny
// entries that are addresses cannot match a name's addresses: the upstream
// proxy's own rules are in force for those.

// upstreamFor returns the upstream proxy for a connection, or nil for a
// direct one.
func (p *Proxy) upstreamFor(req *request, dst netip.Addr, port uint16) *url.URL {
	if p.Upstream == nil {
		return nil
	}
	host := req.host
	if host == "" {
		host = dst.String()
	}
	scheme := "http"
	if req.tls || port == 443 {
		scheme = "https"
	}
	return p.Upstream(scheme, host)
}

// decideUpstream is decide for a connection that goes through an upstream
// proxy: a name must be allowed (the upstream resolves it), an address
// must pass the guard and be allowed.
func (p *Proxy) decideUpstream(m *policy.Matcher, host string, dst netip.Addr) string {
	if m == nil || m.None() {
		return "the network is off for this sandbox (internet: false, no allow list)"
	}
	addr, isLiteral := parseAddrLiteral(host)
	if host == "" {
		addr, isLiteral = dst.Unmap(), true
	}
	if isLiteral {
		return p.checkAddr(m, addr)
	}
	if !m.AllowName(host) {
		return fmt.Sprintf("%s is not on this sandbox's allow list", host)
	}
	return ""
}

// dialUpstreamTCP opens a TCP connection to the upstream proxy itself
// (never guarded: the operator chose it, and it is often on a private
// address). An http.Transport whose Proxy is set adds TLS for an https://
// proxy itself, so this is its DialContext.
func dialUpstreamTCP(ctx context.Context, proxy *url.URL) (net.Conn, error) {
	addr := proxy.Host
	if proxy.Port() == "" {
		port := "80"
		if proxy.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(proxy.Hostname(), port)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("upstream proxy: %w", err)
	}
	return c, nil
}

// dialUpstream is dialUpstreamTCP with TLS for an https:// proxy: a
// connection ready for a CONNECT.
func dialUpstream(ctx context.Context, proxy *url.URL) (net.Conn, error) {
	c, err := dialUpstreamTCP(ctx, proxy)
	if err != nil {
		return nil, err
	}
	if proxy.Scheme == "https" {
		tc := tls.Client(c, &tls.Config{ServerName: proxy.Hostname(), MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("upstream proxy: %w", err)
		}
		return tc, nil
	}
	return c, nil
}

// connectVia opens a tunnel to target ("host:port") through proxy with
// CONNECT.
func connectVia(ctx context.Context, proxy *url.URL, target string) (net.Conn, error) {
	c, err := dialUpstream(ctx, proxy)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: target}, Host: target, Header: http.Header{}}
	if auth := proxyAuth(proxy); auth != "" {
		req.Header.Set("Proxy-Authorization", auth)
	}
	if err := req.Write(c); err != nil {
		c.Close()
		return nil, fmt.Errorf("upstream proxy: %w", err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("upstream proxy: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.Close()
		return nil, fmt.Errorf("upstream proxy refused CONNECT %s: %s", target, resp.Status)
	}
	_ = c.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		// The target spoke first; keep what was read with the status.
		return &replayConn{Conn: c, r: io.MultiReader(br, c)}, nil
	}
	return c, nil
}

// proxyAuth is the Proxy-Authorization value for a proxy URL's userinfo.
func proxyAuth(proxy *url.URL) string {
	if proxy.User == nil {
		return ""
	}
	pass, _ := proxy.User.Password()
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(proxy.User.Username()+":"+pass))
}

// forwardHTTP serves a plain HTTP connection by sending each request to the
// upstream proxy in absolute form. Every request must be for the host the
// connection was allowed for (421 otherwise), as a splice would guarantee.
func (p *Proxy) forwardHTTP(c net.Conn, req *request, port uint16, upstream *url.URL) {
	host := req.host
	target := host
	if port != 80 {
		target = net.JoinHostPort(host, strconv.Itoa(int(port)))
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyURL(upstream),
		DialContext:           func(ctx context.Context, _, _ string) (net.Conn, error) { return dialUpstreamTCP(ctx, upstream) },
		ResponseHeaderTimeout: 5 * time.Minute,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
	}
	defer tr.CloseIdleConnections()
	quiet := log.New(io.Discard, "", 0)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = target
			pr.Out.Host = pr.In.Host
		},
		Transport:     tr,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.logf(slog.LevelInfo, "egress: upstream proxy request failed", "host", host, "err", err)
			http.Error(w, "Runtime egress: cannot reach "+host+" through the upstream proxy", http.StatusBadGateway)
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
	serveOneConn(&replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(req.head), c)}, handler, quiet)
}

// serveOneConn serves HTTP on c until the client is done with it.
func serveOneConn(c net.Conn, handler http.Handler, quiet *log.Logger) {
	var handlers sync.WaitGroup
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.Add(1)
		defer handlers.Done()
		handler.ServeHTTP(w, r)
	})
	done := make(chan struct{})
	var once sync.Once
	srv := &http.Server{
		Handler:           wrapped,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          quiet,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				once.Do(func() { close(done) })
			}
		},
	}
	_ = srv.Serve(&oneConnListener{c: c})
	<-done
	handlers.Wait()
}
