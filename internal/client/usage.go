package client

import (
	"context"
	"net/http"
	"net/url"

	"withruntime.dev/runtime/internal/api"
)

// Usage fetches GET /v1/usage; from and to may be empty (server defaults).
func (c *Client) Usage(ctx context.Context, from, to, groupBy string) (api.UsageReport, error) {
	q := url.Values{}
	for k, v := range map[string]string{"from": from, "to": to, "groupBy": groupBy} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var out api.UsageReport
	return out, c.do(ctx, http.MethodGet, "/v1/usage?"+q.Encode(), nil, &out)
}

// CreateKeyWithLimit creates an API key with a daily spending limit in
// micro-dollars (0: none).
func (c *Client) CreateKeyWithLimit(ctx context.Context, name string, dailyLimitMicros int64) (api.Key, error) {
	return c.CreateKeyWith(ctx, api.CreateKeyRequest{Name: name, DailyLimitMicros: dailyLimitMicros})
}

// CreateKeyWith creates an API key as req asks (name, daily limit, quotas).
func (c *Client) CreateKeyWith(ctx context.Context, req api.CreateKeyRequest) (api.Key, error) {
	var k api.Key
	return k, c.do(ctx, http.MethodPost, "/v1/keys", req, &k)
}
