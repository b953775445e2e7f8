package withruntime

import (
	"context"
	"net/url"

	"withruntime.dev/runtime/sdk/go/wire"
)

// Volumes: storage that outlives sandboxes, owned by the key that made it
// and named among its volumes. A create mounts them (Options.Volumes);
// their size is a hard quota (a write past it fails inside with ENOSPC),
// counts in the key's disk quota and is billed at the storage price. See
// api/openapi.yaml, tag volumes.
type (
	// CreateVolumeRequest is the body of POST /v1/volumes.
	CreateVolumeRequest = wire.CreateVolumeRequest
	// VolumeInfo is a volume as the server describes it.
	VolumeInfo = wire.Volume
	// VolumeList is the body of GET /v1/volumes.
	VolumeList = wire.VolumeList
	// VolumeMount is one volume a sandbox mounts: its name, the absolute
	// path inside the sandbox, and whether it is read-only.
	VolumeMount = wire.VolumeMount
)

// CreateVolume makes the key's volume name of sizeMiB MiB (at least 16).
// Errors: ErrBadRequest (name, size), ErrConflict (the key has a volume of
// that name), ErrQuota (the key's disk quota), ErrNoSpace (the host's disk),
// ErrNotImplemented (the server's driver keeps no volumes), ErrUnauthorized.
func (c *Client) CreateVolume(ctx context.Context, name string, sizeMiB int64) (VolumeInfo, error) {
	var v VolumeInfo
	err := c.doJSON(ctx, "POST", "/v1/volumes", CreateVolumeRequest{Name: name, SizeMiB: sizeMiB}, &v)
	return v, err
}

// Volume returns the key's volume name, with the bytes its files take and
// the sandboxes that mount it. ErrNotFound when the key has none of that
// name (another key's volume is never found).
func (c *Client) Volume(ctx context.Context, name string) (VolumeInfo, error) {
	var v VolumeInfo
	err := c.doJSON(ctx, "GET", "/v1/volumes/"+url.PathEscape(name), nil, &v)
	return v, err
}

// Volumes lists the key's volumes, by name.
func (c *Client) Volumes(ctx context.Context) ([]VolumeInfo, error) {
	var l VolumeList
	if err := c.doJSON(ctx, "GET", "/v1/volumes", nil, &l); err != nil {
		return nil, err
	}
	return l.Volumes, nil
}

// DeleteVolume deletes the key's volume name and its files. ErrConflict
// while a sandbox that is not stopped (a paused one included) mounts it:
// the error's message names them. ErrNotFound when there is none.
func (c *Client) DeleteVolume(ctx context.Context, name string) error {
	return c.doJSON(ctx, "DELETE", "/v1/volumes/"+url.PathEscape(name), nil, nil)
}
