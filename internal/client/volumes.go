package client

import (
	"context"
	"net/url"

	"withruntime.dev/runtime/internal/api"
)

// CreateVolume makes the key's volume name of sizeMiB MiB.
func (c *Client) CreateVolume(ctx context.Context, name string, sizeMiB int64) (api.Volume, error) {
	var out api.Volume
	err := c.do(ctx, "POST", "/v1/volumes", api.CreateVolumeRequest{Name: name, SizeMiB: sizeMiB}, &out)
	return out, err
}

// ListVolumes lists the key's volumes.
func (c *Client) ListVolumes(ctx context.Context) ([]api.Volume, error) {
	var out api.VolumeList
	err := c.do(ctx, "GET", "/v1/volumes", nil, &out)
	return out.Volumes, err
}

// DeleteVolume deletes the key's volume name and its files.
func (c *Client) DeleteVolume(ctx context.Context, name string) error {
	return c.do(ctx, "DELETE", "/v1/volumes/"+url.PathEscape(name), nil, nil)
}
