package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"strings"

	"withruntime.dev/runtime/internal/errs"
)

// agentRoutes are the sandbox-scoped route prefixes served by the agent.
var agentRoutes = []string{"exec", "processes", "files"}

// forward sends a sandbox-scoped request (exec, processes, files) to the
// sandbox's agent, streaming both ways. The server checks the key, the
// sandbox's state and the upload cap; the agent does the rest.
func (s *Server) forward(w http.ResponseWriter, r *http.Request) error {
	id, rest := r.PathValue("id"), r.PathValue("rest")
	if !isAgentRoute(rest) {
		return notFoundRoute(r)
	}
	if strings.Contains(r.URL.RawQuery, "%00") {
		return badRequest("the path contains a NUL byte; file paths cannot contain NUL")
	}
	if r.Method == http.MethodPut && r.ContentLength > s.cfg.MaxUploadBytes {
		return errs.New(errs.TooLarge, "upload of %d bytes is over the %d-byte cap per file; split it or raise --max-upload-bytes", r.ContentLength, s.cfg.MaxUploadBytes)
	}
	tr, err := s.cfg.Manager.AgentTransport(r.Context(), id)
	if err != nil {
		return err
	}
	if r.Body != nil && r.Method == http.MethodPut {
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", "agent", "agent"
			pr.Out.URL.Path, pr.Out.URL.RawPath = "/"+rest, ""
			pr.Out.Header.Del("Authorization")
		},
		Transport:     tr,
		FlushInterval: -1, // NDJSON events go out as the agent writes them
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, r, s.forwardError(r.Context(), id, err))
		},
	}
	proxy.ServeHTTP(w, r)
	return nil
}

// forwardError explains a failed round trip to the agent: an upload over
// the cap, a sandbox that stopped meanwhile, or a sandbox that died.
func (s *Server) forwardError(ctx context.Context, id string, err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errs.New(errs.TooLarge, "upload is over the %d-byte cap per file; nothing was written", mbe.Limit)
	}
	if _, rerr := s.cfg.Manager.Running(context.WithoutCancel(ctx), id); rerr != nil {
		return rerr
	}
	return fmt.Errorf("sandbox %s: the agent did not answer: %w", id, err)
}

func isAgentRoute(rest string) bool {
	for _, p := range agentRoutes {
		if rest == p || strings.HasPrefix(rest, p+"/") {
			return true
		}
	}
	return false
}
