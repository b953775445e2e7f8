package withruntime

import (
	"context"
	"net/url"
	"time"
)

// Metrics returns the sandbox's recent resource use, oldest first: a
// sample per meter interval (5 s by default) of the last hour at most,
// measured on the host, and one taken now when the last is older; only
// those from from to to (each ignored when zero). Empty for a stopped
// sandbox. The history lives in the server's memory: a restart begins it
// again. Errors: ErrNotFound, ErrBadRequest (to before from).
func (s *Sandbox) Metrics(ctx context.Context, from, to time.Time) ([]SandboxMetric, error) {
	v := url.Values{}
	if !from.IsZero() {
		v.Set("from", from.UTC().Format(time.RFC3339Nano))
	}
	if !to.IsZero() {
		v.Set("to", to.UTC().Format(time.RFC3339Nano))
	}
	path := s.path("/metrics")
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out SandboxMetrics
	if err := s.c.doJSON(ctx, "GET", path, nil, &out); err != nil {
		return nil, err
	}
	return out.Metrics, nil
}
