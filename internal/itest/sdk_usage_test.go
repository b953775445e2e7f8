package itest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	withruntime "withruntime.dev/runtime/sdk/go"
)

// The Go SDK's secrets, network, keys and usage methods against a real
// server.

// recorder keeps every answer body the SDK receives.
type recorder struct {
	mu     sync.Mutex
	bodies []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.bodies = append(r.bodies, req.Method+" "+req.URL.Path+": "+string(b))
	r.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

func (r *recorder) containing(s string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, b := range r.bodies {
		if strings.Contains(b, s) {
			out = append(out, b)
		}
	}
	return out
}

// TestSDKUsage: a secret is stored, listed and deleted without its value
// ever coming back; a sandbox created with it (by a new key with a daily
// limit) sees a placeholder; its network policy is read and changed; it
// costs something while it runs; usage by sandbox and by key reports it;
// the key is revoked and refused; a create over maxCostMicros is ErrCostCap.
func TestSDKUsage(t *testing.T) {
	e := newEnv(t, withMeterInterval(time.Second))
	rec := &recorder{}
	admin, err := withruntime.NewClient(withruntime.WithBaseURL(e.http.URL), withruntime.WithAPIKey(e.key),
		withruntime.WithHTTPClient(&http.Client{Transport: rec}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const value = "sdk-go-secret-value-7f3a9c"

	// Secrets: write-only.
	sec, err := admin.SetSecret(ctx, "SDK_TOKEN", value, []string{"api.example.com"})
	if err != nil || sec.Name != "SDK_TOKEN" || len(sec.Hosts) != 1 || sec.CreatedAt.IsZero() {
		t.Fatalf("set secret: %+v %v", sec, err)
	}
	secs, err := admin.ListSecrets(ctx)
	if err != nil || len(secs) != 1 || secs[0].Name != "SDK_TOKEN" || secs[0].Hosts[0] != "api.example.com" {
		t.Fatalf("list secrets: %+v %v", secs, err)
	}
	if _, err := admin.SetSecret(ctx, "1BAD", value, []string{"api.example.com"}); !errors.Is(err, withruntime.ErrBadRequest) ||
		strings.Contains(err.Error(), value) {
		t.Fatalf("bad secret name: %v", err)
	}

	// A key with a daily limit, and a client that uses it.
	key, err := admin.CreateKey(ctx, "sdk-go", 5_000_000)
	if err != nil || !strings.HasPrefix(key.Secret, key.Prefix) || !strings.HasPrefix(key.ID, "key_") || key.DailyLimitMicros != 5_000_000 {
		t.Fatalf("create key: %+v %v", key, err)
	}
	keys, err := admin.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var listed *withruntime.KeyInfo
	for i := range keys {
		if keys[i].ID == key.ID {
			listed = &keys[i]
		}
	}
	if listed == nil || listed.Secret != "" || listed.DailyLimitMicros != 5_000_000 || listed.RevokedAt != nil || listed.Name != "sdk-go" {
		t.Fatalf("listed keys: %+v", keys)
	}
	keyed, err := withruntime.NewClient(withruntime.WithBaseURL(e.http.URL), withruntime.WithAPIKey(key.Secret),
		withruntime.WithHTTPClient(&http.Client{Transport: rec}))
	if err != nil {
		t.Fatal(err)
	}

	// A sandbox of that key, with a secret of its own (the admin's of the
	// same name is another secret) and an allow list.
	if sec, err := keyed.SetSecret(ctx, "SDK_TOKEN", value, []string{"api.example.com"}); err != nil || sec.Owner != key.ID {
		t.Fatalf("the tenant's own secret: %+v %v", sec, err)
	}
	sbx, err := keyed.Create(ctx, withruntime.Options{TimeoutSeconds: 120, MemoryMiB: 256, Secrets: []string{"SDK_TOKEN"},
		Network: &withruntime.NetworkPolicy{Allow: []string{"api.example.com"}}, MaxCostMicros: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Close()
	res, err := sbx.Run(ctx, `printf %s "$SDK_TOKEN"`)
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "wr_placeholder_") || strings.Contains(res.Stdout, value) {
		t.Fatalf("the secret's variable in the sandbox: %+v %v", res, err)
	}
	if secs, err := keyed.ListSecrets(ctx); err != nil || len(secs) != 1 || secs[0].Owner != key.ID {
		t.Fatalf("the tenant's secrets: %+v %v", secs, err)
	}
	if err := keyed.DeleteSecret(ctx, "SDK_TOKEN"); err != nil {
		t.Fatalf("the tenant deletes its own secret: %v", err)
	}

	// Network policy: read, change, refuse an invalid one.
	pol, err := sbx.Network(ctx)
	if err != nil || pol.Internet || !reflect.DeepEqual(pol.Allow, []string{"api.example.com"}) || len(pol.Deny) != 0 {
		t.Fatalf("network: %+v %v", pol, err)
	}
	want := withruntime.NetworkPolicy{Internet: true, Deny: []string{"blocked.example.com"}}
	if pol, err = sbx.SetNetwork(ctx, want); err != nil || !reflect.DeepEqual(pol, want) {
		t.Fatalf("set network: %+v %v", pol, err)
	}
	if pol, err = sbx.Network(ctx); err != nil || !reflect.DeepEqual(pol, want) {
		t.Fatalf("network after set: %+v %v", pol, err)
	}
	if _, err := sbx.SetNetwork(ctx, withruntime.NetworkPolicy{Internet: true, Allow: []string{"x.example.com"}}); !errors.Is(err, withruntime.ErrBadRequest) {
		t.Fatalf("invalid policy: %v", err)
	}

	// Some CPU, then the running cost.
	if res, err := sbx.Run(ctx, "timeout 1 sh -c 'while :; do :; done'; true"); err != nil || res.ExitCode != 0 {
		t.Fatalf("busy loop: %+v %v", res, err)
	}
	waitFor(t, 10*time.Second, "a running cost", func() bool {
		info, err := sbx.Refresh(ctx)
		return err == nil && info.CostMicros > 0
	})
	if err := sbx.Close(); err != nil {
		t.Fatal(err)
	}
	final, err := admin.Connect(ctx, sbx.ID())
	if !errors.Is(err, withruntime.ErrSandboxStopped) || final != nil {
		t.Fatalf("connect to the destroyed sandbox: %v", err)
	}
	stopped, err := admin.List(ctx, withruntime.ListFilter{State: "stopped"})
	if err != nil || len(stopped) != 1 || stopped[0].ID != sbx.ID() || stopped[0].CostMicros <= 0 {
		t.Fatalf("stopped sandbox: %+v %v", stopped, err)
	}

	// Usage by sandbox and by key: the sandbox's final cost.
	rows, err := admin.Usage(ctx, withruntime.UsageQuery{GroupBy: withruntime.GroupBySandbox})
	if err != nil || len(rows) != 1 {
		t.Fatalf("usage by sandbox: %+v %v", rows, err)
	}
	r := rows[0]
	if r.Group != sbx.ID() || r.CPUSeconds <= 0 || r.BilledCPUSeconds < r.CPUSeconds || r.GiBSeconds <= 0 || r.CostMicros != stopped[0].CostMicros {
		t.Errorf("usage row of the sandbox: %+v (its record says %d µ$)", r, stopped[0].CostMicros)
	}
	t.Logf("sandbox %s: %.3f CPU-s (%.3f billed), %.3f GiB-s, %d µ$", r.Group, r.CPUSeconds, r.BilledCPUSeconds, r.GiBSeconds, r.CostMicros)
	rep, err := keyed.UsageReport(ctx, withruntime.UsageQuery{GroupBy: withruntime.GroupByKey,
		From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Minute)})
	if err != nil || len(rep.Rows) != 1 || rep.Rows[0].Group != key.ID || rep.Rows[0].CostMicros != r.CostMicros ||
		rep.Total.CostMicros != r.CostMicros || rep.GroupBy != "key" || rep.Prices.CPUMicrosPerVCPUHour <= 0 {
		t.Errorf("usage by key: %+v %v", rep, err)
	}
	if _, err := admin.Usage(ctx, withruntime.UsageQuery{GroupBy: "week"}); !errors.Is(err, withruntime.ErrBadRequest) {
		t.Errorf("usage by week: %v", err)
	}

	// A key with a daily limit manages no keys (it could make itself one
	// without a limit); an admin key cannot revoke itself; a revoked key
	// is refused.
	if err := keyed.RevokeKey(ctx, key.ID); !errors.Is(err, withruntime.ErrForbidden) {
		t.Fatalf("a limited key revoking a key: %v", err)
	}
	if err := admin.RevokeKey(ctx, adminKeyID(t, admin)); !errors.Is(err, withruntime.ErrConflict) {
		t.Fatalf("a key revoking itself: %v", err)
	}
	if err := admin.RevokeKey(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := keyed.ListKeys(ctx); !errors.Is(err, withruntime.ErrUnauthorized) {
		t.Fatalf("a revoked key: %v", err)
	}
	if err := admin.RevokeKey(ctx, key.ID); !errors.Is(err, withruntime.ErrNotFound) {
		t.Fatalf("revoking twice: %v", err)
	}
	keys, _ = admin.ListKeys(ctx)
	if k := keys[len(keys)-1]; k.ID != key.ID || k.RevokedAt == nil {
		t.Errorf("revoked key as listed: %+v", k)
	}

	// A cost cap too small for the lease.
	_, err = admin.Create(ctx, withruntime.Options{CPU: 2, MemoryMiB: 4096, TimeoutSeconds: 3600, MaxCostMicros: 79_999})
	var ae *withruntime.APIError
	if !errors.Is(err, withruntime.ErrCostCap) || !errors.As(err, &ae) || ae.Status != 400 || ae.Code != "cost_cap" ||
		!strings.Contains(ae.Message, "80000 µ$") || !strings.Contains(ae.Message, "maxCostMicros 79999") {
		t.Fatalf("over the cost cap: %v", err)
	}

	// Deleting the secret.
	if err := admin.DeleteSecret(ctx, "SDK_TOKEN"); err != nil {
		t.Fatal(err)
	}
	if secs, err := admin.ListSecrets(ctx); err != nil || len(secs) != 0 {
		t.Fatalf("secrets after delete: %+v %v", secs, err)
	}
	if err := admin.DeleteSecret(ctx, "SDK_TOKEN"); !errors.Is(err, withruntime.ErrNotFound) {
		t.Fatalf("deleting twice: %v", err)
	}
	if leaks := rec.containing(value); len(leaks) > 0 {
		t.Errorf("the secret's value came back in %d answers: %q", len(leaks), leaks)
	}
}

// adminKeyID is the id of the key client c uses (the local key, "local").
func adminKeyID(t *testing.T, c *withruntime.Client) string {
	t.Helper()
	keys, err := c.ListKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Name == "local" {
			return k.ID
		}
	}
	t.Fatal("no local key")
	return ""
}
