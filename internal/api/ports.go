package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	pathpkg "path"
	"strconv"
	"strings"

	"golang.org/x/net/idna"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/sandbox"
)

// The port relay: /v1/sandboxes/{id}/ports/{port}/{path} is a reverse
// proxy (HTTP, WebSocket and any other Upgrade) to a program listening on
// TCP port {port} on the sandbox's own loopback. Each connection to it is
// one relayed by the sandbox's agent over the agent channel
// (Manager.DialPort): the server never dials an address of the sandbox,
// so whatever the agent does, the relay reaches nothing but that sandbox's
// ports, and it works with the sandbox's internet off. What the program
// answers is hostile: its head is read with a cap (maxPortHeaderBytes),
// bodies stream through without being held, its cookies are held to the
// relay's path and its redirects kept under it.

// maxPortHeaderBytes caps the head (status line and headers) of an answer
// of a program in a sandbox.
const maxPortHeaderBytes = 64 << 10

type portRootCtx struct{}

// portRoot is how the E2B domain mode serves a port: at the root of a host
// of its own.
type portRoot struct{ rawPath, host string }

// PortAtRoot returns a context under which an in-process request to
// /v1/sandboxes/{id}/ports/{port}/ (with AsKey, never a request off the
// wire) is relayed as served at the root of a host of its own, as E2B's
// `<port>-<sandbox>.<domain>` hosts are: the program gets rawPath (escaped;
// the query is the request's) and the request's own Host and Authorization
// header, and answers pass with their cookies' domains dropped (host-only),
// not moved under the relay's path.
func PortAtRoot(ctx context.Context, rawPath string) context.Context {
	return context.WithValue(ctx, portRootCtx{}, portRoot{rawPath: rawPath})
}

// PortAtRootAs is PortAtRoot with the Host header the program in the
// sandbox sees set to host (E2B's mask_request_host) instead of the
// client's ("" keeps the client's); X-Forwarded-Host still says the
// client's.
func PortAtRootAs(ctx context.Context, rawPath, host string) context.Context {
	return context.WithValue(ctx, portRootCtx{}, portRoot{rawPath: rawPath, host: host})
}

func (s *Server) portRoutes() {
	for _, p := range []string{"/v1/sandboxes/{id}/ports/{port}", "/v1/sandboxes/{id}/ports/{port}/{rest...}"} {
		s.mux.HandleFunc(p, s.authed("* "+p, s.relayPort))
	}
}

// relayPort serves one request to a sandbox's port.
func (s *Server) relayPort(w http.ResponseWriter, r *http.Request) error {
	id, raw := r.PathValue("id"), r.PathValue("port")
	port, err := strconv.Atoi(raw)
	if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != raw {
		return badRequest("port %q is not a TCP port: give a number from 1 to 65535, as in /v1/sandboxes/%s/ports/8000/", raw, id)
	}
	root, atRoot := r.Context().Value(portRootCtx{}).(portRoot)
	prefix := "/v1/sandboxes/" + url.PathEscape(id) + "/ports/" + raw
	rest := root.rawPath
	if !atRoot {
		// What follows /v1/sandboxes/{id}/ports/{port}, however the
		// caller escaped those.
		rest = ""
		if segs := strings.SplitN(r.URL.EscapedPath(), "/", 7); len(segs) == 7 {
			rest = segs[6]
		}
	}
	if !strings.HasPrefix(rest, "/") {
		rest = "/" + rest
	}
	path, err := url.PathUnescape(rest)
	if err != nil {
		return badRequest("malformed path %q: %v", rest, err)
	}
	in := r.Context()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return s.cfg.Manager.DialPort(ctx, id, port)
		},
		// One relayed connection per request: nothing of a sandbox is kept
		// once the request is over.
		DisableKeepAlives:      true,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxPortHeaderBytes,
	}
	defer tr.CloseIdleConnections()
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", net.JoinHostPort("127.0.0.1", raw)
			pr.Out.URL.Path, pr.Out.URL.RawPath = path, rest
			h := pr.Out.Header
			// Never into the sandbox: Runtime and E2B keys and tokens.
			for _, name := range []string{"X-Api-Key", "X-Access-Token", "E2b-Traffic-Access-Token"} {
				h.Del(name)
			}
			h.Set("X-Forwarded-Host", pr.In.Host)
			h.Set("X-Forwarded-Proto", scheme(pr.In))
			dropRuntimeCookies(h)
			if atRoot {
				// The program's own Authorization passes (its users' logins),
				// but never a Runtime key sent along by mistake.
				if runtimeKeyIn(h.Get("Authorization")) {
					h.Del("Authorization")
				}
				pr.Out.Host = pr.In.Host
				if root.host != "" {
					pr.Out.Host = root.host
				}
				return
			}
			h.Del("Authorization") // it carried the caller's API key
			h.Set("X-Forwarded-Prefix", prefix)
			pr.Out.Host = net.JoinHostPort("localhost", raw)
		},
		Transport: no1xx{tr},
		ModifyResponse: func(resp *http.Response) error {
			if atRoot {
				hostOnlyCookies(resp.Header)
				relayLocation(resp.Header, "", raw, path, r.Host, scheme(r))
			} else {
				underPrefix(resp.Header, prefix, raw, path, r.Host, scheme(r))
			}
			return nil
		},
		ErrorLog: slog.NewLogLogger(s.cfg.Log.Handler(), slog.LevelInfo),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if in.Err() != nil {
				return // the client is gone
			}
			writeError(w, r, s.portError(id, port, err))
		},
	}
	proxy.ServeHTTP(w, r)
	return nil
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// portError explains a failed relay.
func (s *Server) portError(id string, port int, err error) error {
	var ce *errs.Error
	switch {
	case errors.Is(err, sandbox.ErrPortClosed):
		return &httpError{status: http.StatusBadGateway, code: agentapi.CodePortClosed,
			msg: fmt.Sprintf("sandbox %s: nothing accepts connections on port %d inside it: start a server listening on that port (on 127.0.0.1, ::1 or all addresses)", id, port)}
	case errors.Is(err, driver.ErrChannel):
		return s.channelRefused(id, err)
	case errors.As(err, &ce):
		return err
	}
	return &httpError{status: http.StatusBadGateway, code: "bad_gateway",
		msg: fmt.Sprintf("sandbox %s, port %d: the program there did not answer as an HTTP server (%v)", id, port, err)}
}

// hostOnlyCookies drops the Domain attribute of every cookie an answer
// sets, so that a program in one sandbox cannot set cookies for the API's
// host or another sandbox's (all share the parent domain).
func hostOnlyCookies(h http.Header) {
	cookies := h.Values("Set-Cookie")
	if len(cookies) == 0 {
		return
	}
	h.Del("Set-Cookie")
	for _, c := range cookies {
		h.Add("Set-Cookie", strings.Join(dropAttrs(c, "domain"), ";"))
	}
}

// dropAttrs splits a Set-Cookie value into its parts, leaving out the
// attributes named (lower case).
func dropAttrs(cookie string, names ...string) []string {
	parts := strings.Split(cookie, ";")
	out := parts[:1]
	for _, p := range parts[1:] {
		name, _, _ := strings.Cut(strings.TrimSpace(p), "=")
		drop := false
		for _, n := range names {
			drop = drop || strings.EqualFold(strings.TrimSpace(name), n)
		}
		if !drop {
			out = append(out, p)
		}
	}
	return out
}

// underPrefix keeps an answer relayed under prefix there: a cookie's Path
// is moved under the prefix (and its Domain dropped), so it never reaches
// the API's other routes, the dashboard or another sandbox's port; its
// Location is relayLocation's (reqPath: the path the program was asked
// for; apiHost and apiScheme: how the caller reached the API).
func underPrefix(h http.Header, prefix, port, reqPath, apiHost, apiScheme string) {
	if cookies := h.Values("Set-Cookie"); len(cookies) > 0 {
		h.Del("Set-Cookie")
		for _, c := range cookies {
			path := "/"
			for _, p := range strings.Split(c, ";")[1:] {
				name, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(strings.TrimSpace(name), "path") && strings.HasPrefix(strings.TrimSpace(val), "/") {
					path = strings.TrimSpace(val)
				}
			}
			parts := append(dropAttrs(c, "domain", "path"), " Path="+prefix+path)
			h.Add("Set-Cookie", strings.Join(parts, ";"))
		}
	}
	relayLocation(h, prefix, port, reqPath, apiHost, apiScheme)
}

// relayLocation keeps a program's redirect inside what the caller reached:
// the relay's prefix (native) or the root of the port's own host (the E2B
// domain mode, prefix ""). The program sees itself at
// http://localhost:PORT/reqPath, so its Location is resolved there, then:
//
//   - one to its own address (localhost, a loopback or unspecified address,
//     with its port) or to the very host and port the caller reached is
//     moved under the prefix (at the root in the domain mode), dot segments
//     (escaped ones too) resolved first, so no "/../" walks out to the API's
//     other routes;
//   - one to any other port of the caller's host name, to a subdomain of
//     it, or to another loopback port is dropped (the answer keeps its
//     status, without a Location): Go's client, and others, keep
//     Authorization (the caller's key) on a redirect to the same host name
//     whatever the port, and to its subdomains;
//   - one to another site passes: the client's own rules for cross-site
//     redirects apply (they drop Authorization).
//
// Host names are compared as clients compare them (IDNA's ASCII form,
// case and a final dot ignored); a Location that does not parse, or whose
// host has no such form, is dropped.
func relayLocation(h http.Header, prefix, port, reqPath, callerHost, callerScheme string) {
	loc := h.Get("Location")
	if loc == "" {
		return
	}
	h.Del("Location")
	u, err := url.Parse(strings.TrimSpace(loc))
	if err != nil {
		return
	}
	base := &url.URL{Scheme: "http", Host: "localhost:" + port, Path: reqPath}
	abs := base.ResolveReference(u)
	if abs.Scheme != "http" && abs.Scheme != "https" {
		h.Set("Location", loc) // mailto:, an app's own scheme: no HTTP client follows it with the key
		return
	}
	host, ok := hostName(abs.Hostname())
	if !ok {
		return
	}
	apiName, _ := hostName(hostOnly(callerHost))
	apiPort := portOf(callerHost, callerScheme)
	switch p := portOf(abs.Host, abs.Scheme); {
	case loopbackName(host) && p == port, host == apiName && p == apiPort:
		clean := pathpkg.Clean("/" + abs.Path)
		if strings.HasSuffix(abs.Path, "/") && clean != "/" {
			clean += "/" // a directory's redirect to itself with the slash (python's http.server) stays one
		}
		h.Set("Location", (&url.URL{Path: prefix + clean, RawQuery: abs.RawQuery, Fragment: abs.Fragment}).String())
	case loopbackName(host), host == apiName, apiName != "" && strings.HasSuffix(host, "."+apiName):
		// Dropped: the caller's host under another port, or a subdomain.
	default:
		h.Set("Location", loc)
	}
}

// hostName is a host name as clients compare them: IDNA's ASCII form, lower
// case, without a final dot; an IP address as itself. ok is false when the
// name has no ASCII form.
func hostName(name string) (string, bool) {
	name = strings.TrimSuffix(name, ".")
	if a, err := netip.ParseAddr(name); err == nil {
		return a.Unmap().String(), true
	}
	ascii, err := idna.Lookup.ToASCII(name)
	if err != nil || ascii == "" {
		return "", false
	}
	return strings.ToLower(ascii), true
}

// loopbackName says whether a host name (hostName's form) is the program's
// own machine as it sees it: localhost (and its subdomains), a loopback or
// the unspecified address.
func loopbackName(name string) bool {
	if a, err := netip.ParseAddr(name); err == nil {
		return a.IsLoopback() || a.IsUnspecified()
	}
	return name == "localhost" || strings.HasSuffix(name, ".localhost")
}

// hostOnly is hostport without its port (and an IPv6 address without its
// brackets).
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// portOf is the port hostport names, or the scheme's default.
func portOf(hostport, scheme string) string {
	if _, p, err := net.SplitHostPort(hostport); err == nil && p != "" {
		return p
	}
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// dropRuntimeCookies removes the dashboard's session and sign-in cookies
// from a request going into a sandbox: under TLS the session cookie has
// Path=/, so a browser sends it with every request to the API's host.
func dropRuntimeCookies(h http.Header) {
	cookies := h.Values("Cookie")
	if len(cookies) == 0 {
		return
	}
	h.Del("Cookie")
	var keep []string
	for _, line := range cookies {
		for _, c := range strings.Split(line, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(c), "=")
			if name == "" || strings.HasPrefix(name, "wr_") || strings.HasPrefix(name, "__Host-wr_") {
				continue
			}
			keep = append(keep, strings.TrimSpace(c))
		}
	}
	if len(keep) > 0 {
		h.Set("Cookie", strings.Join(keep, "; "))
	}
}

// runtimeKeyIn says whether an Authorization value carries a Runtime API
// key (`wr_...`), under any scheme.
func runtimeKeyIn(v string) bool {
	_, cred, _ := strings.Cut(strings.TrimSpace(v), " ")
	return strings.HasPrefix(strings.TrimSpace(cred), "wr_") || strings.HasPrefix(strings.TrimSpace(v), "wr_")
}
