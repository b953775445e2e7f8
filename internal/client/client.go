// Package client is the CLI's HTTP client for the Runtime API. It speaks the
// same wire format as the SDKs (api/openapi.yaml).
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/httpwait"
)

// Client talks to one Runtime server. Its waits are bounded (wait.go).
type Client struct {
	BaseURL string
	APIKey  string
	HTTP    *http.Client
	// ResponseTimeout bounds the wait for each answer's headers, beyond
	// what the call runs on the server first (0: WITHRUNTIME_RESPONSE_TIMEOUT
	// seconds, else DefaultResponseTimeout; negative: no bound).
	ResponseTimeout time.Duration
	// IdleTimeout bounds each read of a stream or download: no byte for
	// that long fails it (0: WITHRUNTIME_IDLE_TIMEOUT seconds, else
	// DefaultIdleTimeout; negative: no bound).
	IdleTimeout time.Duration

	waitState
}

// APIError is an error answer from the server.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string { return e.Message }

// StreamError is an exec stream that ended before the command's exit event:
// the connection broke, or the server closed it because the sandbox stopped.
// Ask the server for the sandbox (GetSandbox) to learn why.
type StreamError struct {
	// Err is the read error; nil when the stream just ended.
	Err error
}

func (e *StreamError) Error() string {
	if e.Err == nil {
		return "exec stream ended without an exit event (the sandbox may have been stopped)"
	}
	return "exec stream broke: " + e.Err.Error()
}

func (e *StreamError) Unwrap() error { return e.Err }

// ErrNoAPIKey is returned, without asking the server, when the client has no
// API key: every route but the health check needs one.
var ErrNoAPIKey = errors.New("missing API key: set WITHRUNTIME_API_KEY (or \"apiKey\" in ~/.config/withruntime/config.json) " +
	"to a key of this server; create one on the server's host with `withruntime keys create NAME`")

// do sends a JSON request and decodes a JSON answer into out (if non-nil).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	resp, err := c.send(ctx, method, path, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// send performs a request with a JSON body (if any) and turns an error
// status into *APIError.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, accept string) (*http.Response, error) {
	return c.sendAs(ctx, method, path, body, "application/json", accept)
}

// sendAs is send with a body of another content type.
func (c *Client) sendAs(ctx context.Context, method, path string, body io.Reader, contentType, accept string) (*http.Response, error) {
	if c.APIKey == "" {
		return nil, ErrNoAPIKey
	}
	return c.roundTrip(ctx, method, path, body, contentType, accept)
}

// roundTrip is send without the key check: with the key when there is one.
func (c *Client) roundTrip(ctx context.Context, method, path string, body io.Reader, contentType, accept string) (*http.Response, error) {
	b, err := c.bounds(ctx)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(httpwait.WithBounds(ctx, b), method, strings.TrimRight(c.BaseURL, "/")+path, body)
	if err != nil {
		return nil, err
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	req.Header.Set("Accept", accept)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		var te *httpwait.TimeoutError
		if errors.As(err, &te) {
			return nil, te // it names the server and the seconds waited
		}
		return nil, fmt.Errorf("cannot reach the Runtime server at %s: %w", c.BaseURL, err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		var eb agentapi.ErrorBody
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(data, &eb) != nil || eb.Error.Message == "" {
			eb.Error = agentapi.Error{Code: "http_" + resp.Status, Message: strings.TrimSpace(resp.Status + ": " + string(data))}
		}
		return nil, &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
	}
	return resp, nil
}

// CreateSandbox creates a sandbox.
func (c *Client) CreateSandbox(ctx context.Context, req api.CreateSandboxRequest) (api.Sandbox, error) {
	var sb api.Sandbox
	return sb, c.do(waitFor(ctx, bootWait), http.MethodPost, "/v1/sandboxes", req, &sb)
}

// ListSandboxes lists sandboxes, optionally by state.
func (c *Client) ListSandboxes(ctx context.Context, state string) ([]api.Sandbox, error) {
	var out api.SandboxList
	path := "/v1/sandboxes"
	if state != "" {
		path += "?state=" + url.QueryEscape(state)
	}
	return out.Sandboxes, c.do(ctx, http.MethodGet, path, nil, &out)
}

// GetSandbox returns one sandbox, running or stopped.
func (c *Client) GetSandbox(ctx context.Context, id string) (api.Sandbox, error) {
	var sb api.Sandbox
	return sb, c.do(ctx, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id), nil, &sb)
}

// DeleteSandbox destroys a sandbox.
func (c *Client) DeleteSandbox(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/sandboxes/"+url.PathEscape(id), nil, nil)
}

// CreateAndExecStream creates a sandbox with req.Exec as its first
// command (one request: POST /v1/sandboxes with Accept:
// application/x-ndjson), calls onCreated with the sandbox as soon as it
// exists, then onOutput with each chunk as ExecStream does, and returns the
// sandbox and the command's result. An error before onCreated means no
// sandbox was made; after it, the sandbox exists and is the caller's to
// delete (a command that could not start is an *APIError from its error
// event; a stream cut short a *StreamError).
func (c *Client) CreateAndExecStream(ctx context.Context, req api.CreateSandboxRequest, onCreated func(api.Sandbox), onOutput func(stream string, data []byte)) (api.Sandbox, agentapi.ExecResult, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // stdin travels in the body (see ExecBody)
	if err := enc.Encode(req); err != nil {
		return api.Sandbox{}, agentapi.ExecResult{}, err
	}
	resp, err := c.send(waitFor(ctx, bootWait), http.MethodPost, "/v1/sandboxes", &buf, agentapi.ContentTypeNDJSON)
	if err != nil {
		return api.Sandbox{}, agentapi.ExecResult{}, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	if !sc.Scan() {
		if httpwait.IsTimeout(sc.Err()) {
			return api.Sandbox{}, agentapi.ExecResult{}, sc.Err()
		}
		return api.Sandbox{}, agentapi.ExecResult{}, fmt.Errorf("create stream ended before the sandbox event: %w", sc.Err())
	}
	var first api.SandboxEvent
	if err := json.Unmarshal(sc.Bytes(), &first); err != nil || first.Type != "sandbox" || first.Sandbox.ID == "" {
		return api.Sandbox{}, agentapi.ExecResult{}, fmt.Errorf("bad first event from server (want the sandbox): %q", sc.Text())
	}
	if onCreated != nil {
		onCreated(first.Sandbox)
	}
	res, err := execEvents(sc, onOutput)
	return first.Sandbox, res, err
}

// ExecStream runs a command and calls onOutput with each chunk's exact
// bytes (stream is "stdout" or "stderr") as it arrives, then returns the result.
// A stream that ends before the command's exit event is a *StreamError.
func (c *Client) ExecStream(ctx context.Context, id string, req agentapi.ExecRequest, onOutput func(stream string, data []byte)) (agentapi.ExecResult, error) {
	b, err := ExecBody(req)
	if err != nil {
		return agentapi.ExecResult{}, err
	}
	resp, err := c.send(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/exec", bytes.NewReader(b), agentapi.ContentTypeNDJSON)
	if err != nil {
		return agentapi.ExecResult{}, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	return execEvents(sc, onOutput)
}

// execEvents reads an exec's NDJSON events up to its exit (see ExecStream);
// a stream silent past the idle bound is its *httpwait.TimeoutError (the
// server is gone, not the sandbox). Heartbeats, and any type it does not
// know, are skipped.
func execEvents(sc *bufio.Scanner, onOutput func(stream string, data []byte)) (agentapi.ExecResult, error) {
	for sc.Scan() {
		var ev agentapi.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return agentapi.ExecResult{}, fmt.Errorf("bad event from server: %w", err)
		}
		switch ev.Type {
		case "stdout", "stderr":
			data := []byte(ev.Data)
			if ev.Lossy {
				if raw, err := base64.StdEncoding.DecodeString(ev.DataBase64); err == nil {
					data = raw
				}
			}
			onOutput(ev.Type, data)
		case "exit":
			if ev.Result == nil {
				return agentapi.ExecResult{}, errors.New("exit event without a result")
			}
			return *ev.Result, nil
		case "error":
			if ev.Error != nil {
				return agentapi.ExecResult{}, &APIError{Status: 500, Code: ev.Error.Code, Message: ev.Error.Message}
			}
		}
	}
	if httpwait.IsTimeout(sc.Err()) {
		return agentapi.ExecResult{}, sc.Err()
	}
	return agentapi.ExecResult{}, &StreamError{Err: sc.Err()}
}

// ExecBody is the JSON body of an exec request. It leaves <, > and & as they
// are (json.Marshal would send each as a 6-byte escape), since stdin, which
// travels in the body, is often source code or HTML.
func ExecBody(req agentapi.ExecRequest) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// CreateKey creates an API key; the answer holds its secret.
func (c *Client) CreateKey(ctx context.Context, name string) (api.Key, error) {
	var k api.Key
	return k, c.do(ctx, http.MethodPost, "/v1/keys", api.CreateKeyRequest{Name: name}, &k)
}

// ListKeys lists API keys.
func (c *Client) ListKeys(ctx context.Context) ([]api.Key, error) {
	var out api.KeyList
	return out.Keys, c.do(ctx, http.MethodGet, "/v1/keys", nil, &out)
}

// RevokeKey revokes an API key.
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/keys/"+url.PathEscape(id), nil, nil)
}

// ListTemplates lists the server's templates (TemplateList also says when
// the list may be incomplete).
func (c *Client) ListTemplates(ctx context.Context) ([]api.Template, error) {
	l, err := c.TemplateList(ctx)
	return l.Templates, err
}

// TemplateList returns GET /v1/templates's answer: the templates and, when
// the list may be incomplete (a Kubernetes server whose registry refuses
// its catalog API), a note saying why.
func (c *Client) TemplateList(ctx context.Context) (api.TemplateList, error) {
	var out api.TemplateList
	return out, c.do(ctx, http.MethodGet, "/v1/templates", nil, &out)
}
