package main

// The MCP streamable HTTP server is not an open door (case C32). It runs
// commands in sandboxes for whoever reaches it, so:
//   - a request whose Origin header is present and is not the server's own
//     origin (or one allowed with --allow-origin) is refused with 403, as the
//     MCP transport rules require against DNS rebinding; the MCP SDK adds its
//     own check that a loopback listener is addressed by a loopback Host;
//   - every request carries `Authorization: Bearer TOKEN`, TOKEN being the
//     server's MCP token (WITHRUNTIME_MCP_TOKEN, else one generated at start
//     and printed on stderr) or a Runtime API key, which then owns the
//     session's sandboxes (so a tenant key keeps its limits); else 401;
//   - a listener that is not loopback needs a configured token, or the
//     server refuses to start.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	withruntime "withruntime.dev/runtime/sdk/go"
)

// envMCPToken configures the MCP HTTP server's token.
const envMCPToken = "WITHRUNTIME_MCP_TOKEN"

// minMCPTokenLen is the shortest token accepted from the environment.
const minMCPTokenLen = 16

// apiKeyTTL is how long a Runtime key checked with the server is trusted
// before it is checked again (so that a revoked key stops working soon).
const apiKeyTTL = time.Minute

// mcpHTTPConfig is what serveMCPHTTP needs beyond the MCP server.
type mcpHTTPConfig struct {
	addr string
	idle time.Duration
	// token is the configured MCP token ("": generate one, loopback only).
	token string
	// allowOrigins are origins allowed besides the server's own.
	allowOrigins []string
	// newClient returns a Runtime client for an API key (to check it, and
	// to run the sandboxes of the sessions it opens).
	newClient func(apiKey string) (*withruntime.Client, error)
}

// serveMCPHTTP serves streamable HTTP at /mcp until ctx ends.
func serveMCPHTTP(ctx context.Context, srv *mcp.Server, cfg mcpHTTPConfig) error {
	if cfg.token != "" && len(cfg.token) < minMCPTokenLen {
		return fmt.Errorf("%s is %d characters; use a random secret of at least %d (for example `openssl rand -hex 32`)", envMCPToken, len(cfg.token), minMCPTokenLen)
	}
	refuse := func(addr string) error {
		return fmt.Errorf("refusing to serve MCP on %s, which is not a loopback address, without a token: anyone who reaches it could run commands; "+
			"set %s to a random secret (for example `openssl rand -hex 32`) and give it to your MCP clients, or bind 127.0.0.1", addr, envMCPToken)
	}
	// Refused before listening, so the port is never open to others.
	if cfg.token == "" && !loopbackName(ctx, cfg.addr) {
		return refuse(cfg.addr)
	}
	l, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	loopback := isLoopback(l.Addr())
	if !loopback && cfg.token == "" {
		l.Close()
		return refuse(l.Addr().String())
	}
	token := cfg.token
	if token == "" {
		token = newMCPToken()
		fmt.Fprintf(os.Stderr, "withruntime: MCP token (send it as `Authorization: Bearer TOKEN`; set %s to choose one): %s\n", envMCPToken, token)
	}
	origins, err := ownOrigins(cfg.addr, l.Addr(), loopback, cfg.allowOrigins)
	if err != nil {
		l.Close()
		return err
	}
	keys := &keyChecker{newClient: cfg.newClient, checked: map[string]time.Time{}}
	verify := func(ctx context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(token)) == 1 {
			return &auth.TokenInfo{UserID: "mcp-token"}, nil
		}
		return keys.check(ctx, tok)
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{SessionTimeout: cfg.idle})
	mux := http.NewServeMux()
	mux.Handle("/mcp", checkOrigin(origins, auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(mcpHandler)))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	fmt.Fprintf(os.Stderr, "withruntime: MCP over streamable HTTP at http://%s/mcp\n", l.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	return nil
}

// loopbackName reports whether addr (host:port) names only loopback
// addresses; an empty host means every interface.
func loopbackName(ctx context.Context, addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return false
		}
	}
	return true
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

func newMCPToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return "mcp_" + hex.EncodeToString(b[:])
}

// ownOrigins returns the origins a browser uses for this server: the
// address as given and as bound, and for a loopback listener its other
// loopback names; plus the allowed ones. Origins compare in lower case.
func ownOrigins(given string, bound net.Addr, loopback bool, allow []string) (map[string]bool, error) {
	_, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return nil, err
	}
	hosts := []string{bound.String()}
	if h, _, err := net.SplitHostPort(given); err == nil && h != "" {
		hosts = append(hosts, net.JoinHostPort(h, port))
	}
	if loopback {
		for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
			hosts = append(hosts, net.JoinHostPort(h, port))
		}
	}
	out := map[string]bool{}
	for _, h := range hosts {
		out["http://"+strings.ToLower(h)] = true
	}
	for _, o := range allow {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("--allow-origin %q: want an origin such as http://localhost:6274 (scheme and host, no path)", o)
		}
		out[strings.ToLower(u.Scheme+"://"+u.Host)] = true
	}
	return out, nil
}

// checkOrigin refuses, with 403, a request whose Origin header is present
// and not one of origins: a web page the user visits (possibly under a
// name rebound to this address) must not drive the server.
func checkOrigin(origins map[string]bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		values := r.Header.Values("Origin")
		if len(values) > 1 || (len(values) == 1 && !origins[strings.ToLower(values[0])]) {
			http.Error(w, fmt.Sprintf("Forbidden: origin %q may not use this MCP server (allow it with --allow-origin)", strings.Join(values, ", ")), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// keyChecker accepts Runtime API keys that the Runtime server accepts,
// remembering each for apiKeyTTL.
type keyChecker struct {
	newClient func(apiKey string) (*withruntime.Client, error)

	mu      sync.Mutex
	checked map[string]time.Time // SHA-256 of the key -> checked until
}

// check returns the TokenInfo of a valid Runtime key: UserID names the key
// (by hash), so that the MCP SDK keeps its sessions to it, and Extra holds
// the key for the session's sandboxes.
func (k *keyChecker) check(ctx context.Context, key string) (*auth.TokenInfo, error) {
	if !strings.HasPrefix(key, "wr_") {
		return nil, fmt.Errorf("%w: not this server's MCP token, nor a Runtime API key", auth.ErrInvalidToken)
	}
	sum := sha256.Sum256([]byte(key))
	id := hex.EncodeToString(sum[:])
	info := &auth.TokenInfo{UserID: "key:" + id, Extra: map[string]any{apiKeyExtra: key}}
	k.mu.Lock()
	until, ok := k.checked[id]
	k.mu.Unlock()
	if ok && time.Now().Before(until) {
		return info, nil
	}
	c, err := k.newClient(key)
	if err != nil {
		return nil, err
	}
	// Any authenticated read would do; this one is cheap for every key.
	if _, err := c.List(ctx, withruntime.ListFilter{State: "starting"}); err != nil {
		if errors.Is(err, withruntime.ErrUnauthorized) {
			return nil, fmt.Errorf("%w: not this server's MCP token, nor a valid Runtime API key", auth.ErrInvalidToken)
		}
		return nil, fmt.Errorf("checking the API key with the Runtime server: %w", err)
	}
	k.mu.Lock()
	k.checked[id] = time.Now().Add(apiKeyTTL)
	k.mu.Unlock()
	return info, nil
}

// apiKeyExtra is the TokenInfo.Extra entry holding a session's Runtime key.
const apiKeyExtra = "withruntimeAPIKey"
