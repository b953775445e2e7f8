package e2b

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/store"
)

// E2B's domain mode. With E2B_DOMAIN=D (and no E2B_API_URL or
// E2B_SANDBOX_URL) the SDKs call https://api.D for the control plane and
// https://PORT-SANDBOX.D for a sandbox's port PORT: 49983 is envd, 49999
// the code interpreter, and sandbox.get_host(port) is the host of any other
// port, where a program in the sandbox listens. Runtime serves those hosts
// when started with --e2b-domain D:
//
//   - api.D: the control plane, as on any other host.
//   - 49983-SANDBOX.D and 49999-SANDBOX.D: the data plane, with the access
//     token as always; the token must be SANDBOX's.
//   - PORT-SANDBOX.D, any other port: the port relay of Runtime's API
//     (/v1/sandboxes/{id}/ports/{port}/, served at the host's root, as the
//     sandbox's owner). Public unless the sandbox was created with
//     network.allowPublicTraffic false (or the server's default says
//     otherwise): then the request must carry the sandbox's traffic access
//     token in e2b-traffic-access-token, as E2B's proxy wants.
//
// E2B's sandbox ids go into host names, where "_" has no place (wildcard
// certificates do not match it), so the facade names a sandbox by Runtime's
// id without its "sbx_" prefix, and takes either form.

// idPrefix begins every Runtime sandbox id.
const idPrefix = "sbx_"

// e2bID is the E2B name of Runtime sandbox id.
func e2bID(id string) string { return strings.TrimPrefix(id, idPrefix) }

// runtimeID is the Runtime id of an E2B sandbox id (either form).
func runtimeID(id string) string {
	if strings.HasPrefix(id, idPrefix) {
		return id
	}
	return idPrefix + id
}

// domain is the sandboxes' domain a create or connect answers (nil when
// the domain mode is off: the SDKs then use their own).
func (s *Server) domain() *string {
	if s.cfg.Domain == "" {
		return nil
	}
	d := s.cfg.Domain
	return &d
}

// serveDomain serves a request to a host of the domain and reports
// whether it did; other hosts (an address, localhost) are left to header
// routing.
func (s *Server) serveDomain(w http.ResponseWriter, r *http.Request) bool {
	host := strings.ToLower(r.Host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(host, ".")
	label, ok := strings.CutSuffix(host, "."+s.cfg.Domain)
	if !ok {
		return host == s.cfg.Domain && s.notOurHost(w, r)
	}
	if label == "api" {
		s.control.ServeHTTP(w, r)
		return true
	}
	rawPort, id, ok := strings.Cut(label, "-")
	port, err := strconv.Atoi(rawPort)
	if !ok || err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != rawPort || id == "" || strings.Contains(id, ".") {
		return s.notOurHost(w, r)
	}
	rid := runtimeID(id)
	if hid := r.Header.Get("E2b-Sandbox-Id"); hid != "" && runtimeID(hid) != rid {
		writeError(w, http.StatusBadRequest, "the E2b-Sandbox-Id header names sandbox %s but the host is sandbox %s's", hid, id)
		return true
	}
	switch rawPort {
	case portEnvd, portCode:
		// The data plane, the token checked as always (against this
		// host's sandbox).
		r.Header.Set("E2b-Sandbox-Id", id)
		r.Header.Set("E2b-Sandbox-Port", rawPort)
		s.envd.ServeHTTP(w, r)
	default:
		s.servePort(w, r, rid, rawPort)
	}
	return true
}

func (s *Server) notOurHost(w http.ResponseWriter, r *http.Request) bool {
	writeError(w, http.StatusNotFound, "host %s is not one Runtime serves: use api.%s for the API and PORT-SANDBOX.%s for a sandbox's port",
		r.Host, s.cfg.Domain, s.cfg.Domain)
	return true
}

// servePort relays a request to port of sandbox rid through the API's
// port relay, as the sandbox's owner, after the traffic check: a sandbox
// whose traffic is not public needs its traffic access token (any token
// the facade handed out for it), sent in e2b-traffic-access-token.
func (s *Server) servePort(w http.ResponseWriter, r *http.Request, rid, port string) {
	sb, err := s.cfg.Store.GetSandbox(r.Context(), rid)
	if errors.Is(err, store.ErrNotFound) || (err == nil && sb.State == store.StateStopped) {
		// E2B's proxy's own answer, word for word (its SDKs and tests read
		// the message and the sandboxId); detail is Runtime's.
		writeJSON(w, http.StatusBadGateway, map[string]any{"code": http.StatusBadGateway, "message": "The sandbox was not found",
			"sandboxId": e2bID(rid), "detail": "the sandbox " + e2bID(rid) + " does not exist or has stopped"})
		return
	}
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	public, err := s.cfg.Store.E2BPublicTraffic(r.Context(), rid)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	if !public {
		if status, err := s.trafficAllowed(r, rid); err != nil {
			writeError(w, status, "%v", err)
			return
		}
	}
	key, err := s.cfg.Store.GetKey(r.Context(), sb.KeyID)
	if err != nil {
		writeError(w, http.StatusBadGateway, "the key that created sandbox %s no longer exists", e2bID(rid))
		return
	}
	mask, err := s.cfg.Store.E2BMaskHost(r.Context(), rid)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	if mask != "" {
		mask = strings.ReplaceAll(mask, "${PORT}", port)
	}
	ctx := api.PortAtRootAs(api.AsKey(r.Context(), key), r.URL.EscapedPath(), mask)
	in := r.WithContext(ctx)
	in.URL = &url.URL{Path: "/v1/sandboxes/" + rid + "/ports/" + port + "/", RawQuery: r.URL.RawQuery}
	s.cfg.API.ServeHTTP(w, in)
}

// trafficAllowed checks the traffic access token of a request to a port
// of sandbox rid, whose traffic is not public.
func (s *Server) trafficAllowed(r *http.Request, rid string) (int, error) {
	token := r.Header.Get("E2b-Traffic-Access-Token")
	if token == "" {
		token = r.Header.Get("X-Access-Token") // the header routing's data plane
	}
	if token == "" {
		return http.StatusForbidden, fmt.Errorf("sandbox %s's ports are not public (it was created with network.allowPublicTraffic false): "+
			"send its traffic access token (trafficAccessToken of the create or connect) in the e2b-traffic-access-token header", e2bID(rid))
	}
	tok, err := s.cfg.Store.E2BTokenByHash(r.Context(), hashToken(token))
	if errors.Is(err, store.ErrNotFound) || (err == nil && tok.SandboxID != rid) {
		return http.StatusForbidden, fmt.Errorf("the traffic access token is not sandbox %s's: use the trafficAccessToken of its create or connect", e2bID(rid))
	}
	if err != nil {
		return http.StatusInternalServerError, err
	}
	return 0, nil
}
