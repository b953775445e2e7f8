package itest

import (
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/server"
)

// upstreamProxy is a corporate-style HTTP proxy on loopback: CONNECT and
// absolute-form requests, Basic credentials required, names resolved from
// its own map (the host's resolver knows none of them).
type upstreamProxy struct {
	url      *url.URL
	resolver *mapResolver
	mu       sync.Mutex
	seen     []string
}

func (u *upstreamProxy) log() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return strings.Join(u.seen, "\n")
}

func newUpstreamProxy(t *testing.T, resolver *mapResolver, user, pass string) *upstreamProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstreamProxy{resolver: resolver, url: &url.URL{Scheme: "http", Host: l.Addr().String(), User: url.UserPassword(user, pass)}}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	resolve := func(hostport string) (string, error) {
		host, port, err := net.SplitHostPort(hostport)
		if err != nil {
			host, port = hostport, "80"
		}
		addrs, err := resolver.LookupNetIP(t.Context(), "ip4", host)
		if err != nil {
			return "", err
		}
		return net.JoinHostPort(addrs[0].String(), port), nil
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {},
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			target, err := resolve(addr)
			if err != nil {
				return nil, err
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", target)
		}},
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, r.Method+" "+r.RequestURI)
		u.mu.Unlock()
		if r.Header.Get("Proxy-Authorization") != want {
			w.Header().Set("Proxy-Authenticate", `Basic realm="corp"`)
			http.Error(w, "proxy credentials required", http.StatusProxyAuthRequired)
			return
		}
		if r.Method != http.MethodConnect {
			r.Header.Del("Proxy-Authorization")
			rp.ServeHTTP(w, r)
			return
		}
		target, err := resolve(r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		up, err := net.Dial("tcp", target)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		c, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			up.Close()
			return
		}
		_, _ = c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
		go func() { _, _ = io.Copy(up, buf); up.(*net.TCPConn).CloseWrite() }()
		_, _ = io.Copy(c, up)
		c.Close()
		up.Close()
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return u
}

// TestUpstreamProxy: on a network where only a proxy reaches out (the
// host resolves no outside name, and connects to the fake internet only
// through the proxy), a sandbox allowed to a host reaches it over HTTPS
// (CONNECT) and plain HTTP (absolute form), with the proxy's credentials
// added on the host and never visible inside; a name on NO_PROXY is
// dialed directly. The sandbox trusts the fake internet's CA through
// --sandbox-ca alone.
func TestUpstreamProxy(t *testing.T) {
	in := newFakeInternet(t)
	up := newUpstreamProxy(t, in.resolver, "corp-user", "corp-pass-42")
	caFile := filepath.Join(t.TempDir(), "corp-ca.pem")
	if err := os.WriteFile(caFile, in.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	hostResolver := &mapResolver{addrs: map[string][]netip.Addr{inetOther: in.resolver.addrs[inetOther]}}
	e := newEnv(t, withInternet(in), func(c *server.Config) {
		c.Egress.Resolver = hostResolver
		c.Egress.SandboxCAs = []string{caFile}
		c.Egress.Upstream = func(scheme, host string) *url.URL {
			if host == inetOther { // NO_PROXY
				return nil
			}
			return up.url
		}
	})
	sb := e.create(api.CreateSandboxRequest{Network: &api.NetworkPolicy{Allow: []string{inetAPI, inetOther}}})
	for _, tc := range []struct{ cmd, want string }{
		{"curl -sS -m 10 https://" + inetAPI + "/", "hello from " + inetAPI},
		{"curl -sS -m 10 http://" + inetAPI + "/", "hello from " + inetAPI},
		{"python3 -c \"import urllib.request as u; print(u.urlopen('https://" + inetAPI + "/').read().decode())\"", "hello from " + inetAPI},
		{"curl -sS -m 10 https://" + inetOther + "/", "hello from " + inetOther},
	} {
		if res := e.sh(sb.ID, tc.cmd); !strings.Contains(res.Stdout, tc.want) {
			t.Errorf("%s: exit %d, %q %q; want %q", tc.cmd, res.ExitCode, res.Stdout, res.Stderr, tc.want)
		}
	}
	log := up.log()
	if !strings.Contains(log, "CONNECT "+inetAPI+":443") || !strings.Contains(log, "GET http://"+inetAPI+"/") {
		t.Errorf("the upstream proxy saw:\n%s", log)
	}
	if strings.Contains(log, inetOther) {
		t.Errorf("a NO_PROXY name went through the upstream proxy:\n%s", log)
	}
	if res := e.sh(sb.ID, "env; cat /etc/resolv.conf; grep -rs corp-pass /etc /proc/1/environ /proc/self/environ; true"); strings.Contains(res.Stdout, "corp-") || strings.Contains(strings.ToLower(res.Stdout), "_proxy=") {
		t.Errorf("the upstream proxy shows inside the sandbox:\n%s", res.Stdout)
	}
	// Not on the allow list: refused on the host, never sent upstream.
	before := up.log()
	if res := e.sh(sb.ID, "curl -sS -m 10 https://not-allowed.net.test/"); res.ExitCode == 0 {
		t.Errorf("a name off the allow list was reached: %+v", res)
	}
	if up.log() != before {
		t.Errorf("a refused name reached the upstream proxy:\n%s", up.log())
	}
}
