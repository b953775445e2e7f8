// Package apiclient is the benchmarks' client of Runtime's HTTP API
// (bench/suite, bench/scale): creates, deletes, collected and streamed
// execs timed to their first output, health and the warm pool's state. It
// remembers every sandbox id it saw, for the benchmarks' leak checks.
package apiclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// Client talks to one server's API and remembers every sandbox id it
// saw, for the leak checks.
type Client struct {
	base, key string
	hc        *http.Client
	// health has its own connections, so that a probe never queues behind
	// the run's other requests in this process.
	health *http.Client
	mu     sync.Mutex
	ids    map[string]bool
}

// New returns a client of the server at base ("http://127.0.0.1:PORT")
// using the API key key; requests go through hc, health probes
// (HealthOnce) through health (hc when nil).
func New(base, key string, hc, health *http.Client) *Client {
	if health == nil {
		health = hc
	}
	return &Client{base: base, key: key, hc: hc, health: health, ids: map[string]bool{}}
}

// Remember adds ids to the ids the client has seen.
func (c *Client) Remember(ids ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		c.ids[id] = true
	}
}

// Known returns every sandbox id the client has seen, sorted.
func (c *Client) Known() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.ids))
	for id := range c.ids {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Do sends method path with body (JSON, when not nil) and the Accept
// header accept. A status of 300 or more is an error carrying the status
// and the body; otherwise the caller closes the response's body.
func (c *Client) Do(ctx context.Context, method, path string, body any, accept string) (*http.Response, error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", accept)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return resp, nil
}

// GetJSON sends method path with body (JSON, when not nil) and decodes
// the JSON answer into out (drops it when out is nil).
func (c *Client) GetJSON(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.Do(ctx, method, path, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Upload writes the host file src to path in sandbox id (PUT
// /v1/sandboxes/{id}/files), streamed.
func (c *Client) Upload(ctx context.Context, id, path, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "PUT", c.base+"/v1/sandboxes/"+id+"/files?path="+url.QueryEscape(path), f)
	if err != nil {
		return err
	}
	req.ContentLength = st.Size()
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("upload %s to %s: %s: %s", src, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

// Create makes a sandbox and returns its id (also with an error when the
// server made it but it is not running: the caller deletes it).
func (c *Client) Create(ctx context.Context, req api.CreateSandboxRequest) (string, error) {
	var sb api.Sandbox
	if err := c.GetJSON(ctx, "POST", "/v1/sandboxes", req, &sb); err != nil {
		return "", err
	}
	c.Remember(sb.ID)
	if sb.State != "running" {
		return sb.ID, fmt.Errorf("created sandbox %s is %q", sb.ID, sb.State)
	}
	return sb.ID, nil
}

// Del deletes sandbox id.
func (c *Client) Del(ctx context.Context, id string) error {
	return c.GetJSON(ctx, "DELETE", "/v1/sandboxes/"+id, nil, nil)
}

// DeleteAll deletes ids, n at a time, and returns every error.
func (c *Client) DeleteAll(ctx context.Context, ids []string, n int) error {
	var (
		mu      sync.Mutex
		errList []error
		wg      sync.WaitGroup
		sem     = make(chan struct{}, n)
	)
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := c.Del(ctx, id); err != nil {
				mu.Lock()
				errList = append(errList, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errList...)
}

// ListRunning lists the server's sandboxes that are not stopped.
func (c *Client) ListRunning(ctx context.Context) ([]string, error) {
	var l api.SandboxList
	if err := c.GetJSON(ctx, "GET", "/v1/sandboxes", nil, &l); err != nil {
		return nil, err
	}
	var ids []string
	for _, sb := range l.Sandboxes {
		c.Remember(sb.ID)
		if sb.State != "stopped" {
			ids = append(ids, sb.ID)
		}
	}
	return ids, nil
}

// PoolReady returns the base template's pool size and ready count from
// GET /v1/health.
func (c *Client) PoolReady(ctx context.Context) (size, ready int, err error) {
	var h api.Health
	if err := c.GetJSON(ctx, "GET", "/v1/health", nil, &h); err != nil {
		return 0, 0, err
	}
	p, ok := h.Pool["base"]
	if !ok {
		return 0, 0, errors.New("health reports no pool for base")
	}
	return p.Size, p.Ready, nil
}

// WaitPoolFull polls health until the pool is full and returns when it
// became so (polled every 5 ms).
func (c *Client) WaitPoolFull(ctx context.Context, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		size, ready, err := c.PoolReady(ctx)
		if err != nil {
			return time.Time{}, err
		}
		if ready >= size {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("warm pool not full after %s (%d of %d ready)", timeout, ready, size)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// ExecCollected runs argv (collected, not streamed) and checks that it
// exited 0 and printed want.
func (c *Client) ExecCollected(ctx context.Context, id string, argv []string, want string) (time.Duration, error) {
	start := time.Now()
	var res agentapi.ExecResult
	if err := c.GetJSON(ctx, "POST", "/v1/sandboxes/"+id+"/exec", agentapi.ExecRequest{Argv: argv}, &res); err != nil {
		return 0, err
	}
	d := time.Since(start)
	if res.ExitCode != 0 || res.Stdout != want {
		return d, fmt.Errorf("exec %q: exit %d, stdout %q, stderr %q", argv, res.ExitCode, res.Stdout, res.Stderr)
	}
	return d, nil
}

// FirstOutputSample is one create-to-first-output sample.
type FirstOutputSample struct {
	ID      string
	Total   time.Duration // POST /v1/sandboxes sent to the first stdout event
	Create  time.Duration // POST /v1/sandboxes sent to its answer
	Created time.Time     // when the create answered
}

// CreateToFirstOutput times POST /v1/sandboxes (the default request, {}),
// then a streamed exec of argv, up to its first stdout event, which must
// start with want. The sandbox's id is returned also on error when it was
// created: the caller deletes it.
func (c *Client) CreateToFirstOutput(ctx context.Context, argv []string, want string) (s FirstOutputSample, err error) {
	return c.CreateToFirstOutputFrom(ctx, "", argv, want)
}

// CreateWithExecFirstOutput times POST /v1/sandboxes {"exec": {"argv":
// argv}} with Accept: application/x-ndjson, the create with its first
// command, up to the first stdout event after the sandbox event; the
// output must start with want. create is when the sandbox event arrived.
func (c *Client) CreateWithExecFirstOutput(ctx context.Context, argv []string, want string) (s FirstOutputSample, err error) {
	start := time.Now()
	resp, err := c.Do(ctx, "POST", "/v1/sandboxes", api.CreateSandboxRequest{Exec: &agentapi.ExecRequest{Argv: argv}}, agentapi.ContentTypeNDJSON)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		return s, fmt.Errorf("create with exec: empty stream: %v", sc.Err())
	}
	var sev api.SandboxEvent
	if err := json.Unmarshal(sc.Bytes(), &sev); err != nil || sev.Type != "sandbox" || sev.Sandbox.ID == "" {
		return s, fmt.Errorf("create with exec: first line %q is not the sandbox event (%v)", sc.Text(), err)
	}
	s.ID = sev.Sandbox.ID
	c.Remember(s.ID)
	s.Created = time.Now()
	s.Create = s.Created.Sub(start)
	if sev.Sandbox.State != "running" {
		return s, fmt.Errorf("created sandbox %s is %q", s.ID, sev.Sandbox.State)
	}
	for sc.Scan() {
		var ev agentapi.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return s, err
		}
		switch ev.Type {
		case "stdout":
			s.Total = time.Since(start)
			_, _ = io.Copy(io.Discard, resp.Body)
			if !strings.HasPrefix(want, ev.Data) {
				return s, fmt.Errorf("first output %q, want %q", ev.Data, want)
			}
			return s, nil
		case "stderr", "exit", "error":
			_, _ = io.Copy(io.Discard, resp.Body)
			return s, fmt.Errorf("create with exec %q: %s event before any output: %s", argv, ev.Type, sc.Text())
		}
	}
	return s, fmt.Errorf("create with exec: stream ended early: %v", sc.Err())
}

// CreateToFirstOutputFrom is CreateToFirstOutput with a sandbox of the
// template tpl ("": the default).
func (c *Client) CreateToFirstOutputFrom(ctx context.Context, tpl string, argv []string, want string) (s FirstOutputSample, err error) {
	start := time.Now()
	s.ID, err = c.Create(ctx, api.CreateSandboxRequest{Template: tpl})
	if err != nil {
		return s, err
	}
	s.Created = time.Now()
	s.Create = s.Created.Sub(start)
	at, err := c.StreamToFirstOutput(ctx, s.ID, argv, want)
	s.Total = at.Sub(start)
	return s, err
}

// ExecToFirstOutput times a streamed exec (POST .../exec, NDJSON) of argv
// in the running sandbox id, sent to its first stdout event, which must
// start with want.
func (c *Client) ExecToFirstOutput(ctx context.Context, id string, argv []string, want string) (time.Duration, error) {
	start := time.Now()
	at, err := c.StreamToFirstOutput(ctx, id, argv, want)
	return at.Sub(start), err
}

// StreamToFirstOutput sends a streamed exec of argv to sandbox id and
// reads its events up to the first stdout event, which must start with
// want; the rest of the stream is read and dropped. It returns when the
// stdout event arrived.
func (c *Client) StreamToFirstOutput(ctx context.Context, id string, argv []string, want string) (at time.Time, err error) {
	resp, err := c.Do(ctx, "POST", "/v1/sandboxes/"+id+"/exec", agentapi.ExecRequest{Argv: argv}, agentapi.ContentTypeNDJSON)
	if err != nil {
		return at, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev agentapi.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return at, err
		}
		switch ev.Type {
		case "stdout":
			at = time.Now()
			_, _ = io.Copy(io.Discard, resp.Body)
			if !strings.HasPrefix(want, ev.Data) {
				return at, fmt.Errorf("first output %q, want %q", ev.Data, want)
			}
			return at, nil
		case "stderr", "exit", "error":
			_, _ = io.Copy(io.Discard, resp.Body)
			return at, fmt.Errorf("exec %q: %s event before any output: %s", argv, ev.Type, sc.Text())
		}
	}
	return at, fmt.Errorf("exec stream ended early: %v", sc.Err())
}

// ExecTrue runs `true` (collected) in sandbox id, times it to the answer
// and checks that it exited 0.
func (c *Client) ExecTrue(ctx context.Context, id string) (time.Duration, error) {
	start := time.Now()
	var res agentapi.ExecResult
	if err := c.GetJSON(ctx, "POST", "/v1/sandboxes/"+id+"/exec", agentapi.ExecRequest{Argv: []string{"true"}}, &res); err != nil {
		return 0, err
	}
	d := time.Since(start)
	if res.ExitCode != 0 {
		return d, fmt.Errorf("exec true in %s: exit %d, stderr %q", id, res.ExitCode, res.Stderr)
	}
	return d, nil
}

// HealthOnce times GET /v1/health to its answer, on the health client's
// connections; a status other than 200 is an error.
func (c *Client) HealthOnce(ctx context.Context) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/v1/health", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	start := time.Now()
	resp, err := c.health.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		return d, fmt.Errorf("health: %s", resp.Status)
	}
	return d, nil
}
