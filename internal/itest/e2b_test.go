package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"withruntime.dev/runtime/internal/compat/e2b"
	"withruntime.dev/runtime/internal/compat/e2b/envd/processpb"
	"withruntime.dev/runtime/internal/compat/e2b/envd/processpb/processpbconnect"
	"withruntime.dev/runtime/internal/server"
)

// The E2B-compatible API (internal/compat/e2b) over a test server, spoken
// to as E2B's SDKs do: JSON on the control plane, Connect RPC (JSON codec)
// on envd.

// e2bFront is the E2B API of e's server.
type e2bFront struct {
	e   *env
	url string
}

func newE2BFront(e *env) *e2bFront {
	h, closeH := e.srv.E2BHandler(server.E2BOptions{})
	hs := httptest.NewServer(h)
	e.t.Cleanup(func() { hs.Close(); closeH() })
	return &e2bFront{e: e, url: hs.URL}
}

// control sends a control-plane request and returns its status and body.
func (f *e2bFront) control(method, path string, body any) (int, []byte) {
	f.e.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, f.url+path, r)
	req.Header.Set("X-API-KEY", f.e.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// e2bSandbox is what a create answers that the tests use.
type e2bSandbox struct {
	SandboxID       string `json:"sandboxID"`
	EnvdAccessToken string `json:"envdAccessToken"`
}

func (f *e2bFront) create(metadata map[string]string) e2bSandbox {
	f.e.t.Helper()
	status, data := f.control("POST", "/sandboxes", map[string]any{"templateID": "base", "timeout": 300, "metadata": metadata})
	var sb e2bSandbox
	if status != http.StatusCreated || json.Unmarshal(data, &sb) != nil || sb.SandboxID == "" {
		f.e.t.Fatalf("create: %d %s", status, data)
	}
	return sb
}

// TestE2BListFilters (issue 24, F13): a malformed metadata, state or limit
// is a 400 with the reason, never a list of everything; a key without
// =value matches the sandboxes that have it.
func TestE2BListFilters(t *testing.T) {
	e := newEnv(t)
	f := newE2BFront(e)
	a := f.create(map[string]string{"workspace": "w1", "user": "a b"})
	b := f.create(map[string]string{"other": "x"})
	for _, c := range []struct {
		query string
		want  []string // ids listed; nil with bad set
		bad   string   // part of the 400's message
	}{
		{query: "", want: []string{a.SandboxID, b.SandboxID}},
		{query: "metadata=this-is-not-key-value", want: []string{}},
		{query: "metadata=workspace", want: []string{a.SandboxID}},
		{query: "metadata=workspace%3Dw1", want: []string{a.SandboxID}},
		{query: "metadata=workspace%3Dw2", want: []string{}},
		{query: "metadata=user%3Da%2Bb%26workspace", want: []string{a.SandboxID}},
		{query: "metadata=other%3Dx&state=running", want: []string{b.SandboxID}},
		{query: "metadata=%zz", bad: "not URL-encoded"},
		{query: "metadata=%3Dv", bad: "the key is empty"},
		{query: "state=sleeping", bad: "state must be running, paused"},
		{query: "limit=0", bad: "limit must be a whole number from 1 to 100"},
		{query: "limit=lots", bad: "limit must be"},
	} {
		for _, path := range []string{"/sandboxes", "/v2/sandboxes"} {
			if strings.HasPrefix(c.query, "limit") && path == "/sandboxes" {
				continue // v1 does not page
			}
			status, data := f.control("GET", path+"?"+c.query, nil)
			if c.bad != "" {
				if status != http.StatusBadRequest || !strings.Contains(string(data), c.bad) {
					t.Errorf("GET %s?%s: %d %s, want 400 saying %q", path, c.query, status, data, c.bad)
				}
				continue
			}
			var list []struct {
				SandboxID string `json:"sandboxID"`
			}
			if status != http.StatusOK || json.Unmarshal(data, &list) != nil {
				t.Errorf("GET %s?%s: %d %s", path, c.query, status, data)
				continue
			}
			got := []string{}
			for _, l := range list {
				got = append(got, l.SandboxID)
			}
			slices.Sort(got)
			want := slices.Clone(c.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("GET %s?%s lists %v, want %v", path, c.query, got, want)
			}
		}
	}
}

// TestE2BDeleteMidCommand (issue 24, F13; issue 30): a sandbox deleted
// while an E2B command streams drops the stream's connection, as E2B's does
// (the SDKs then ask envd's /health, 502, and raise their "sandbox was
// killed" error), never a handler panic in an error message.
func TestE2BDeleteMidCommand(t *testing.T) {
	e := newEnv(t)
	f := newE2BFront(e)
	sb := f.create(nil)
	client := processpbconnect.NewProcessClient(http.DefaultClient, f.url, connect.WithProtoJSON())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := connect.NewRequest(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", "echo started; sleep 60"}}})
	req.Header().Set("X-Access-Token", sb.EnvdAccessToken)
	req.Header().Set("E2b-Sandbox-Id", sb.SandboxID)
	req.Header().Set("E2b-Sandbox-Port", e2b.EnvdPort)
	stream, err := client.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	deleted := false
	for stream.Receive() {
		if d := stream.Msg().GetEvent().GetData(); d != nil && strings.Contains(string(d.GetStdout()), "started") && !deleted {
			deleted = true
			if status, data := f.control("DELETE", "/sandboxes/"+sb.SandboxID, nil); status != http.StatusNoContent {
				t.Fatalf("delete: %d %s", status, data)
			}
		}
		if stream.Msg().GetEvent().GetEnd() != nil {
			t.Fatal("the process ended normally although its sandbox was deleted")
		}
	}
	if !deleted {
		t.Fatalf("the command's output never came: %v", stream.Err())
	}
	// As E2B's, the stream's connection drops (no end event, no in-band
	// error: the SDKs then probe envd's /health), and /health says 502.
	err = stream.Err()
	if err == nil {
		t.Fatal("the stream ended cleanly although its sandbox was deleted")
	}
	if ce := new(connect.Error); errors.As(err, &ce) && strings.Contains(ce.Message(), "panicked") {
		t.Errorf("stream error %q", ce.Message())
	}
	hreq, _ := http.NewRequest("GET", f.url+"/health", nil)
	hreq.Header.Set("X-Access-Token", sb.EnvdAccessToken)
	hreq.Header.Set("E2b-Sandbox-Id", sb.SandboxID)
	if resp, herr := http.DefaultClient.Do(hreq); herr != nil || resp.StatusCode != http.StatusBadGateway {
		t.Errorf("envd /health of the deleted sandbox: %v %v, want 502", resp, herr)
	} else {
		resp.Body.Close()
	}
	t.Logf("the stream ended with: %v", err)
}
