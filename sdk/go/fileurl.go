package withruntime

import "context"

// FileURL signs a URL that does req.Operation ("read": GET; "write": PUT
// the bytes) on req.Path with no API key, as this client's key, for
// req.ExpiresInSeconds (0: an hour; at most 7 days). It stops working when
// it expires, when the sandbox stops, or when the key is revoked. Errors:
// ErrBadRequest, ErrNotFound, ErrSandboxStopped.
func (s *Sandbox) FileURL(ctx context.Context, req FileURLRequest) (FileURL, error) {
	var out FileURL
	err := s.c.doJSON(ctx, "POST", s.path("/files/url"), req, &out)
	return out, err
}
