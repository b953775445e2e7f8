package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"withruntime.dev/runtime/internal/agentapi"
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

func volumeFilesPath(name, route, path string, extra url.Values) string {
	q := url.Values{"path": {path}}
	for k, v := range extra {
		q[k] = v
	}
	return "/v1/volumes/" + url.PathEscape(name) + "/files" + route + "?" + q.Encode()
}

// UploadVolumeFile is PUT /v1/volumes/{name}/files: body streamed to path in
// the volume, written whole or not at all (missing parent directories are
// made; the file is 0644, owned by the sandbox user).
func (c *Client) UploadVolumeFile(ctx context.Context, name, path string, body io.Reader) error {
	resp, err := c.sendAs(ctx, http.MethodPut, volumeFilesPath(name, "", path, nil), body, "application/octet-stream", "application/json")
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// DownloadVolumeFile is GET /v1/volumes/{name}/files: the regular file at
// path in the volume, as a stream the caller closes, and its size in bytes
// (-1 when the server did not say).
func (c *Client) DownloadVolumeFile(ctx context.Context, name, path string) (io.ReadCloser, int64, error) {
	resp, err := c.send(ctx, http.MethodGet, volumeFilesPath(name, "", path, nil), nil, "application/octet-stream")
	if err != nil {
		return nil, 0, err
	}
	return resp.Body, resp.ContentLength, nil
}

// ListVolumeFiles is GET /v1/volumes/{name}/files/list: one page of the
// directory at path in the volume (its direct children, by name), at most
// limit entries (0: the server's default) after cursor ("" for the first
// page). A path that is not a directory is an *APIError of status 400; a
// missing one 404.
func (c *Client) ListVolumeFiles(ctx context.Context, name, path, cursor string, limit int) (agentapi.FileList, error) {
	extra := url.Values{}
	if cursor != "" {
		extra.Set("cursor", cursor)
	}
	if limit > 0 {
		extra.Set("limit", strconv.Itoa(limit))
	}
	var out agentapi.FileList
	err := c.do(ctx, http.MethodGet, volumeFilesPath(name, "/list", path, extra), nil, &out)
	return out, err
}
