package itest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/version"
)

// TestRootForBrowsers: a browser pointed at the server's root is sent to
// the dashboard; an API client asking for / keeps the JSON answer.
func TestRootForBrowsers(t *testing.T) {
	e := newEnv(t)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(accept string) *http.Response {
		req, _ := http.NewRequest("GET", e.http.URL+"/", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := get("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8") // Chromium's
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("browser: %d Location %q, want 302 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, accept := range []string{"", "application/json", "*/*"} {
		if resp := get(accept); resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("Accept %q: %d %s, want the API's JSON 404", accept, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}

// TestHealthVersion: GET /v1/health names the server's build.
func TestHealthVersion(t *testing.T) {
	e := newEnv(t)
	resp, err := http.Get(e.http.URL + "/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var h api.Health
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatal(err)
	}
	if h.Version != version.Get() || h.Version.Go == "" || h.Version.Release == "" {
		t.Errorf("health version %+v, want %+v", h.Version, version.Get())
	}
}

// TestUserBinOnPath: what `pip install --user` installs (~/.local/bin) runs
// by name, for the default user and for root.
func TestUserBinOnPath(t *testing.T) {
	b := newBox(t, api.CreateSandboxRequest{})
	for _, user := range []string{"", "root"} {
		res := b.exec(agentapi.ExecRequest{User: user, Command: `mkdir -p ~/.local/bin && printf '#!/bin/sh\necho "tool of $(id -un)"\n' > ~/.local/bin/mytool && chmod +x ~/.local/bin/mytool`})
		if res.ExitCode != 0 {
			t.Fatalf("as %q: %+v", user, res)
		}
		res = b.exec(agentapi.ExecRequest{User: user, Command: "mytool"})
		want := "tool of user\n"
		if user == "root" {
			want = "tool of root\n"
		}
		if res.ExitCode != 0 || res.Stdout != want {
			t.Errorf("mytool as %q: %+v", user, res)
		}
	}
}
