package client

import (
	"context"

	"withruntime.dev/runtime/internal/api"
)

// Health asks the server for GET /v1/health (no key needed): whether it
// answers, and its build (Version), warm pool and leader election.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	err := c.do(ctx, "GET", "/v1/health", nil, &h)
	return h, err
}
