package client

import (
	"context"
	"io"
	"net/http"
	"net/url"

	"withruntime.dev/runtime/internal/agentapi"
)

func filesPath(id, route, path string) string {
	return "/v1/sandboxes/" + url.PathEscape(id) + route + "?path=" + url.QueryEscape(path)
}

// StatFile is GET .../files/stat: the entry at path inside sandbox id (a
// symlink is reported as one, not followed). A missing path is an
// *APIError with Status 404.
func (c *Client) StatFile(ctx context.Context, id, path string) (agentapi.FileInfo, error) {
	var fi agentapi.FileInfo
	err := c.do(ctx, http.MethodGet, filesPath(id, "/files/stat", path), nil, &fi)
	return fi, err
}

// UploadFile is PUT .../files: body streamed to path inside sandbox id,
// written whole or not at all (missing parent directories are made).
func (c *Client) UploadFile(ctx context.Context, id, path string, body io.Reader) error {
	resp, err := c.sendAs(ctx, http.MethodPut, filesPath(id, "/files", path), body, "application/octet-stream", "application/json")
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// DownloadFile is GET .../files: the file at path inside sandbox id, as a
// stream the caller closes.
func (c *Client) DownloadFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	resp, err := c.send(ctx, http.MethodGet, filesPath(id, "/files", path), nil, "application/octet-stream")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
