package main

import (
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

// apiClient talks to the server's API and remembers every sandbox id it
// saw, for the leak check.
type apiClient struct {
	base, key string
	hc        *http.Client
	// health has its own connections, so that a probe never queues behind
	// the run's other requests in this process.
	health *http.Client
	mu     sync.Mutex
	ids    map[string]bool
}

func newAPIClient(base, key string) *apiClient {
	return &apiClient{base: base, key: key, ids: map[string]bool{},
		hc:     &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}},
		health: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}, Timeout: 30 * time.Second}}
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

func (c *apiClient) getJSON(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader = http.NoBody
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// create makes a sandbox and returns its id (also on an error after the
// server made it, for the caller to delete).
func (c *apiClient) create(ctx context.Context) (string, error) {
	var sb api.Sandbox
	if err := c.getJSON(ctx, "POST", "/v1/sandboxes", api.CreateSandboxRequest{TimeoutSeconds: 6 * 3600}, &sb); err != nil {
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

// execTrue runs `true` (collected) and checks that it exited 0.
func (c *apiClient) execTrue(ctx context.Context, id string) (time.Duration, error) {
	start := time.Now()
	var res agentapi.ExecResult
	if err := c.getJSON(ctx, "POST", "/v1/sandboxes/"+id+"/exec", agentapi.ExecRequest{Argv: []string{"true"}}, &res); err != nil {
		return 0, err
	}
	d := time.Since(start)
	if res.ExitCode != 0 {
		return d, fmt.Errorf("exec true in %s: exit %d, stderr %q", id, res.ExitCode, res.Stderr)
	}
	return d, nil
}

// healthOnce times GET /v1/health to its answer.
func (c *apiClient) healthOnce(ctx context.Context) (time.Duration, error) {
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
