package itest

// The contract tests hold the server to api/openapi.yaml: every route is
// called through a real server with a real sandbox, and each request and
// answer is validated against the document with kin-openapi. Response
// objects in the document have additionalProperties: false, so a field the
// server sends but the document does not declare fails the test.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/sdk/go/wire"
)

const specPath = "../../api/openapi.yaml"

var (
	specOnce   sync.Once
	specDoc    *openapi3.T
	specRouter routers.Router
	specErr    error
)

// loadSpec loads and validates api/openapi.yaml once per test binary.
func loadSpec(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	specOnce.Do(func() {
		openapi3filter.RegisterBodyDecoder(agentapi.ContentTypeNDJSON, ndjsonBodyDecoder)
		loader := openapi3.NewLoader()
		specDoc, specErr = loader.LoadFromFile(specPath)
		if specErr != nil {
			return
		}
		if specErr = specDoc.Validate(loader.Context); specErr != nil {
			return
		}
		specRouter, specErr = gorillamux.NewRouter(specDoc)
	})
	if specErr != nil {
		t.Fatalf("api/openapi.yaml: %v", specErr)
	}
	return specDoc, specRouter
}

// ndjsonBodyDecoder validates every line of an NDJSON body against the
// media type's schema (Event) and returns the last line for kin-openapi's
// own check.
func ndjsonBodyDecoder(body io.Reader, h http.Header, schema *openapi3.SchemaRef, enc openapi3filter.EncodingFn) (any, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var last any
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			return nil, fmt.Errorf("NDJSON line %d is empty", n)
		}
		v, err := openapi3filter.JSONBodyDecoder(bytes.NewReader(line), h, schema, enc)
		if err != nil {
			return nil, fmt.Errorf("NDJSON line %d: %w", n, err)
		}
		if err := schema.Value.VisitJSON(v, openapi3.VisitAsResponse(), openapi3.MultiErrors()); err != nil {
			return nil, fmt.Errorf("NDJSON line %d %s does not match the Event schema: %w", n, line, err)
		}
		last = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("empty NDJSON stream")
	}
	return last, nil
}

// contract sends requests through a server and validates each request and
// answer against the document. It records which operations answered which
// statuses.
type contract struct {
	t      *testing.T
	e      *env
	doc    *openapi3.T
	router routers.Router
	seen   map[string][]int // operationId -> statuses
}

func newContract(t *testing.T, e *env) *contract {
	doc, router := loadSpec(t)
	return &contract{t: t, e: e, doc: doc, router: router, seen: map[string][]int{}}
}

// apiCall is one request of a contract test.
type apiCall struct {
	method, path string
	// body is nil, []byte (sent as application/octet-stream), json.RawMessage
	// (sent as is, as JSON) or a value to marshal as JSON.
	body   any
	accept string
	// key overrides the API key; noAuth sends none.
	key    string
	noAuth bool
	// header adds request headers (a download's Range).
	header map[string]string
	// invalid says the request breaks the document on purpose: the
	// validator must refuse it too.
	invalid bool
	want    int
}

// do sends cl, checks its status and validates both directions. It returns
// the body.
func (c *contract) do(cl apiCall) []byte {
	c.t.Helper()
	var body io.Reader
	ctype := ""
	switch b := cl.body.(type) {
	case nil:
	case []byte:
		body, ctype = bytes.NewReader(b), "application/octet-stream"
	case json.RawMessage:
		body, ctype = bytes.NewReader(b), "application/json"
	default:
		data, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		body, ctype = bytes.NewReader(data), "application/json"
	}
	req, err := http.NewRequest(cl.method, c.e.http.URL+cl.path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if cl.accept != "" {
		req.Header.Set("Accept", cl.accept)
	}
	for k, v := range cl.header {
		req.Header.Set(k, v)
	}
	switch {
	case cl.noAuth:
	case cl.key != "":
		req.Header.Set("Authorization", "Bearer "+cl.key)
	default:
		req.Header.Set("Authorization", "Bearer "+c.e.key)
	}
	name := cl.method + " " + cl.path

	route, params, rerr := c.router.FindRoute(req)
	var reqIn *openapi3filter.RequestValidationInput
	if rerr == nil {
		reqIn = &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: specBearerAuth, MultiError: true},
		}
		verr := openapi3filter.ValidateRequest(context.Background(), reqIn)
		switch {
		case verr != nil && !cl.invalid:
			c.t.Errorf("%s: the request does not match api/openapi.yaml: %v", name, verr)
		case verr == nil && cl.invalid:
			c.t.Errorf("%s: the request was meant to break api/openapi.yaml, yet it validates", name)
		}
	}

	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", name, err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatalf("%s: reading the answer: %v", name, err)
	}
	if resp.StatusCode != cl.want {
		c.t.Fatalf("%s: status %d, want %d: %s", name, resp.StatusCode, cl.want, data)
	}

	if rerr != nil {
		// Not a route of the document (404) or not a method of the path
		// (405): the answer must still be an Error.
		if !errors.Is(rerr, routers.ErrPathNotFound) && !errors.Is(rerr, routers.ErrMethodNotAllowed) {
			c.t.Fatalf("%s: router: %v", name, rerr)
		}
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			c.t.Errorf("%s: not in api/openapi.yaml, yet answered %d", name, resp.StatusCode)
		}
		c.validateSchema(name, "Error", resp.Header, data)
		if resp.StatusCode == http.StatusMethodNotAllowed && resp.Header.Get("Allow") == "" {
			c.t.Errorf("%s: 405 without an Allow header", name)
		}
		return data
	}
	op := route.Operation.OperationID
	c.seen[op] = append(c.seen[op], resp.StatusCode)
	respIn := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: reqIn,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	respIn.SetBodyBytes(data)
	if err := openapi3filter.ValidateResponse(context.Background(), respIn); err != nil {
		c.t.Errorf("%s: the %d answer does not match api/openapi.yaml: %v\nbody: %.2000s", name, resp.StatusCode, err, data)
	}
	if resp.StatusCode >= 400 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		c.t.Errorf("%s: error answer with Content-Type %q", name, resp.Header.Get("Content-Type"))
	}
	return data
}

// validateSchema checks a JSON body against a named component schema.
func (c *contract) validateSchema(name, schema string, h http.Header, data []byte) {
	c.t.Helper()
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		c.t.Errorf("%s: Content-Type %q, want application/json: %s", name, ct, data)
		return
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		c.t.Errorf("%s: not JSON: %s", name, data)
		return
	}
	if err := c.doc.Components.Schemas[schema].Value.VisitJSON(v, openapi3.VisitAsResponse(), openapi3.MultiErrors()); err != nil {
		c.t.Errorf("%s: body does not match %s: %v\n%s", name, schema, err, data)
	}
}

func specBearerAuth(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if in.SecurityScheme.Type != "http" || in.SecurityScheme.Scheme != "bearer" {
		return fmt.Errorf("unexpected security scheme %s", in.SecuritySchemeName)
	}
	h := in.RequestValidationInput.Request.Header.Get("Authorization")
	if !strings.HasPrefix(h, "Bearer ") || strings.TrimSpace(h[len("Bearer "):]) == "" {
		return errors.New("no bearer token")
	}
	return nil
}

// mustDecode unmarshals data into out or fails.
func mustDecode(t *testing.T, data []byte, out any) {
	t.Helper()
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
}

// parseNDJSON splits an NDJSON body into events.
func parseNDJSON(t *testing.T, data []byte) []agentapi.Event {
	t.Helper()
	var evs []agentapi.Event
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	for dec.More() {
		var ev agentapi.Event
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("NDJSON %s: %v", data, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// TestContract calls every route of api/openapi.yaml, with success and
// typical errors, and validates every request and answer against it.
func TestContract(t *testing.T) {
	e := newEnv(t, withMaxUpload(1<<20))
	c := newContract(t, e)

	// Server, templates, keys.
	c.do(apiCall{method: "GET", path: "/v1/health", noAuth: true, want: 200})
	c.do(apiCall{method: "GET", path: "/v1/templates", want: 200})
	c.do(apiCall{method: "GET", path: "/v1/templates", noAuth: true, invalid: true, want: 401})
	c.do(apiCall{method: "GET", path: "/v1/keys", key: "wr_notakey", want: 401})
	var key api.Key
	mustDecode(t, c.do(apiCall{method: "POST", path: "/v1/keys", body: map[string]any{"name": "contract"}, want: 201}), &key)
	if key.Secret == "" {
		t.Fatalf("created key has no secret: %+v", key)
	}
	c.do(apiCall{method: "GET", path: "/v1/templates", key: key.Secret, want: 200})
	c.do(apiCall{method: "POST", path: "/v1/keys", body: map[string]any{}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: "/v1/keys", body: map[string]any{"name": "x", "scope": "all"}, invalid: true, want: 400})
	var keys api.KeyList
	mustDecode(t, c.do(apiCall{method: "GET", path: "/v1/keys", want: 200}), &keys)
	c.do(apiCall{method: "GET", path: "/v1/usage?groupBy=sandbox&from=2026-01-01", want: 200})
	c.do(apiCall{method: "GET", path: "/v1/usage?groupBy=week", invalid: true, want: 400})
	var capped api.Key
	mustDecode(t, c.do(apiCall{method: "POST", path: "/v1/keys", body: map[string]any{"name": "capped", "dailyLimitMicros": 1_000_000}, want: 201}), &capped)
	c.do(apiCall{method: "POST", path: "/v1/sandboxes", body: map[string]any{"timeoutSeconds": 3600, "cpu": 2, "maxCostMicros": 1}, want: 400})
	// Quotas: set on the key, past the disk quota a create is 507.
	var quoted api.Key
	mustDecode(t, c.do(apiCall{method: "POST", path: "/v1/keys", body: map[string]any{"name": "quoted", "dailyLimitMicros": 1_000_000,
		"diskQuotaMiB": 100, "pausedQuota": 1, "sandboxesQuota": 1}, want: 201}), &quoted)
	c.do(apiCall{method: "POST", path: "/v1/keys", body: map[string]any{"name": "x", "diskQuotaMiB": -1}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: "/v1/sandboxes", key: quoted.Secret, body: map[string]any{"diskMiB": 200}, want: 507})
	// A create with its first command: collected, streamed, refused.
	var swr api.SandboxWithResult
	mustDecode(t, c.do(apiCall{method: "POST", path: "/v1/sandboxes", body: map[string]any{"timeoutSeconds": 60, "exec": map[string]any{"command": "echo hi"}}, want: 201}), &swr)
	if swr.Result == nil || swr.Result.Stdout != "hi\n" {
		t.Errorf("create with exec: %+v", swr)
	}
	c.do(apiCall{method: "POST", path: "/v1/sandboxes", body: map[string]any{"timeoutSeconds": 60, "exec": map[string]any{"argv": []string{"nope-not-here"}}}, accept: agentapi.ContentTypeNDJSON, want: 201})
	c.do(apiCall{method: "POST", path: "/v1/sandboxes", body: map[string]any{"exec": map[string]any{"command": "true", "bogus": 1}}, invalid: true, want: 400})
	own := ""
	for _, k := range keys.Keys {
		if strings.HasPrefix(e.key, k.Prefix) && k.Name == "local" {
			own = k.ID
		}
	}
	if own == "" {
		t.Fatalf("the local key is not listed: %+v", keys)
	}
	c.do(apiCall{method: "DELETE", path: "/v1/keys/" + key.ID, want: 204})
	c.do(apiCall{method: "DELETE", path: "/v1/keys/" + key.ID, want: 404})
	c.do(apiCall{method: "DELETE", path: "/v1/keys/" + own, want: 409})
	c.do(apiCall{method: "GET", path: "/v1/keys", want: 200}) // now with a revokedAt
	c.do(apiCall{method: "GET", path: "/v1/templates", key: key.Secret, want: 401})

	// Templates from images: a registry on loopback; the shared templates
	// directory gets uniquely named templates, removed at the end.
	reg := newRegistry(t)
	push(t, reg+"/contract:1", imageOf(t, v1.Config{Env: []string{"A=b"}}, dashLayer(t)))
	tpl, tpl2 := fmt.Sprintf("contract-%d-a", time.Now().UnixNano()), fmt.Sprintf("contract-%d-b", time.Now().UnixNano())
	t.Cleanup(func() {
		_ = e.srv.Templates.Delete(context.Background(), tpl, nil)
		_ = e.srv.Templates.Delete(context.Background(), tpl2, nil)
		for _, n := range []string{tpl, tpl2} {
			os.Remove(filepath.Join(e.srv.Templates.Dir, "."+n+".lock"))
		}
	})
	c.do(apiCall{method: "POST", path: "/v1/templates", body: api.CreateTemplateRequest{Name: tpl, FromImage: reg + "/contract:1"}, want: 201})
	c.do(apiCall{method: "GET", path: "/v1/templates/" + tpl, want: 200})
	c.do(apiCall{method: "GET", path: "/v1/templates", want: 200}) // one with an origin
	c.do(apiCall{method: "POST", path: "/v1/templates", body: api.CreateTemplateRequest{Name: tpl, FromImage: reg + "/contract:1"}, want: 409})
	c.do(apiCall{method: "POST", path: "/v1/templates", body: api.CreateTemplateRequest{Name: tpl2, FromImage: reg + "/nope:1"}, want: 404})
	c.do(apiCall{method: "POST", path: "/v1/templates", body: map[string]any{"name": tpl2}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: "/v1/templates", body: api.CreateTemplateRequest{Name: tpl2, FromImage: reg + "/contract:1"},
		accept: agentapi.ContentTypeNDJSON, want: 200})
	c.do(apiCall{method: "DELETE", path: "/v1/templates/" + tpl2, want: 204})
	c.do(apiCall{method: "GET", path: "/v1/templates/" + tpl2, want: 404})
	c.do(apiCall{method: "GET", path: "/v1/templates/Bad!", want: 400})
	c.do(apiCall{method: "DELETE", path: "/v1/templates/" + tpl, want: 204})
	c.do(apiCall{method: "DELETE", path: "/v1/templates/" + tpl, want: 404})
	// Device login and metrics.
	c.do(apiCall{method: "GET", path: "/metrics", want: 200})
	c.do(apiCall{method: "GET", path: "/metrics", key: capped.Secret, want: 403})
	var grant api.DeviceAuthorization
	mustDecode(t, c.do(apiCall{method: "POST", path: "/v1/device/authorize", noAuth: true, body: api.DeviceAuthorizeRequest{ClientName: "contract@test"}, want: 200}), &grant)
	c.do(apiCall{method: "POST", path: "/v1/device/authorize", noAuth: true, body: map[string]any{"clientName": 5}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: "/v1/device/token", noAuth: true, body: api.DeviceTokenRequest{DeviceCode: grant.DeviceCode}, want: 400})
	c.do(apiCall{method: "GET", path: "/v1/device/requests/" + grant.UserCode, want: 200})
	c.do(apiCall{method: "GET", path: "/v1/device/requests/" + grant.UserCode, key: capped.Secret, want: 403})
	c.do(apiCall{method: "GET", path: "/v1/device/requests/BCDF-GHJK", want: 404})
	c.do(apiCall{method: "POST", path: "/v1/device/approve", body: api.DeviceApproveRequest{UserCode: grant.UserCode, KeyName: "device", DailyLimitMicros: 0}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: "/v1/device/approve", body: api.DeviceApproveRequest{UserCode: grant.UserCode, KeyName: "device", DailyLimitMicros: 1_000_000}, want: 204})
	c.do(apiCall{method: "POST", path: "/v1/device/deny", body: api.DeviceDenyRequest{UserCode: grant.UserCode}, want: 409})
	time.Sleep(time.Duration(grant.Interval) * time.Second)
	c.do(apiCall{method: "POST", path: "/v1/device/token", noAuth: true, body: api.DeviceTokenRequest{DeviceCode: grant.DeviceCode}, want: 200})
	var denied api.DeviceAuthorization
	mustDecode(t, c.do(apiCall{method: "POST", path: "/v1/device/authorize", noAuth: true, want: 200}), &denied)
	c.do(apiCall{method: "POST", path: "/v1/device/deny", body: api.DeviceDenyRequest{UserCode: denied.UserCode}, want: 204})

	// Sandboxes.
	var sb api.Sandbox
	mustDecode(t, c.do(apiCall{method: "POST", path: "/v1/sandboxes", want: 201,
		body: api.CreateSandboxRequest{TimeoutSeconds: 600, Env: map[string]string{"SUITE": "contract"}, Metadata: map[string]string{"suite": "contract"}}}), &sb)
	sbx := "/v1/sandboxes/" + sb.ID
	c.do(apiCall{method: "POST", path: "/v1/sandboxes", body: map[string]any{"template": "no-such-template"}, want: 400})
	c.do(apiCall{method: "POST", path: "/v1/sandboxes", body: map[string]any{"timeoutSeconds": -5}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: "/v1/sandboxes", body: map[string]any{"memory": 512}, invalid: true, want: 400})
	c.do(apiCall{method: "GET", path: "/v1/sandboxes", want: 200})
	c.do(apiCall{method: "GET", path: "/v1/sandboxes?state=running&metadata.suite=contract", want: 200})
	c.do(apiCall{method: "GET", path: "/v1/sandboxes?state=sleeping", invalid: true, want: 400})
	c.do(apiCall{method: "GET", path: sbx, want: 200})
	c.do(apiCall{method: "GET", path: "/v1/sandboxes/sbx_nosuchsandbox", want: 404})
	c.do(apiCall{method: "DELETE", path: "/v1/sandboxes/sbx_nosuchsandbox", want: 404})
	c.do(apiCall{method: "POST", path: sbx + "/timeout", body: map[string]any{"timeoutSeconds": 900}, want: 200})
	c.do(apiCall{method: "POST", path: sbx + "/timeout", body: map[string]any{"timeoutSeconds": 0}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: "/v1/sandboxes/sbx_nosuchsandbox/timeout", body: map[string]any{"timeoutSeconds": 60}, want: 404})

	// Network policy and secrets.
	c.do(apiCall{method: "GET", path: sbx + "/metrics", want: 200})
	c.do(apiCall{method: "GET", path: sbx + "/metrics?from=2020-01-01&to=2099-01-01T00:00:00Z", want: 200})
	c.do(apiCall{method: "GET", path: sbx + "/metrics?from=soon", want: 400})
	c.do(apiCall{method: "GET", path: "/v1/sandboxes/sbx_nosuchsandbox/metrics", want: 404})
	c.do(apiCall{method: "GET", path: sbx + "/network", want: 200})
	c.do(apiCall{method: "PUT", path: sbx + "/network", body: map[string]any{"allow": []string{"api.example.com", "*.example.org"}}, want: 200})
	c.do(apiCall{method: "PUT", path: sbx + "/network", body: map[string]any{"allow": []string{"not a host!"}}, want: 400})
	c.do(apiCall{method: "PUT", path: sbx + "/network", body: map[string]any{"internet": "yes"}, invalid: true, want: 400})
	c.do(apiCall{method: "PUT", path: "/v1/sandboxes/sbx_nosuchsandbox/network", body: map[string]any{}, want: 404})
	c.do(apiCall{method: "PUT", path: sbx + "/network", body: map[string]any{}, want: 200})
	c.do(apiCall{method: "POST", path: "/v1/secrets", body: map[string]any{"name": "CONTRACT_KEY", "value": "v-contract", "hosts": []string{"api.example.com"}}, want: 201})
	c.do(apiCall{method: "POST", path: "/v1/secrets", body: map[string]any{"name": "CONTRACT_KEY", "value": "v", "hosts": []string{"10.0.0.1"}}, want: 400})
	c.do(apiCall{method: "POST", path: "/v1/secrets", body: map[string]any{"name": "X", "value": "v"}, invalid: true, want: 400})
	c.do(apiCall{method: "GET", path: "/v1/secrets", want: 200})
	c.do(apiCall{method: "DELETE", path: "/v1/secrets/CONTRACT_KEY", want: 204})
	c.do(apiCall{method: "DELETE", path: "/v1/secrets/CONTRACT_KEY", want: 404})
	// A tenant's secrets (with their owner), reached by the admin with owner.
	tenantSecret := map[string]any{"name": "CONTRACT_KEY", "value": "v-tenant", "hosts": []string{"api.example.com"}}
	c.do(apiCall{method: "POST", path: "/v1/secrets", key: capped.Secret, body: tenantSecret, want: 201})
	c.do(apiCall{method: "GET", path: "/v1/secrets", key: capped.Secret, want: 200})
	c.do(apiCall{method: "GET", path: "/v1/secrets?owner=" + own, key: capped.Secret, want: 404})
	c.do(apiCall{method: "POST", path: "/v1/secrets", body: map[string]any{"name": "CONTRACT_KEY", "value": "v", "hosts": []string{"api.example.com"}, "owner": capped.ID}, want: 201})
	c.do(apiCall{method: "POST", path: "/v1/secrets", body: map[string]any{"name": "CONTRACT_KEY", "value": "v", "hosts": []string{"api.example.com"}, "owner": "key_nosuchkey"}, want: 404})
	c.do(apiCall{method: "POST", path: "/v1/secrets", body: map[string]any{"name": "CONTRACT_KEY", "value": "v", "hosts": []string{"api.example.com"}, "owner": own}, want: 400})
	c.do(apiCall{method: "GET", path: "/v1/secrets", want: 200})
	c.do(apiCall{method: "GET", path: "/v1/secrets?owner=" + capped.ID, want: 200})
	c.do(apiCall{method: "POST", path: "/v1/sandboxes", body: map[string]any{"secrets": []string{"CONTRACT_KEY"}}, want: 404})
	c.do(apiCall{method: "DELETE", path: "/v1/secrets/CONTRACT_KEY?owner=" + capped.ID, want: 204})
	c.do(apiCall{method: "DELETE", path: "/v1/secrets/CONTRACT_KEY", key: capped.Secret, want: 404})

	// Exec, collected and streamed, with lossy output, a timeout and errors.
	var res agentapi.ExecResult
	mustDecode(t, c.do(apiCall{method: "POST", path: sbx + "/exec", want: 200,
		body: agentapi.ExecRequest{Command: `printf 'a\377b'; echo err >&2; echo $SUITE $X >&2; exit 3`, Env: map[string]string{"X": "y"}}}), &res)
	if res.ExitCode != 3 || !res.StdoutLossy || res.StdoutBase64 != "Yf9i" || res.Stderr != "err\ncontract y\n" {
		t.Errorf("exec: %+v", res)
	}
	mustDecode(t, c.do(apiCall{method: "POST", path: sbx + "/exec", want: 200,
		body: agentapi.ExecRequest{Argv: []string{"sleep", "10"}, TimeoutSeconds: 0.3}}), &res)
	if !res.TimedOut || res.ExitCode != agentapi.TimeoutExitCode {
		t.Errorf("exec with timeout: %+v", res)
	}
	mustDecode(t, c.do(apiCall{method: "POST", path: sbx + "/exec", want: 200,
		body: agentapi.ExecRequest{Command: "head -c 100 /dev/zero", MaxOutputBytes: 10, Stdin: "ignored", User: "root", Cwd: "/tmp"}}), &res)
	if !res.StdoutTruncated || res.StdoutBytes != 100 || len(res.Stdout) != 10 {
		t.Errorf("exec with cap: %+v", res)
	}
	evs := parseNDJSON(t, c.do(apiCall{method: "POST", path: sbx + "/exec", accept: agentapi.ContentTypeNDJSON, want: 200,
		body: agentapi.ExecRequest{Command: `echo one; printf '\377' >&2; echo two`}}))
	if len(evs) < 3 || evs[0].Type != "start" || evs[len(evs)-1].Type != "exit" {
		t.Errorf("NDJSON exec: %+v", evs)
	}
	c.do(apiCall{method: "POST", path: sbx + "/exec", body: map[string]any{}, want: 400})
	c.do(apiCall{method: "POST", path: sbx + "/exec", body: map[string]any{"cmd": "ls"}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: sbx + "/exec", body: map[string]any{"command": "true", "timeoutSeconds": -1}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: sbx + "/exec", body: json.RawMessage(`{"command": "true"`), invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: sbx + "/exec", body: agentapi.ExecRequest{Argv: []string{"no-such-program"}}, want: 400})
	c.do(apiCall{method: "POST", path: "/v1/sandboxes/sbx_nosuchsandbox/exec", body: agentapi.ExecRequest{Command: "true"}, want: 404})
	c.do(apiCall{method: "POST", path: sbx + "/exec", body: agentapi.ExecRequest{Command: "true"}, noAuth: true, invalid: true, want: 401})

	// Background processes.
	var sleeper, quick agentapi.Process
	mustDecode(t, c.do(apiCall{method: "POST", path: sbx + "/processes", want: 201,
		body: agentapi.ExecRequest{Command: "echo started; sleep 60"}}), &sleeper)
	mustDecode(t, c.do(apiCall{method: "POST", path: sbx + "/processes", want: 201,
		body: agentapi.ExecRequest{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 4"}}}), &quick)
	pp := func(p agentapi.Process) string { return fmt.Sprintf("%s/processes/%d", sbx, p.Pid) }
	mustDecode(t, c.do(apiCall{method: "POST", path: pp(quick) + "/wait?timeoutSeconds=30", want: 200}), &res)
	if res.ExitCode != 4 || res.Stdout != "out\n" || res.Stderr != "err\n" {
		t.Errorf("wait: %+v", res)
	}
	evs = parseNDJSON(t, c.do(apiCall{method: "POST", path: pp(quick) + "/wait", accept: agentapi.ContentTypeNDJSON, want: 200}))
	if len(evs) < 2 || evs[0].Type != "start" || evs[len(evs)-1].Type != "exit" || evs[len(evs)-1].Result.ExitCode != 4 {
		t.Errorf("NDJSON wait: %+v", evs)
	}
	c.do(apiCall{method: "GET", path: sbx + "/processes", want: 200})
	c.do(apiCall{method: "GET", path: pp(sleeper), want: 200})
	c.do(apiCall{method: "GET", path: pp(quick), want: 200}) // with its result
	c.do(apiCall{method: "POST", path: pp(sleeper) + "/wait?timeoutSeconds=0.2", want: 408})
	evs = parseNDJSON(t, c.do(apiCall{method: "POST", path: pp(sleeper) + "/wait?timeoutSeconds=0.2", accept: agentapi.ContentTypeNDJSON, want: 200}))
	if last := evs[len(evs)-1]; last.Type != "error" || last.Error == nil || last.Error.Code != agentapi.CodeTimeout {
		t.Errorf("NDJSON wait with timeout: %+v", evs)
	}
	c.do(apiCall{method: "POST", path: pp(sleeper) + "/wait?timeoutSeconds=-1", invalid: true, want: 400})
	var killed agentapi.Process
	mustDecode(t, c.do(apiCall{method: "POST", path: pp(sleeper) + "/kill", body: agentapi.KillRequest{Signal: "SIGTERM"}, want: 200}), &killed)
	if killed.Running || killed.Result == nil || killed.Result.Signal != "SIGTERM" {
		t.Errorf("kill: %+v", killed)
	}
	c.do(apiCall{method: "POST", path: pp(sleeper) + "/kill", want: 200}) // no body: SIGKILL, already ended
	c.do(apiCall{method: "POST", path: pp(sleeper) + "/kill", body: agentapi.KillRequest{Signal: "SIGNOPE"}, want: 400})
	var reader agentapi.Process
	mustDecode(t, c.do(apiCall{method: "POST", path: sbx + "/processes", want: 201,
		body: agentapi.ExecRequest{Command: "read l; echo got:$l", StdinOpen: true}}), &reader)
	c.do(apiCall{method: "POST", path: pp(reader) + "/stdin", body: []byte("line\n"), want: 204})
	c.do(apiCall{method: "POST", path: pp(reader) + "/stdin/close", want: 204})
	mustDecode(t, c.do(apiCall{method: "POST", path: pp(reader) + "/wait?timeoutSeconds=30", want: 200}), &res)
	if res.Stdout != "got:line\n" {
		t.Errorf("stdin: %+v", res)
	}
	c.do(apiCall{method: "POST", path: pp(reader) + "/stdin", body: []byte("late"), want: 409})
	c.do(apiCall{method: "POST", path: pp(quick) + "/stdin", body: make([]byte, agentapi.MaxStdinWriteBytes+1), want: 413})
	c.do(apiCall{method: "POST", path: sbx + "/processes", body: agentapi.ExecRequest{Command: "true", StdinOpen: true, Stdin: "x"}, want: 400})
	c.do(apiCall{method: "GET", path: sbx + "/processes/99999", want: 404})
	c.do(apiCall{method: "POST", path: sbx + "/processes/99999/wait", want: 404})
	c.do(apiCall{method: "POST", path: sbx + "/processes/99999/kill", want: 404})
	c.do(apiCall{method: "GET", path: sbx + "/processes/abc", invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: sbx + "/processes", body: map[string]any{"argv": []string{}}, invalid: true, want: 400})
	// A process on a terminal (its WebSocket: TestTerminal*).
	var tty agentapi.Process
	mustDecode(t, c.do(apiCall{method: "POST", path: sbx + "/processes", want: 201,
		body: agentapi.ExecRequest{Command: "echo on a tty", Pty: &wire.PtySize{Cols: 80, Rows: 24}}}), &tty)
	if tty.Pty == nil || tty.Pty.Cols != 80 {
		t.Errorf("process on a terminal: %+v", tty)
	}
	c.do(apiCall{method: "POST", path: pp(tty) + "/stdin/close", want: 409})
	c.do(apiCall{method: "POST", path: sbx + "/processes", body: map[string]any{"command": "true", "pty": map[string]any{"cols": 0, "rows": 24}}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: sbx + "/processes", body: map[string]any{"command": "true", "stdinOpen": true, "pty": map[string]any{"cols": 80, "rows": 24}}, want: 400})
	c.do(apiCall{method: "POST", path: sbx + "/exec", body: map[string]any{"command": "true", "pty": map[string]any{"cols": 80, "rows": 24}}, want: 400})
	c.do(apiCall{method: "GET", path: pp(tty) + "/terminal", want: 400}) // not a WebSocket
	var sized agentapi.Process
	mustDecode(t, c.do(apiCall{method: "POST", path: sbx + "/processes", want: 201,
		body: agentapi.ExecRequest{Command: "sleep 600", Pty: &wire.PtySize{Cols: 80, Rows: 24}}}), &sized)
	var resized agentapi.Process
	mustDecode(t, c.do(apiCall{method: "POST", path: pp(sized) + "/resize", body: wire.PtySize{Cols: 100, Rows: 30}, want: 200}), &resized)
	if resized.Pty == nil || *resized.Pty != (wire.PtySize{Cols: 100, Rows: 30}) {
		t.Errorf("resize: %+v", resized)
	}
	c.do(apiCall{method: "POST", path: pp(sized) + "/resize", body: map[string]any{"cols": 0, "rows": 30}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: pp(sleeper) + "/resize", body: wire.PtySize{Cols: 80, Rows: 24}, want: 409})
	c.do(apiCall{method: "POST", path: pp(sized) + "/kill", want: 200})
	c.do(apiCall{method: "GET", path: pp(sleeper) + "/terminal", want: 400})

	// Files.
	c.do(apiCall{method: "PUT", path: sbx + "/files?path=c/hello.txt", body: []byte("hello\n"), want: 200})
	c.do(apiCall{method: "PUT", path: sbx + "/files?path=/workspace/c/empty", body: []byte{}, want: 200})
	if got := c.do(apiCall{method: "GET", path: sbx + "/files?path=/workspace/c/hello.txt", want: 200}); string(got) != "hello\n" {
		t.Errorf("read: %q", got)
	}
	c.do(apiCall{method: "GET", path: sbx + "/files?path=c/empty", want: 200})
	if got := c.do(apiCall{method: "GET", path: sbx + "/files?path=c/hello.txt", header: map[string]string{"Range": "bytes=1-3"}, want: 206}); string(got) != "ell" {
		t.Errorf("ranged read: %q", got)
	}
	c.do(apiCall{method: "GET", path: sbx + "/files?path=c/hello.txt", header: map[string]string{"Range": "bytes=6-"}, want: 416})
	c.do(apiCall{method: "GET", path: sbx + "/files?path=c/hello.txt", header: map[string]string{"Range": "bytes=x"}, want: 200})
	c.do(apiCall{method: "GET", path: sbx + "/files?path=c/missing", want: 404})
	c.do(apiCall{method: "GET", path: sbx + "/files?path=c", want: 400})
	c.do(apiCall{method: "GET", path: sbx + "/files", invalid: true, want: 400})
	c.do(apiCall{method: "GET", path: sbx + "/files?path=a%00b", want: 400})
	c.do(apiCall{method: "PUT", path: sbx + "/files?path=c", body: []byte("x"), want: 400})
	c.do(apiCall{method: "PUT", path: sbx + "/files?path=/proc/nope", body: []byte("x"), want: 403})
	c.do(apiCall{method: "PUT", path: sbx + "/files?path=big", body: make([]byte, 2<<20), want: 413})
	// Signed file URLs: made, then used with no key (a read, a write), refused when changed.
	var wu, ru api.FileURL
	mustDecode(t, c.do(apiCall{method: "POST", path: sbx + "/files/url", body: api.FileURLRequest{Path: "signed.txt", Operation: "write", ExpiresInSeconds: 300}, want: 200}), &wu)
	mustDecode(t, c.do(apiCall{method: "POST", path: sbx + "/files/url", body: api.FileURLRequest{Path: "signed.txt", Operation: "read"}, want: 200}), &ru)
	c.do(apiCall{method: "POST", path: sbx + "/files/url", body: map[string]any{"path": "a", "operation": "delete"}, invalid: true, want: 400})
	signedPath := func(u string) string { return strings.TrimPrefix(u, c.e.http.URL) }
	c.do(apiCall{method: "PUT", path: signedPath(wu.URL), body: []byte("by url"), noAuth: true, want: 200})
	c.do(apiCall{method: "GET", path: signedPath(ru.URL), noAuth: true, want: 200})
	c.do(apiCall{method: "GET", path: signedPath(ru.URL) + "x", noAuth: true, want: 401})
	c.do(apiCall{method: "GET", path: signedPath(wu.URL), noAuth: true, want: 403})
	c.do(apiCall{method: "POST", path: sbx + "/files/mkdir", body: agentapi.MkdirRequest{Path: "c/d/e", Parents: true}, want: 200})
	c.do(apiCall{method: "POST", path: sbx + "/files/mkdir", body: agentapi.MkdirRequest{Path: "c/d"}, want: 409})
	c.do(apiCall{method: "POST", path: sbx + "/files/mkdir", body: agentapi.MkdirRequest{Path: "x/y"}, want: 404})
	c.do(apiCall{method: "POST", path: sbx + "/files/mkdir", body: map[string]any{"parents": true}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: sbx + "/exec", body: agentapi.ExecRequest{Command: "ln -s hello.txt c/link"}, want: 200})
	var fi agentapi.FileInfo
	mustDecode(t, c.do(apiCall{method: "GET", path: sbx + "/files/stat?path=c/link", want: 200}), &fi)
	if fi.Type != "symlink" || fi.Target != "hello.txt" {
		t.Errorf("stat symlink: %+v", fi)
	}
	c.do(apiCall{method: "GET", path: sbx + "/files/stat?path=c/missing", want: 404})
	c.do(apiCall{method: "GET", path: sbx + "/files/list", want: 200})
	c.do(apiCall{method: "GET", path: sbx + "/files/list?path=c&depth=3", want: 200})
	c.do(apiCall{method: "GET", path: sbx + "/files/list?path=/dev/null", want: 400})
	c.do(apiCall{method: "GET", path: sbx + "/files/list?path=c&depth=0", invalid: true, want: 400})
	var fl agentapi.FileList
	mustDecode(t, c.do(apiCall{method: "GET", path: sbx + "/files/list?path=c&limit=1", want: 200}), &fl)
	if len(fl.Entries) != 1 || !fl.Truncated || fl.Next == "" || fl.Total == nil {
		t.Errorf("a page of 1: %+v", fl)
	}
	c.do(apiCall{method: "GET", path: sbx + "/files/list?path=c&limit=1&cursor=" + fl.Next, want: 200})
	c.do(apiCall{method: "GET", path: sbx + "/files/list?path=c&limit=0", invalid: true, want: 400})
	c.do(apiCall{method: "GET", path: sbx + "/files/list?path=c&cursor=%21", invalid: true, want: 400})
	c.do(apiCall{method: "GET", path: sbx + "/files/list?path=c&cursor=" + agentapi.ListCursor("/etc/passwd"), want: 400})
	c.do(apiCall{method: "GET", path: sbx + "/files/list?path=c/missing", want: 404})
	c.do(apiCall{method: "POST", path: sbx + "/files/rename", body: agentapi.RenameRequest{From: "c/hello.txt", To: "c/moved/hello.txt"}, want: 200})
	c.do(apiCall{method: "POST", path: sbx + "/files/rename", body: agentapi.RenameRequest{From: "c/hello.txt", To: "c/x"}, want: 404})
	c.do(apiCall{method: "POST", path: sbx + "/files/rename", body: agentapi.RenameRequest{From: "c/empty", To: "c/d"}, want: 409})
	c.do(apiCall{method: "POST", path: sbx + "/files/rename", body: map[string]any{"from": "c/empty"}, invalid: true, want: 400})
	// A watch streams until its directory goes (removed a moment later).
	c.do(apiCall{method: "POST", path: sbx + "/files/mkdir", body: agentapi.MkdirRequest{Path: "c/w"}, want: 200})
	go func() {
		time.Sleep(time.Second)
		e.do("POST", sbx+"/exec", agentapi.ExecRequest{Command: "touch c/w/x && mv c/w/x c/w/y && rm -r c/w"})
	}()
	watched := c.do(apiCall{method: "GET", path: sbx + "/files/watch?path=c/w&recursive=true", accept: agentapi.ContentTypeNDJSON, want: 200})
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(string(watched)), "\n") {
		var ev agentapi.WatchEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("watch line %q: %v", line, err)
		}
		if ev.Type != agentapi.EventHeartbeat {
			types = append(types, ev.Type)
		}
	}
	if strings.Join(types, " ") != "ready create chmod rename remove error" {
		t.Errorf("watch events: %v (%s)", types, watched)
	}
	c.do(apiCall{method: "GET", path: sbx + "/files/watch?path=c/empty", want: 400})
	c.do(apiCall{method: "GET", path: sbx + "/files/watch?path=c/missing", want: 404})
	c.do(apiCall{method: "GET", path: sbx + "/files/watch?recursive=maybe", invalid: true, want: 400})
	c.do(apiCall{method: "DELETE", path: sbx + "/files?path=c/empty", want: 204})
	c.do(apiCall{method: "DELETE", path: sbx + "/files?path=c/empty", want: 404})
	c.do(apiCall{method: "DELETE", path: sbx + "/files?path=c", want: 409})
	c.do(apiCall{method: "DELETE", path: sbx + "/files?path=c&recursive=yes", invalid: true, want: 400})
	c.do(apiCall{method: "DELETE", path: sbx + "/files?path=/workspace&recursive=true", want: 400})
	c.do(apiCall{method: "DELETE", path: sbx + "/files?path=c&recursive=true", want: 204})

	// Pause and resume.
	c.do(apiCall{method: "POST", path: sbx + "/resume", want: 409})
	mustDecode(t, c.do(apiCall{method: "POST", path: sbx + "/pause", want: 200}), &sb)
	if sb.State != "paused" || sb.ImageBytes <= 0 || sb.PausedAt == nil {
		t.Errorf("paused sandbox: %+v", sb)
	}
	c.do(apiCall{method: "POST", path: sbx + "/pause", want: 409})
	c.do(apiCall{method: "POST", path: sbx + "/exec", body: agentapi.ExecRequest{Command: "true"}, want: 409})
	c.do(apiCall{method: "GET", path: "/v1/sandboxes?state=paused", want: 200})
	c.do(apiCall{method: "POST", path: sbx + "/pause", body: map[string]any{"now": true}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: sbx + "/resume", body: map[string]any{"timeoutSeconds": "soon"}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: "/v1/sandboxes/sbx_nosuchsandbox/pause", want: 404})
	c.do(apiCall{method: "POST", path: sbx + "/resume", body: api.ResumeRequest{TimeoutSeconds: 600}, want: 200})
	c.do(apiCall{method: "POST", path: sbx + "/timeout", body: api.SetTimeoutRequest{TimeoutSeconds: 900, OnLeaseEnd: "pause"}, want: 200})
	c.do(apiCall{method: "POST", path: sbx + "/timeout", body: map[string]any{"timeoutSeconds": 900, "onLeaseEnd": "sleep"}, invalid: true, want: 400})

	// Volumes.
	var vol api.Volume
	mustDecode(t, c.do(apiCall{method: "POST", path: "/v1/volumes", body: api.CreateVolumeRequest{Name: "contract", SizeMiB: 16}, want: 201}), &vol)
	c.do(apiCall{method: "POST", path: "/v1/volumes", body: api.CreateVolumeRequest{Name: "contract", SizeMiB: 16}, want: 409})
	c.do(apiCall{method: "POST", path: "/v1/volumes", body: map[string]any{"name": "x"}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: "/v1/volumes", body: map[string]any{"name": "no way", "sizeMiB": 16}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: "/v1/volumes", key: quoted.Secret, body: api.CreateVolumeRequest{Name: "big", SizeMiB: 200}, want: 507})
	c.do(apiCall{method: "GET", path: "/v1/volumes", want: 200})
	c.do(apiCall{method: "GET", path: "/v1/volumes/contract", want: 200})
	c.do(apiCall{method: "GET", path: "/v1/volumes/contract", key: capped.Secret, want: 404})
	c.do(apiCall{method: "GET", path: "/v1/volumes/nope", want: 404})
	c.do(apiCall{method: "PUT", path: "/v1/volumes/contract/files?path=d/f.txt", body: []byte("vol\n"), want: 200})
	c.do(apiCall{method: "PUT", path: "/v1/volumes/contract/files?path=/", body: []byte("x"), want: 400})
	if got := c.do(apiCall{method: "GET", path: "/v1/volumes/contract/files?path=/d/f.txt", want: 200}); string(got) != "vol\n" {
		t.Errorf("volume file: %q", got)
	}
	c.do(apiCall{method: "GET", path: "/v1/volumes/contract/files?path=d/f.txt", header: map[string]string{"Range": "bytes=0-1"}, want: 206})
	c.do(apiCall{method: "GET", path: "/v1/volumes/contract/files?path=nope", want: 404})
	c.do(apiCall{method: "GET", path: "/v1/volumes/contract/files", invalid: true, want: 400})
	c.do(apiCall{method: "GET", path: "/v1/volumes/contract/files/list", want: 200})
	c.do(apiCall{method: "GET", path: "/v1/volumes/contract/files/list?path=d&limit=1", want: 200})
	c.do(apiCall{method: "GET", path: "/v1/volumes/contract/files/list?limit=0", invalid: true, want: 400})
	var vsb api.Sandbox
	mustDecode(t, c.do(apiCall{method: "POST", path: "/v1/sandboxes", want: 201,
		body: map[string]any{"timeoutSeconds": 600, "volumes": []api.VolumeMount{{Name: "contract", Path: "/data", ReadOnly: true}}}}), &vsb)
	c.do(apiCall{method: "POST", path: "/v1/sandboxes", body: map[string]any{"volumes": []api.VolumeMount{{Name: "nope", Path: "/data"}}}, want: 404})
	c.do(apiCall{method: "POST", path: "/v1/sandboxes", body: map[string]any{"volumes": []api.VolumeMount{{Name: "contract", Path: "/proc"}}}, want: 400})
	c.do(apiCall{method: "GET", path: "/v1/sandboxes/" + vsb.ID, want: 200}) // with its volumes
	c.do(apiCall{method: "DELETE", path: "/v1/volumes/contract", want: 409})
	c.do(apiCall{method: "DELETE", path: "/v1/sandboxes/" + vsb.ID, want: 204})
	c.do(apiCall{method: "DELETE", path: "/v1/volumes/contract", want: 204})
	c.do(apiCall{method: "DELETE", path: "/v1/volumes/contract", want: 404})
	// Snapshots and fork.
	var snap api.Snapshot
	mustDecode(t, c.do(apiCall{method: "POST", path: sbx + "/snapshots", body: api.CreateSnapshotRequest{Name: "contract-snap"}, want: 201}), &snap)
	if snap.State != "ready" || snap.Bytes <= 0 || snap.SourceSandboxID != sb.ID {
		t.Errorf("snapshot: %+v", snap)
	}
	c.do(apiCall{method: "POST", path: sbx + "/snapshots", body: api.CreateSnapshotRequest{Name: "contract-snap"}, want: 409})
	c.do(apiCall{method: "POST", path: sbx + "/snapshots", body: api.CreateSnapshotRequest{Mode: "filesystem"}, want: 201})
	c.do(apiCall{method: "POST", path: sbx + "/snapshots", body: map[string]any{"mode": "warm"}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: "/v1/sandboxes/sbx_nosuchsandbox/snapshots", want: 404})
	c.do(apiCall{method: "GET", path: "/v1/snapshots", want: 200})
	c.do(apiCall{method: "GET", path: "/v1/snapshots?sourceSandboxId=" + sb.ID, want: 200})
	c.do(apiCall{method: "GET", path: "/v1/snapshots?source=x", want: 400})
	c.do(apiCall{method: "GET", path: "/v1/snapshots/contract-snap", want: 200})
	c.do(apiCall{method: "GET", path: "/v1/snapshots/snap_nosuchsnapshot", want: 404})
	var restored api.Sandbox
	mustDecode(t, c.do(apiCall{method: "POST", path: "/v1/sandboxes", body: map[string]any{"snapshot": snap.ID, "timeoutSeconds": 60}, want: 201}), &restored)
	c.do(apiCall{method: "POST", path: "/v1/sandboxes", body: map[string]any{"snapshot": snap.ID, "memoryMiB": 64}, want: 400})
	c.do(apiCall{method: "POST", path: "/v1/sandboxes", body: map[string]any{"snapshot": "snap_nosuchsnapshot"}, want: 404})
	c.do(apiCall{method: "DELETE", path: "/v1/sandboxes/" + restored.ID, want: 204})
	var fr api.ForkResult
	mustDecode(t, c.do(apiCall{method: "POST", path: sbx + "/fork", body: api.ForkRequest{Count: 1, TimeoutSeconds: 60}, want: 200}), &fr)
	if len(fr.Sandboxes) != 1 || fr.Sandboxes[0].Sandbox == nil || fr.SnapshotKept {
		t.Errorf("fork: %+v", fr)
	} else {
		c.do(apiCall{method: "DELETE", path: "/v1/sandboxes/" + fr.Sandboxes[0].Sandbox.ID, want: 204})
	}
	c.do(apiCall{method: "POST", path: sbx + "/fork", body: map[string]any{}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: sbx + "/fork", body: api.ForkRequest{Count: 33}, invalid: true, want: 400})
	c.do(apiCall{method: "DELETE", path: "/v1/snapshots/contract-snap", want: 204})
	c.do(apiCall{method: "DELETE", path: "/v1/snapshots/contract-snap", want: 404})

	// Routes and methods the API does not have.
	c.do(apiCall{method: "GET", path: "/v1/nope", want: 404})
	c.do(apiCall{method: "GET", path: sbx + "/nope", want: 404})
	c.do(apiCall{method: "PUT", path: "/v1/health", want: 405})
	c.do(apiCall{method: "PATCH", path: sbx, want: 405})
	c.do(apiCall{method: "GET", path: sbx + "/exec", want: 405})
	c.do(apiCall{method: "POST", path: sbx + "/files", want: 405})
	c.do(apiCall{method: "GET", path: sbx + "/timeout", want: 405})
	c.do(apiCall{method: "DELETE", path: "/v1/keys", want: 405})

	// A destroyed sandbox.
	c.do(apiCall{method: "DELETE", path: sbx, want: 204})
	c.do(apiCall{method: "DELETE", path: sbx, want: 204})
	var got api.Sandbox
	mustDecode(t, c.do(apiCall{method: "GET", path: sbx, want: 200}), &got)
	if got.State != "stopped" || got.EndedAt == nil || got.EndReason != "deleted" {
		t.Errorf("destroyed sandbox: %+v", got)
	}
	c.do(apiCall{method: "POST", path: sbx + "/exec", body: agentapi.ExecRequest{Command: "true"}, want: 410})
	c.do(apiCall{method: "GET", path: sbx + "/files?path=x", want: 410})
	c.do(apiCall{method: "POST", path: sbx + "/timeout", body: map[string]any{"timeoutSeconds": 60}, want: 410})
	c.do(apiCall{method: "POST", path: sbx + "/pause", want: 410})
	c.do(apiCall{method: "GET", path: "/v1/sandboxes?state=stopped", want: 200})
	c.do(apiCall{method: "GET", path: "/v1/usage?groupBy=day", want: 200})

	// Every operation was called with a success (the code interpreter's
	// in TestContractCode).
	// The port relay answers what a program in the sandbox says, so it has
	// no schema to check: TestPortRelay covers it. A terminal is a
	// WebSocket, which the document describes in prose: TestTerminal*.
	c.assertAllSeen(func(op *openapi3.Operation) bool {
		return !slices.Contains(op.Tags, "code") && !slices.Contains(op.Tags, "ports") && !slices.Contains(op.Tags, "terminals")
	})
}

// assertAllSeen checks that every operation of the document that want
// selects was answered with a success.
func (c *contract) assertAllSeen(want func(*openapi3.Operation) bool) {
	c.t.Helper()
	var missing []string
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			if !want(op) {
				continue
			}
			ok := slices.ContainsFunc(c.seen[op.OperationID], func(s int) bool { return s < 300 })
			if !ok {
				missing = append(missing, fmt.Sprintf("%s %s (%s) %v", method, path, op.OperationID, c.seen[op.OperationID]))
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		c.t.Errorf("operations never answered with a success:\n%s", strings.Join(missing, "\n"))
	}
}

// TestContractCode holds the code interpreter's routes to the document,
// in a sandbox of the code-interpreter template.
func TestContractCode(t *testing.T) {
	e := newEnv(t)
	c := newContract(t, e)
	ci := e.ciSandbox(api.CreateSandboxRequest{})
	sbx := "/v1/sandboxes/" + ci.ID
	var ex agentapi.Execution
	mustDecode(t, c.do(apiCall{method: "POST", path: sbx + "/code", want: 200,
		body: agentapi.RunCodeRequest{Code: "import matplotlib.pyplot as plt\nprint('hi'); plt.plot([1]); display({'a': 1}, raw=False)\n1/0"}}), &ex)
	if ex.Error == nil || len(ex.Results) != 2 || len(ex.Logs.Stdout) != 1 {
		t.Errorf("code: %+v", ex)
	}
	// Charts of every kind in one figure, and a DataFrame: their fields are the document's.
	mustDecode(t, c.do(apiCall{method: "POST", path: sbx + "/code", want: 200, body: agentapi.RunCodeRequest{Code: `import matplotlib.pyplot as plt, pandas as pd
fig, ax = plt.subplots(2, 3); fig.suptitle('All')
ax[0][0].bar(['a', 'b'], [1, 2]); ax[0][1].pie([1, 3], labels=['x', 'y']); ax[0][2].boxplot([[1, 2, 3, 9]])
ax[1][0].scatter([1, 2], [3, 4]); ax[1][1].plot([1, 2], ['p', 'q']); ax[1][2].fill_between([1, 2], [1, 2])
plt.show()
pd.DataFrame({'n': [1, None]})`}}), &ex)
	if len(ex.Results) != 2 || ex.Results[0].Chart == nil || len(ex.Results[0].Chart.Charts) != 6 {
		t.Errorf("charts: results %+v, error %+v, stdout %q, stderr %q", ex.Results, ex.Error, ex.Logs.Stdout, ex.Logs.Stderr)
	}
	c.do(apiCall{method: "POST", path: sbx + "/code", want: 200, body: agentapi.RunCodeRequest{Code: "import time; time.sleep(5)", TimeoutSeconds: 0.5, Env: map[string]string{"A": "b"}}})
	c.do(apiCall{method: "POST", path: sbx + "/code", accept: agentapi.ContentTypeNDJSON, want: 200,
		body: agentapi.RunCodeRequest{Code: "import sys; print(1); print(2, file=sys.stderr); display(3); 1/0"}})
	c.do(apiCall{method: "POST", path: sbx + "/code", body: map[string]any{"cell": "1"}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: sbx + "/code", body: map[string]any{"code": "1", "timeoutSeconds": -1}, invalid: true, want: 400})
	c.do(apiCall{method: "POST", path: sbx + "/code", body: agentapi.RunCodeRequest{Code: "1", Language: "cobol"}, want: 400})
	c.do(apiCall{method: "POST", path: sbx + "/code", body: agentapi.RunCodeRequest{Code: "1", ContextID: "ctx_nosuchcontext"}, want: 404})
	var ctx agentapi.Context
	mustDecode(t, c.do(apiCall{method: "POST", path: sbx + "/contexts", body: agentapi.CreateContextRequest{Cwd: "/tmp", Env: map[string]string{"X": "y"}}, want: 201}), &ctx)
	c.do(apiCall{method: "POST", path: sbx + "/contexts", want: 201})
	c.do(apiCall{method: "POST", path: sbx + "/contexts", body: agentapi.CreateContextRequest{Cwd: "no/such/dir"}, want: 400})
	c.do(apiCall{method: "POST", path: sbx + "/contexts", body: map[string]any{"lang": "python"}, invalid: true, want: 400})
	c.do(apiCall{method: "GET", path: sbx + "/contexts", want: 200})
	c.do(apiCall{method: "GET", path: sbx + "/contexts/" + ctx.ID, want: 200})
	c.do(apiCall{method: "GET", path: sbx + "/contexts/ctx_nosuchcontext", want: 404})
	c.do(apiCall{method: "PATCH", path: sbx + "/contexts/" + ctx.ID, body: wire.UpdateContextRequest{Cwd: "/workspace"}, want: 200})
	c.do(apiCall{method: "PATCH", path: sbx + "/contexts/" + ctx.ID, body: wire.UpdateContextRequest{Cwd: "no/such/dir"}, want: 400})
	c.do(apiCall{method: "PATCH", path: sbx + "/contexts/ctx_nosuchcontext", body: wire.UpdateContextRequest{Cwd: "/workspace"}, want: 404})
	c.do(apiCall{method: "POST", path: sbx + "/contexts/" + ctx.ID + "/restart", want: 200})
	c.do(apiCall{method: "POST", path: sbx + "/contexts/ctx_nosuchcontext/restart", want: 404})
	c.do(apiCall{method: "DELETE", path: sbx + "/contexts/" + ctx.ID, want: 204})
	c.do(apiCall{method: "DELETE", path: sbx + "/contexts/" + ctx.ID, want: 404})
	c.do(apiCall{method: "PUT", path: sbx + "/code", want: 405})
	// A sandbox without kernels.
	var sb api.Sandbox
	mustDecode(t, c.do(apiCall{method: "POST", path: "/v1/sandboxes", body: map[string]any{}, want: 201}), &sb)
	c.do(apiCall{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/code", body: agentapi.RunCodeRequest{Code: "1"}, want: 501})
	c.do(apiCall{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/contexts", want: 501})
	c.assertAllSeen(func(op *openapi3.Operation) bool { return slices.Contains(op.Tags, "code") })
}
