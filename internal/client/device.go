package client

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"withruntime.dev/runtime/internal/api"
)

// DeviceAuthorize starts a device login (no key needed).
func (c *Client) DeviceAuthorize(ctx context.Context, req api.DeviceAuthorizeRequest) (api.DeviceAuthorization, error) {
	var out api.DeviceAuthorization
	return out, c.open(ctx, "/v1/device/authorize", req, &out)
}

// DeviceToken polls a device login (no key needed). Until it is approved
// the error is an *APIError whose Code is an RFC 8628 code
// (authorization_pending, slow_down, expired_token, access_denied).
func (c *Client) DeviceToken(ctx context.Context, deviceCode string) (api.DeviceToken, error) {
	var out api.DeviceToken
	return out, c.open(ctx, "/v1/device/token", api.DeviceTokenRequest{DeviceCode: deviceCode}, &out)
}

// open POSTs in to an unauthenticated route and decodes the answer.
func (c *Client) open(ctx context.Context, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	resp, err := c.roundTrip(ctx, http.MethodPost, path, bytes.NewReader(b), "application/json", "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}
