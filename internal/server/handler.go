package server

import (
	"net/http"
	"net/netip"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/compat/e2b"
	"withruntime.dev/runtime/internal/dashboard"
	"withruntime.dev/runtime/internal/device"
	"withruntime.dev/runtime/internal/leader"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/template/registry"
)

// LoginConfig configures device login (`withruntime login`) and the
// dashboard. The zero value: no trials, polls every 5 s, links built from
// each request's Host.
type LoginConfig struct {
	// TrialHours is the sandbox-hours a key approved as a trial may use in
	// total (serve --trial-hours; 0: no trials).
	TrialHours float64
	// PollInterval is the least time between device-login polls (default
	// 5 s; whole seconds).
	PollInterval time.Duration
	// PublicURL is the server's URL as users reach it, for the links
	// device login prints (serve --public-url; default: the request's
	// scheme and Host).
	PublicURL string
	// TrustedProxies are reverse proxies in front of the server whose
	// X-Forwarded-For names the client, for device login's per-client
	// limits (serve --trusted-proxy; default none: the client is the TCP
	// peer).
	TrustedProxies []netip.Prefix
}

// handler is everything the server serves on its one listener: the API
// (with GET /metrics for keys without a limit, and device login) and the
// dashboard under /ui/, each request given an id, logged and measured by
// the metrics middleware.
func (s *Server) handler(cfg Config, limits sandbox.Limits) (http.Handler, error) {
	dev := device.New(device.Config{Store: s.Store, TrialHours: cfg.Login.TrialHours, Interval: cfg.Login.PollInterval})
	// A server whose templates are images in a registry (--driver
	// kubernetes) answers the template API from that registry, read-only.
	var tpl api.Templates = s.Templates
	if cat, ok := cfg.SandboxTemplates.(*registry.Catalog); ok {
		tpl = &registry.Templates{Catalog: cat}
	}
	h := api.New(api.Config{Manager: s.Manager, Store: s.Store, Templates: tpl, Log: cfg.Log,
		MaxUploadBytes: cfg.MaxUploadBytes, Limits: limits, Images: cfg.Images,
		Metrics: s.Metrics.Handler(), Device: dev, PublicURL: cfg.Login.PublicURL, TrustedProxies: cfg.Login.TrustedProxies, Leader: leaderStatus(cfg.Elector, s.Manager)})
	s.api = h
	dash, err := dashboard.New(dashboard.Config{API: h, Store: s.Store, Log: cfg.Log})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(dashboard.Prefix, dash)
	mux.Handle("GET /{$}", browserToDashboard(h))
	mux.Handle("/", h)
	return s.Metrics.Middleware(mux), nil
}

// E2BOptions configures the E2B-compatible API (see e2b.Config).
type E2BOptions struct {
	// Domain turns on the domain mode (serve --e2b-domain); "": off.
	Domain string
	// PublicTraffic: a sandbox's ports need no traffic access token unless
	// its create says so (serve --e2b-public-traffic).
	PublicTraffic bool
}

// E2BHandler returns the E2B-compatible API (internal/compat/e2b) over
// this server's API, measured by the metrics middleware, for serve
// --e2b-listen. Close it when done (it stops the directory watchers it
// holds).
func (s *Server) E2BHandler(opts E2BOptions) (http.Handler, func()) {
	h := e2b.New(e2b.Config{API: s.api, Store: s.Store, Log: s.log, Domain: opts.Domain, PublicTraffic: opts.PublicTraffic,
		SpoolDir: s.dataDir})
	return s.Metrics.Middleware(h), h.Close
}

// leaderStatus reports the election for GET /v1/health (nil without one).
// Leading is the manager's: true only while the leader-only work runs.
func leaderStatus(el leader.Elector, mgr *sandbox.Manager) func() api.LeaderStatus {
	if el == nil {
		return nil
	}
	return func() api.LeaderStatus {
		st := el.Status()
		return api.LeaderStatus{Identity: st.Identity, Leader: st.Leader, Leading: mgr.Leading()}
	}
}

// browserToDashboard sends a browser that asks for the server's root (its
// Accept names text/html) to the dashboard; API clients keep next's JSON
// answer there.
func browserToDashboard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "text/html") {
			http.Redirect(w, r, dashboard.Prefix, http.StatusFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}
