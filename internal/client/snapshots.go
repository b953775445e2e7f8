package client

import (
	"context"
	"net/http"
	"net/url"

	"withruntime.dev/runtime/internal/api"
)

// CreateSnapshot saves running sandbox id as a snapshot (POST
// .../snapshots); the sandbox runs on.
func (c *Client) CreateSnapshot(ctx context.Context, id string, req api.CreateSnapshotRequest) (api.Snapshot, error) {
	var sn api.Snapshot
	return sn, c.do(waitFor(ctx, checkpointWait), http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/snapshots", req, &sn)
}

// ForkSandbox makes req.Count sandboxes from one snapshot of sandbox id
// (POST .../fork).
func (c *Client) ForkSandbox(ctx context.Context, id string, req api.ForkRequest) (api.ForkResult, error) {
	var res api.ForkResult
	return res, c.do(waitFor(ctx, checkpointWait), http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/fork", req, &res)
}

// ListSnapshots lists the key's snapshots (GET /v1/snapshots).
func (c *Client) ListSnapshots(ctx context.Context) ([]api.Snapshot, error) {
	var list api.SnapshotList
	return list.Snapshots, c.do(ctx, http.MethodGet, "/v1/snapshots", nil, &list)
}

// DeleteSnapshot deletes a snapshot by id or name (DELETE
// /v1/snapshots/{id}).
func (c *Client) DeleteSnapshot(ctx context.Context, ref string) error {
	return c.do(ctx, http.MethodDelete, "/v1/snapshots/"+url.PathEscape(ref), nil, nil)
}
