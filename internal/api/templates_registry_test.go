package api

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"withruntime.dev/runtime/internal/template/registry"
)

// pushImage pushes to ref an image of one random layer whose config has
// labels (a template image as `withruntime template push` writes it, when
// they are a template's).
func pushImage(t *testing.T, ref string, labels map[string]string) {
	t.Helper()
	layer, err := random.Layer(64, "application/vnd.oci.image.layer.v1.tar")
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.ConfigFile(img, &v1.ConfigFile{OS: "linux", Architecture: "amd64", Config: v1.Config{Labels: labels}}); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
}

// TestTemplatesFromRegistry: on a server whose templates are images in a
// registry (serve --driver kubernetes), GET /v1/templates lists the
// templates pushed under the prefix (not other repositories), GET
// /v1/templates/NAME answers a template's Info as on one host, an unknown
// name is a 404, and builds, uploads and deletes are refused with a 409
// saying to build on a host and push.
func TestTemplatesFromRegistry(t *testing.T) {
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	prefix := host + "/withruntime-template-"
	tl := func(n, info string) map[string]string {
		return map[string]string{registry.LabelTemplate: n, registry.LabelInfo: info}
	}
	pushImage(t, prefix+"base:latest", tl("base", `{"suite":"bookworm","packages":["python3","git"],"sizeBytes":1234}`))
	pushImage(t, prefix+"py:latest", tl("py", `{"origin":{"image":"python:3.12","digest":"sha256:00","shell":"/bin/bash","env":["LANG=C.UTF-8"]}}`))
	pushImage(t, host+"/something-else:latest", tl("something-else", `{}`))
	pushImage(t, prefix+"plain:latest", nil) // not a template

	a := newTestAPIWith(t, &registry.Templates{Catalog: &registry.Catalog{Prefix: prefix}})

	code, body := a.do(t, "GET", "/v1/templates", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /v1/templates: %d %s", code, body)
	}
	var list TemplateList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tp := range list.Templates {
		names = append(names, tp.Name)
	}
	if got := strings.Join(names, ","); got != "base,py" || list.Note != "" {
		t.Fatalf("listed %q (note %q), want base,py: %s", got, list.Note, body)
	}

	code, body = a.do(t, "GET", "/v1/templates/py", nil)
	var tp Template
	if code != http.StatusOK || json.Unmarshal(body, &tp) != nil {
		t.Fatalf("GET /v1/templates/py: %d %s", code, body)
	}
	if tp.Name != "py" || tp.Origin == nil || tp.Origin.Image != "python:3.12" || tp.Origin.Shell != "/bin/bash" || len(tp.Origin.Env) != 1 {
		t.Fatalf("GET /v1/templates/py: %s", body)
	}
	code, body = a.do(t, "GET", "/v1/templates/base", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"sizeBytes":1234`) {
		t.Fatalf("GET /v1/templates/base: %d %s", code, body)
	}
	if code, body = a.do(t, "GET", "/v1/templates/nope", nil); code != http.StatusNotFound {
		t.Fatalf("GET /v1/templates/nope: %d %s, want 404", code, body)
	}

	for _, req := range []struct{ method, path, ct, body string }{
		{"POST", "/v1/templates", "application/json", `{"name":"new","fromImage":"python:3"}`},
		{"POST", "/v1/templates?name=new", ContentTypeTar, "x"},
		{"POST", "/v1/templates?name=new&dockerfile=Dockerfile", ContentTypeTar, "x"},
		{"DELETE", "/v1/templates/base", "", ""},
	} {
		code, body := a.do(t, req.method, req.path, []byte(req.body), "Content-Type", req.ct)
		if code != http.StatusConflict || !strings.Contains(string(body), "template push") {
			t.Errorf("%s %s: %d %s, want 409 saying to push", req.method, req.path, code, body)
		}
	}
	// The delete changed nothing.
	if code, body := a.do(t, "GET", "/v1/templates/base", nil); code != http.StatusOK {
		t.Fatalf("after DELETE: GET /v1/templates/base: %d %s", code, body)
	}
}
