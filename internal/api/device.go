package api

import (
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/device"
	"withruntime.dev/runtime/internal/metrics"
)

// Device login (RFC 8628; package device). authorize and token are open
// (the CLI has no key yet); the approval routes are for keys without a
// limit (adminRoutes), which the dashboard calls.

// DevicePath is the dashboard page where user codes are approved.
const DevicePath = "/ui/device"

func (s *Server) deviceRoutes() {
	if s.cfg.Device == nil {
		return
	}
	s.register("POST", "/v1/device/authorize", s.open(s.deviceAuthorize))
	s.register("POST", "/v1/device/token", s.open(s.deviceToken))
	s.handle("GET", "/v1/device/requests/{userCode}", s.deviceLookup)
	s.handle("POST", "/v1/device/approve", s.deviceApprove)
	s.handle("POST", "/v1/device/deny", s.deviceDeny)
}

// open adapts an unauthenticated handler that returns an error.
func (s *Server) open(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			if isInternal(err) {
				s.cfg.Log.Error("request failed", "method", metrics.LogField(r.Method), "path", metrics.LogField(r.URL.Path), "err", err)
			}
			writeError(w, r, err)
		}
	}
}

func (s *Server) deviceAuthorize(w http.ResponseWriter, r *http.Request) error {
	var req DeviceAuthorizeRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	g, err := s.cfg.Device.Authorize(r.Context(), device.AuthorizeParams{ClientName: req.ClientName, Trial: req.Trial,
		Client: s.clientAddr(r)})
	if err != nil {
		return err
	}
	page := s.publicURL(r) + DevicePath
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, DeviceAuthorization{
		DeviceCode: g.DeviceCode, UserCode: g.UserCode,
		VerificationURI: page, VerificationURIComplete: page + "?code=" + url.QueryEscape(g.UserCode),
		Interval: int64(g.Interval / time.Second), ExpiresIn: int64(g.ExpiresIn / time.Second),
	})
	return nil
}

func (s *Server) deviceToken(w http.ResponseWriter, r *http.Request) error {
	var req DeviceTokenRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	iss, err := s.cfg.Device.Token(r.Context(), req.DeviceCode)
	var de *device.Error
	if errors.As(err, &de) {
		// RFC 8628 3.5: these are 400 answers with the RFC's error code.
		return &httpError{status: http.StatusBadRequest, code: de.Code, msg: de.Msg}
	}
	if err != nil {
		return err
	}
	s.cfg.Log.Info("device login: key issued", "key", iss.Key.ID, "name", iss.Key.Name, "trialHours", iss.TrialHours)
	writeJSON(w, http.StatusOK, DeviceToken{APIKey: iss.Secret, KeyID: iss.Key.ID, KeyName: iss.Key.Name,
		DailyLimitMicros: iss.DailyLimitMicros, TrialHours: iss.TrialHours})
	return nil
}

func (s *Server) deviceLookup(w http.ResponseWriter, r *http.Request) error {
	p, err := s.cfg.Device.Lookup(r.Context(), r.PathValue("userCode"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, DeviceRequest{UserCode: p.UserCode, ClientName: p.ClientName,
		TrialRequested: p.TrialRequested, ExpiresAt: p.ExpiresAt, TrialHours: s.cfg.Device.TrialHours()})
	return nil
}

func (s *Server) deviceApprove(w http.ResponseWriter, r *http.Request) error {
	var req DeviceApproveRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	by := keyFrom(r.Context()).ID
	if err := s.cfg.Device.Approve(r.Context(), device.Approval{UserCode: req.UserCode, KeyName: req.KeyName,
		DailyLimitMicros: req.DailyLimitMicros, Trial: req.Trial, By: by}); err != nil {
		return err
	}
	s.cfg.Log.Info("device login approved", "by", by, "keyName", req.KeyName, "trial", req.Trial)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) deviceDeny(w http.ResponseWriter, r *http.Request) error {
	var req DeviceDenyRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := s.cfg.Device.Deny(r.Context(), req.UserCode, keyFrom(r.Context()).ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// publicURL is the server's URL as its callers reach it: Config.PublicURL,
// else the request's own scheme and Host.
func (s *Server) publicURL(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return strings.TrimRight(s.cfg.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// clientAddr is the address a request came from, for limits per client
// (device login's): the TCP peer's. Only when the peer is one of
// Config.TrustedProxies is X-Forwarded-For read, from its end: the client
// is the last address there that is not a trusted proxy itself (what the
// nearest untrusted hop said it was). Anything before it in the header is
// the client's own word and never used. The zero Addr: unknown (an
// in-process request).
func (s *Server) clientAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	client := ap.Addr().Unmap()
	if !s.trusted(client) {
		return client
	}
	fwd := r.Header.Values("X-Forwarded-For")
	for i := len(fwd) - 1; i >= 0; i-- {
		hops := strings.Split(fwd[i], ",")
		for j := len(hops) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.TrimSpace(hops[j]))
			if err != nil {
				return client // not an address: what came before it cannot be trusted either
			}
			client = a.Unmap()
			if !s.trusted(client) {
				return client
			}
		}
	}
	return client
}

// trusted says whether a is one of the trusted reverse proxies.
func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
