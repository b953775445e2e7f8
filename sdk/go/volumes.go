package withruntime

import (
	"context"
	"io"
	"net/url"
	"strconv"

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

// VolumeFiles is the file API of one volume, without a sandbox; get it with
// Client.VolumeFiles. Paths are the volume's: absolute from its root, or
// relative to it. No path leads out of the volume, whatever links its
// files hold (ErrBadRequest). Errors as Files's, plus ErrNoSpace when the
// volume is full.
type VolumeFiles struct {
	c    *Client
	name string
}

// VolumeFiles returns the file API of the key's volume name.
func (c *Client) VolumeFiles(name string) *VolumeFiles { return &VolumeFiles{c: c, name: name} }

func (v *VolumeFiles) query(route, path string, extra ...string) string {
	q := url.Values{"path": {path}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return "/v1/volumes/" + url.PathEscape(v.name) + "/files" + route + "?" + q.Encode()
}

// Open streams the regular file at path. The caller must close the reader.
func (v *VolumeFiles) Open(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := v.c.request(ctx, "GET", v.query("", path), nil, "", "application/octet-stream")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Write writes r to the file at path, replacing what is there (a link
// included: it is never written through), making missing directories; the
// file is owned by the sandbox user.
func (v *VolumeFiles) Write(ctx context.Context, path string, r io.Reader) (FileInfo, error) {
	resp, err := v.c.request(ctx, "PUT", v.query("", path), r, "application/octet-stream", "application/json")
	if err != nil {
		return FileInfo{}, err
	}
	defer resp.Body.Close()
	return decodeInfo(resp.Body)
}

// ListPage returns one page of the directory at path's entries (its
// direct children, by name); opts.Depth must be 0 or 1.
func (v *VolumeFiles) ListPage(ctx context.Context, path string, opts ListOptions) (FileList, error) {
	var extra []string
	if opts.Limit != 0 {
		extra = append(extra, "limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		extra = append(extra, "cursor", opts.Cursor)
	}
	var out FileList
	if err := v.c.doJSONCapped(ctx, "GET", v.query("/list", path, extra...), nil, &out, maxListPageBytes); err != nil {
		return FileList{}, err
	}
	return out, nil
}
