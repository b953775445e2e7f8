package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// apiClient talks to one server's API and remembers every sandbox id it
// saw, for the leak checks.
type apiClient struct {
	base, key string
	mu        sync.Mutex
	ids       map[string]bool
}

func newAPIClient(base, key string) *apiClient {
	return &apiClient{base: base, key: key, ids: map[string]bool{}}
}

func (c *apiClient) remember(ids ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		c.ids[id] = true
	}
}

func (c *apiClient) known() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.ids))
	for id := range c.ids {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func (c *apiClient) do(ctx context.Context, method, path string, body any, accept string) (*http.Response, error) {
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
	resp, err := httpClient.Do(req)
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

func (c *apiClient) getJSON(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.do(ctx, method, path, body, "application/json")
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

// create makes a sandbox and returns its id.
func (c *apiClient) create(ctx context.Context, req api.CreateSandboxRequest) (string, error) {
	var sb api.Sandbox
	if err := c.getJSON(ctx, "POST", "/v1/sandboxes", req, &sb); err != nil {
		return "", err
	}
	c.remember(sb.ID)
	if sb.State != "running" {
		return sb.ID, fmt.Errorf("created sandbox %s is %q", sb.ID, sb.State)
	}
	return sb.ID, nil
}

func (c *apiClient) del(ctx context.Context, id string) error {
	return c.getJSON(ctx, "DELETE", "/v1/sandboxes/"+id, nil, nil)
}

// deleteAll deletes ids, n at a time, and returns every error.
func (c *apiClient) deleteAll(ctx context.Context, ids []string, n int) error {
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
			if err := c.del(ctx, id); err != nil {
				mu.Lock()
				errList = append(errList, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errList...)
}

// listRunning lists the server's sandboxes that are not stopped.
func (c *apiClient) listRunning(ctx context.Context) ([]string, error) {
	var l api.SandboxList
	if err := c.getJSON(ctx, "GET", "/v1/sandboxes", nil, &l); err != nil {
		return nil, err
	}
	var ids []string
	for _, sb := range l.Sandboxes {
		c.remember(sb.ID)
		if sb.State != "stopped" {
			ids = append(ids, sb.ID)
		}
	}
	return ids, nil
}

// poolReady returns the base template's pool size and ready count from
// GET /v1/health.
func (c *apiClient) poolReady(ctx context.Context) (size, ready int, err error) {
	var h api.Health
	if err := c.getJSON(ctx, "GET", "/v1/health", nil, &h); err != nil {
		return 0, 0, err
	}
	p, ok := h.Pool["base"]
	if !ok {
		return 0, 0, errors.New("health reports no pool for base")
	}
	return p.Size, p.Ready, nil
}

// waitPoolFull polls health until the pool is full and returns when it
// became so (polled every 5 ms).
func (c *apiClient) waitPoolFull(ctx context.Context, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		size, ready, err := c.poolReady(ctx)
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

// execCollected runs argv (collected, not streamed) and checks that it
// exited 0 and printed want.
func (c *apiClient) execCollected(ctx context.Context, id string, argv []string, want string) (time.Duration, error) {
	start := time.Now()
	var res agentapi.ExecResult
	if err := c.getJSON(ctx, "POST", "/v1/sandboxes/"+id+"/exec", agentapi.ExecRequest{Argv: argv}, &res); err != nil {
		return 0, err
	}
	d := time.Since(start)
	if res.ExitCode != 0 || res.Stdout != want {
		return d, fmt.Errorf("exec %q: exit %d, stdout %q, stderr %q", argv, res.ExitCode, res.Stdout, res.Stderr)
	}
	return d, nil
}

// firstOutputSample is one create-to-first-output sample.
type firstOutputSample struct {
	id      string
	total   time.Duration // POST /v1/sandboxes sent to the first stdout event
	create  time.Duration // POST /v1/sandboxes sent to its answer
	created time.Time     // when the create answered
}

// createToFirstOutput times POST /v1/sandboxes (the default request, {}),
// then a streamed exec of argv, up to its first stdout event, which must
// start with want. The sandbox's id is returned also on error when it was
// created: the caller deletes it.
func (c *apiClient) createToFirstOutput(ctx context.Context, argv []string, want string) (s firstOutputSample, err error) {
	return c.createToFirstOutputFrom(ctx, "", argv, want)
}

// createWithExecFirstOutput times POST /v1/sandboxes {"exec": {"argv":
// argv}} with Accept: application/x-ndjson, the create with its first
// command, up to the first stdout event after the sandbox event; the
// output must start with want. create is when the sandbox event arrived.
func (c *apiClient) createWithExecFirstOutput(ctx context.Context, argv []string, want string) (s firstOutputSample, err error) {
	start := time.Now()
	resp, err := c.do(ctx, "POST", "/v1/sandboxes", api.CreateSandboxRequest{Exec: &agentapi.ExecRequest{Argv: argv}}, agentapi.ContentTypeNDJSON)
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
	s.id = sev.Sandbox.ID
	c.remember(s.id)
	s.created = time.Now()
	s.create = s.created.Sub(start)
	if sev.Sandbox.State != "running" {
		return s, fmt.Errorf("created sandbox %s is %q", s.id, sev.Sandbox.State)
	}
	for sc.Scan() {
		var ev agentapi.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return s, err
		}
		switch ev.Type {
		case "stdout":
			s.total = time.Since(start)
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

// createToFirstOutputFrom is createToFirstOutput with a sandbox of the
// template tpl ("": the default).
func (c *apiClient) createToFirstOutputFrom(ctx context.Context, tpl string, argv []string, want string) (s firstOutputSample, err error) {
	start := time.Now()
	s.id, err = c.create(ctx, api.CreateSandboxRequest{Template: tpl})
	if err != nil {
		return s, err
	}
	s.created = time.Now()
	s.create = s.created.Sub(start)
	at, err := c.streamToFirstOutput(ctx, s.id, argv, want)
	s.total = at.Sub(start)
	return s, err
}

// execToFirstOutput times a streamed exec (POST .../exec, NDJSON) of argv
// in the running sandbox id, sent to its first stdout event, which must
// start with want.
func (c *apiClient) execToFirstOutput(ctx context.Context, id string, argv []string, want string) (time.Duration, error) {
	start := time.Now()
	at, err := c.streamToFirstOutput(ctx, id, argv, want)
	return at.Sub(start), err
}

// streamToFirstOutput sends a streamed exec of argv to sandbox id and
// reads its events up to the first stdout event, which must start with
// want; the rest of the stream is read and dropped. It returns when the
// stdout event arrived.
func (c *apiClient) streamToFirstOutput(ctx context.Context, id string, argv []string, want string) (at time.Time, err error) {
	resp, err := c.do(ctx, "POST", "/v1/sandboxes/"+id+"/exec", agentapi.ExecRequest{Argv: argv}, agentapi.ContentTypeNDJSON)
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
