package itest

import (
	"encoding/json"
	"net/http"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// TestTenantKeys: a key with a daily spending limit cannot get around it.
// It sees and uses only its own sandboxes (others' are 404, as if absent),
// sees only its own usage, and cannot manage keys (403); a key without a
// limit still administers everything. Its secrets: TestSecretsBelongToKeys.
func TestTenantKeys(t *testing.T) {
	e := newEnv(t)
	var tenant api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: "tenant", DailyLimitMicros: 5_000_000}, &tenant)
	as := func(method, path string, body any) outcome {
		t.Helper()
		o := e.try(method, path, body, "Authorization", "Bearer "+tenant.Secret)
		if o.err != nil {
			t.Fatalf("%s %s: %v", method, path, o.err)
		}
		return o
	}
	admins := e.create(api.CreateSandboxRequest{})
	o := as("POST", "/v1/sandboxes", api.CreateSandboxRequest{})
	if o.status != http.StatusCreated {
		t.Fatalf("tenant create: %v", o)
	}
	var own api.Sandbox
	_ = json.Unmarshal(o.body, &own)

	var list api.SandboxList
	o = as("GET", "/v1/sandboxes", nil)
	_ = json.Unmarshal(o.body, &list)
	if o.status != http.StatusOK || len(list.Sandboxes) != 1 || list.Sandboxes[0].ID != own.ID {
		t.Errorf("tenant list shows %v", o)
	}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/sandboxes/" + admins.ID, nil},
		{"POST", "/v1/sandboxes/" + admins.ID + "/exec", agentapi.ExecRequest{Command: "true"}},
		{"GET", "/v1/sandboxes/" + admins.ID + "/files?path=/etc/hostname", nil},
		{"PUT", "/v1/sandboxes/" + admins.ID + "/network", api.NetworkPolicy{Internet: true}},
		{"POST", "/v1/sandboxes/" + admins.ID + "/timeout", api.SetTimeoutRequest{TimeoutSeconds: 60}},
		{"DELETE", "/v1/sandboxes/" + admins.ID, nil},
	} {
		if o := as(c.method, c.path, c.body); o.status != http.StatusNotFound {
			t.Errorf("tenant %s %s on another key's sandbox: %v, want 404", c.method, c.path, o)
		}
	}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/v1/keys", api.CreateKeyRequest{Name: "escape"}},
		{"GET", "/v1/keys", nil},
		{"DELETE", "/v1/keys/" + tenant.ID, nil},
	} {
		o := as(c.method, c.path, c.body)
		if o.status != http.StatusForbidden || errorCode(t, o.body) != agentapi.CodeForbidden {
			t.Errorf("tenant %s %s: %v, want 403", c.method, c.path, o)
		}
	}
	if o := as("GET", "/v1/secrets", nil); o.status != http.StatusOK {
		t.Errorf("tenant GET /v1/secrets: %v", o)
	}

	// Its own sandbox works as usual.
	if o := as("POST", "/v1/sandboxes/"+own.ID+"/exec", agentapi.ExecRequest{Command: "echo mine"}); o.status != http.StatusOK {
		t.Errorf("tenant exec in its own sandbox: %v", o)
	}
	// Usage: the tenant sees only its own key; the admin sees both.
	var rep api.UsageReport
	o = as("GET", "/v1/usage?groupBy=sandbox", nil)
	_ = json.Unmarshal(o.body, &rep)
	for _, row := range rep.Rows {
		if row.Group != own.ID {
			t.Errorf("tenant usage shows sandbox %s", row.Group)
		}
	}
	if o := as("DELETE", "/v1/sandboxes/"+own.ID, nil); o.status != http.StatusNoContent {
		t.Errorf("tenant deletes its own sandbox: %v", o)
	}
	// The admin still reaches everything.
	e.must(http.StatusOK, "GET", "/v1/sandboxes/"+own.ID, nil, nil)
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+admins.ID, nil, nil)
}
