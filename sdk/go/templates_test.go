package withruntime

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The template methods' requests; the real server is exercised in
// internal/itest/sdk_templates_test.go.

func TestDockerignoreMatchesDocker(t *testing.T) {
	b, err := os.ReadFile("testdata/dockerignore.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Cases []struct {
			Patterns []string        `json:"patterns"`
			Paths    map[string]bool `json:"paths"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	for _, c := range v.Cases {
		d, err := parseDockerignore(c.Patterns)
		if err != nil {
			t.Fatal(err)
		}
		for p, want := range c.Paths {
			if got := d.excluded(p); got != want {
				t.Errorf("%q: %q excluded %v, want %v", c.Patterns, p, got, want)
			}
		}
	}
}

// tarFiles reads a tar: names (directories end in /) to contents.
func tarFiles(t *testing.T, r io.Reader) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		if hdr.Typeflag == tar.TypeSymlink {
			b = []byte("-> " + hdr.Linkname)
		}
		out[hdr.Name] = string(b)
	}
}

func keys(m map[string]string) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, " ")
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// buildServer is a fake server for template builds: a taken name
// "taken", and every POST answered with events.
func buildServer(t *testing.T, got *http.Request, body *[]byte, events string) *Client {
	return fake(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /v1/templates/taken": answer(200, `{"name":"taken","createdAt":"2026-01-01T00:00:00Z","sizeBytes":1}`),
		"POST /v1/templates": func(w http.ResponseWriter, r *http.Request) {
			*got = *r
			*body, _ = io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/x-ndjson")
			io.WriteString(w, events)
		},
	})
}

const builtEvents = `{"type":"step","step":"RUN make","elapsedSeconds":0.5}
{"type":"output","data":"made\n"}
{"type":"step","step":"RUN make","done":true,"elapsedSeconds":1.5}
{"type":"template","template":{"name":"app","createdAt":"2026-01-01T00:00:00Z","sizeBytes":42,"origin":{"image":"Dockerfile","shell":"/bin/bash"}}}
`

func TestBuildTemplateSendsTheContext(t *testing.T) {
	var req http.Request
	var body []byte
	c := buildServer(t, &req, &body, builtEvents)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Dockerfile": "FROM base\nCOPY . /app\n", "app/main.py": "print(1)\n", "app/debug.log": "x",
		"secret.txt": "no", ".dockerignore": "secret.txt\n**/*.log\nnode_modules\n", "node_modules/big/index.js": "x",
		".withruntime.Dockerfile": "from the context",
	})
	if err := os.Symlink("app/main.py", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	var evs []string
	tpl, err := c.BuildTemplate(context.Background(), "app", DockerfileBuild{
		Context: dir, BuildArgs: map[string]string{"B": "2", "A": "1"}, Allow: []string{"pypi.example"},
	}, func(ev TemplateEvent) { evs = append(evs, ev.Type+":"+ev.Step+ev.Data) })
	if err != nil || tpl.Name != "app" || tpl.SizeBytes != 42 || tpl.Origin == nil || tpl.Origin.Shell != "/bin/bash" {
		t.Fatalf("build: %+v %v", tpl, err)
	}
	if strings.Join(evs, "|") != "step:RUN make|output:made\n|step:RUN make" {
		t.Errorf("progress: %q", evs)
	}
	if q := req.URL.RawQuery; q != "allow=pypi.example&buildArg=A%3D1&buildArg=B%3D2&dockerfile=Dockerfile&name=app" {
		t.Errorf("query: %s", q)
	}
	if req.Header.Get("Content-Type") != "application/x-tar" || req.Header.Get("Accept") != "application/x-ndjson" {
		t.Errorf("headers: %v", req.Header)
	}
	files := tarFiles(t, strings.NewReader(string(body)))
	if got := keys(files); got != ".dockerignore Dockerfile app/ app/main.py link" {
		t.Errorf("context: %s", got)
	}
	if files["link"] != "-> app/main.py" {
		t.Errorf("symlink: %q", files["link"])
	}

	// A Dockerfile from elsewhere, or given as text, goes in as
	// .withruntime.Dockerfile; the context's own file of that name is left out.
	other := filepath.Join(t.TempDir(), "Dockerfile.dev")
	writeFiles(t, filepath.Dir(other), map[string]string{"Dockerfile.dev": "FROM base\n"})
	for _, b := range []DockerfileBuild{{Context: dir, Dockerfile: other}, {Context: dir, DockerfileContent: "FROM base\n"}} {
		if _, err := c.BuildTemplate(context.Background(), "app", b, nil); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(req.URL.RawQuery, "dockerfile=.withruntime.Dockerfile") {
			t.Errorf("query: %s", req.URL.RawQuery)
		}
		if got := tarFiles(t, strings.NewReader(string(body)))[".withruntime.Dockerfile"]; got != "FROM base\n" {
			t.Errorf("the Dockerfile: %q", got)
		}
	}
}

func TestTemplateBuildErrors(t *testing.T) {
	var req http.Request
	var body []byte
	c := buildServer(t, &req, &body, `{"type":"step","step":"RUN false"}
{"type":"error","error":{"code":"bad_request","message":"line 2 (RUN false): exit code 1"}}
`)
	ctx := context.Background()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"Dockerfile": "FROM base\nRUN false\n"})
	_, err := c.BuildTemplate(ctx, "app", DockerfileBuild{Context: dir}, nil)
	var ae *APIError
	if !errors.Is(err, ErrBadRequest) || !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, "exit code 1") {
		t.Fatalf("error event: %v", err)
	}
	body = nil
	if _, err := c.BuildTemplate(ctx, "taken", DockerfileBuild{Context: dir}, nil); !errors.Is(err, ErrConflict) || body != nil {
		t.Fatalf("a taken name: %v (sent %d bytes)", err, len(body))
	}
	if _, err := c.BuildTemplate(ctx, "app", DockerfileBuild{Context: filepath.Join(dir, "nope")}, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing context: %v", err)
	}
	if _, err := c.CreateTemplate(ctx, "app", "./no/such/image.tar", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing tarball: %v", err)
	}
	if _, err := c.CreateTemplate(ctx, "app", "oci-layout:"+dir, nil); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "oci-layout file") {
		t.Fatalf("not a layout: %v", err)
	}
}

// writeBlob stores b in the layout dir and returns its digest.
func writeBlob(t *testing.T, dir string, b []byte) string {
	t.Helper()
	sum := sha256.Sum256(b)
	h := hex.EncodeToString(sum[:])
	writeFiles(t, filepath.Join(dir, "blobs", "sha256"), map[string]string{h: string(b)})
	return "sha256:" + h
}

func TestCreateTemplateFromLayout(t *testing.T) {
	var req http.Request
	var body []byte
	c := buildServer(t, &req, &body, `{"type":"template","template":{"name":"img","createdAt":"2026-01-01T00:00:00Z","sizeBytes":1,"origin":{"image":"x","shell":"/bin/sh"}}}
`)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"oci-layout": `{"imageLayoutVersion":"1.0.0"}`})
	config := writeBlob(t, dir, []byte(`{"architecture":"amd64","os":"linux"}`))
	layer := writeBlob(t, dir, []byte("layer bytes"))
	manifest := writeBlob(t, dir, []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
		"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"`+config+`"},
		"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"`+layer+`"}]}`))
	arm := writeBlob(t, dir, []byte(`{}`))
	// A multi-platform index inside the top one.
	nested := writeBlob(t, dir, []byte(`{"schemaVersion":2,"manifests":[
		{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"`+arm+`","platform":{"os":"linux","architecture":"arm64"}},
		{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"`+manifest+`","platform":{"os":"linux","architecture":"amd64"}}]}`))
	writeFiles(t, dir, map[string]string{"index.json": `{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"` + nested + `"}]}`})

	if _, err := c.CreateTemplate(context.Background(), "img", dir, nil); err != nil {
		t.Fatal(err)
	}
	if q := req.URL.Query(); q.Get("name") != "img" || q.Get("image") != dir || req.Header.Get("Content-Type") != "application/x-tar" {
		t.Errorf("request: %s %v", req.URL.RawQuery, req.Header)
	}
	files := tarFiles(t, strings.NewReader(string(body)))
	cfgName, layerName := "blobs/sha256/"+config[7:], "blobs/sha256/"+layer[7:]
	if files[layerName] != "layer bytes" || !strings.Contains(files[cfgName], "amd64") {
		t.Errorf("archive: %s", keys(files))
	}
	var m []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal([]byte(files["manifest.json"]), &m); err != nil || len(m) != 1 || m[0].Config != cfgName || strings.Join(m[0].Layers, ",") != layerName {
		t.Errorf("manifest.json: %s %v", files["manifest.json"], err)
	}

	// Only an arm64 image: a clear error, nothing sent.
	writeFiles(t, dir, map[string]string{"index.json": `{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"` + arm + `","platform":{"os":"linux","architecture":"arm64"}}]}`})
	body = nil
	if _, err := c.CreateTemplate(context.Background(), "img", "oci-layout:"+dir, nil); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "linux/arm64") || body != nil {
		t.Errorf("arm64 only: %v", err)
	}
	// A registry reference is sent as JSON for the server to pull.
	c.CreateTemplate(context.Background(), "img", "registry.example:5000/team/app:1", nil)
	if string(body) != `{"name":"img","fromImage":"registry.example:5000/team/app:1"}` || req.Header.Get("Content-Type") != "application/json" {
		t.Errorf("registry image: %s %v", body, req.Header)
	}
}
