package dockerfile

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

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/errs"
)

// agentClient talks to the build sandbox's agent. Everything it answers
// comes from a sandbox running the Dockerfile's commands as root, so it is
// read with caps and never trusted beyond what the build does with it.
type agentClient struct {
	hc *http.Client
}

func newAgentClient(rt http.RoundTripper) *agentClient {
	return &agentClient{hc: &http.Client{Transport: rt}}
}

// maxAgentLine caps one NDJSON line from the agent.
const maxAgentLine = 4 << 20

func (a *agentClient) request(ctx context.Context, method, path string, q url.Values, body io.Reader, ctype, accept string) (*http.Response, error) {
	u := "http://agent" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the build sandbox's agent: %w", err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		var eb agentapi.ErrorBody
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(data, &eb) != nil || eb.Error.Message == "" {
			eb.Error.Message = fmt.Sprintf("status %d", resp.StatusCode)
		}
		return nil, errs.New(errs.Invalid, "the build sandbox refused %s %s: %s", method, path, eb.Error.Message)
	}
	return resp, nil
}

// run runs req in the sandbox, streaming, and returns its result. output
// gets the command's output as it comes (stdout and stderr mixed).
func (a *agentClient) run(ctx context.Context, req agentapi.ExecRequest, output func(string)) (agentapi.ExecResult, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return agentapi.ExecResult{}, err
	}
	resp, err := a.request(ctx, http.MethodPost, "/exec", nil, bytes.NewReader(b), "application/json", agentapi.ContentTypeNDJSON)
	if err != nil {
		return agentapi.ExecResult{}, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxAgentLine)
	for sc.Scan() {
		var ev agentapi.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return agentapi.ExecResult{}, fmt.Errorf("the build sandbox sent a bad event: %w", err)
		}
		switch ev.Type {
		case "stdout", "stderr":
			if output != nil {
				output(ev.Data)
			}
		case "exit":
			if ev.Result == nil {
				return agentapi.ExecResult{}, errors.New("the build sandbox sent an exit event without a result")
			}
			return *ev.Result, nil
		case "error":
			msg := "unknown error"
			if ev.Error != nil {
				msg = ev.Error.Message
			}
			return agentapi.ExecResult{}, errs.New(errs.Invalid, "the command could not run in the build sandbox: %s", msg)
		}
	}
	if err := ctx.Err(); err != nil {
		return agentapi.ExecResult{}, err
	}
	return agentapi.ExecResult{}, fmt.Errorf("the build sandbox's exec stream ended early: %v", sc.Err())
}

// put uploads body as the file path in the sandbox.
func (a *agentClient) put(ctx context.Context, path string, body io.Reader) error {
	resp, err := a.request(ctx, http.MethodPut, "/files", url.Values{"path": {path}}, body, "application/octet-stream", "")
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.Body.Close()
}

// get downloads the file path from the sandbox into w, at most max bytes:
// past that it fails with errs.TooLarge.
func (a *agentClient) get(ctx context.Context, path string, max int64, w io.Writer) error {
	resp, err := a.request(ctx, http.MethodGet, "/files", url.Values{"path": {path}}, nil, "", "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, io.LimitReader(resp.Body, max+1))
	if err != nil {
		return fmt.Errorf("download %s from the build sandbox: %w", path, err)
	}
	if n > max {
		return errs.New(errs.TooLarge, "the build's %s is over %d bytes", path, max)
	}
	return nil
}
