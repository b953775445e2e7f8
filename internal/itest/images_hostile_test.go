package itest

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// hostileScene is a templates directory next to a directory of host files
// that hostile images try to reach.
type hostileScene struct {
	base, tdir, outside, victim string
}

func newHostileScene(t *testing.T) hostileScene {
	t.Helper()
	base := t.TempDir()
	s := hostileScene{base: base, tdir: filepath.Join(base, "templates"), outside: filepath.Join(base, "outside")}
	s.victim = filepath.Join(s.outside, "victim")
	if err := os.MkdirAll(s.outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.victim, []byte("host file"), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// around lists every path under base except the templates directory, with
// mode and size, and the victim's content: what an escaping layer would
// change.
func (s hostileScene) around(t *testing.T) string {
	t.Helper()
	var out []string
	filepath.Walk(s.base, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		if p == s.tdir {
			return filepath.SkipDir
		}
		out = append(out, p+" "+fi.Mode().String())
		return nil
	})
	sort.Strings(out)
	b, _ := os.ReadFile(s.victim)
	return strings.Join(out, "\n") + "\n" + string(b)
}

// leftovers lists what is in the templates directory besides lock files.
func (s hostileScene) leftovers(t *testing.T) []string {
	t.Helper()
	ents, _ := os.ReadDir(s.tdir)
	var out []string
	for _, e := range ents {
		if !(strings.HasPrefix(e.Name(), ".") && strings.HasSuffix(e.Name(), ".lock")) {
			out = append(out, e.Name())
		}
	}
	return out
}

// sparseLayer is a layer holding a 10 GiB sparse file, as GNU tar writes it
// (a few KiB).
func sparseLayer(t *testing.T) v1.Layer {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("end"), 10<<30)
	f.Close()
	out, err := exec.Command("tar", "-C", dir, "--sparse", "-cf", "-", "big").Output()
	if err != nil {
		t.Fatalf("tar --sparse: %v", err)
	}
	return layerOfBytes(t, out)
}

// TestImageHostileLayers: images whose layers escape the root, write
// through a symlink, link to a host file, carry a device node or a 10 GiB
// sparse file are refused with a clear error and status; nothing is left in
// the templates directory and nothing around it changes.
func TestImageHostileLayers(t *testing.T) {
	s := newHostileScene(t)
	e := newEnv(t, withTemplatesDir(s.tdir))
	reg := newRegistry(t)
	reg0 := func(n string) string { return reg + "/hostile/" + n + ":1" }
	ok := tarEnt{Header: tar.Header{Name: "etc/ok"}, Body: "ok"}
	cases := []struct {
		name   string
		layers []v1.Layer
		status int
		code   string
		want   string
	}{
		{"dotdot", []v1.Layer{layerOf(t, ok, tarEnt{Header: tar.Header{Name: "../../../outside/victim"}, Body: "pwned"})},
			400, "bad_request", `"../../../outside/victim": the name contains ".."`},
		{"symlink-write", []v1.Layer{
			layerOf(t, tarEnt{Header: tar.Header{Name: "evil", Typeflag: tar.TypeSymlink, Linkname: s.outside}}),
			layerOf(t, tarEnt{Header: tar.Header{Name: "evil/victim"}, Body: "pwned"})},
			400, "bad_request", `layer 2/2 (sha256:`},
		{"hardlink", []v1.Layer{layerOf(t, tarEnt{Header: tar.Header{Name: "x", Typeflag: tar.TypeLink, Linkname: "../../../outside/victim"}})},
			400, "bad_request", "is a hard link to \"../../../outside/victim\", outside the image"},
		{"device", []v1.Layer{layerOf(t, tarEnt{Header: tar.Header{Name: "usr/kmem", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 2}})},
			400, "bad_request", "is a character device (1:2)"},
		{"sparse", []v1.Layer{sparseLayer(t)},
			413, "too_large", `"big": 10737418243 bytes would take the image past the import's cap of 8 GiB`},
	}
	before := s.around(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref := reg0(c.name)
			push(t, ref, imageOf(t, v1.Config{}, c.layers...))
			status, data := e.do("POST", "/v1/templates", api.CreateTemplateRequest{Name: c.name, FromImage: ref})
			if msg := errorMessage(t, data); status != c.status || errorCode(t, data) != c.code || !strings.Contains(msg, c.want) || !strings.Contains(msg, ref) {
				t.Errorf("got %d %s\nwant %d %s saying %q and naming %s", status, data, c.status, c.code, c.want, ref)
			}
			// The same through the NDJSON stream: the error is its last event.
			evs, status, data := e.importNDJSON(api.CreateTemplateRequest{Name: c.name, FromImage: ref})
			if status != 200 || len(evs) == 0 || evs[len(evs)-1].Type != "error" || evs[len(evs)-1].Error.Code != c.code {
				t.Errorf("streamed: %d %s", status, data)
			}
			if left := s.leftovers(t); len(left) > 0 {
				t.Errorf("left in the templates directory: %v", left)
			}
			if after := s.around(t); after != before {
				t.Errorf("files around the templates directory changed:\n%s\n---\n%s", before, after)
			}
			if st, _ := e.do("GET", "/v1/templates/"+c.name, nil); st != http.StatusNotFound {
				t.Errorf("GET the refused template: %d", st)
			}
		})
	}
}

// errorMessage decodes an error body's message.
func errorMessage(t *testing.T, data []byte) string {
	t.Helper()
	var eb agentapi.ErrorBody
	if err := json.Unmarshal(data, &eb); err != nil {
		t.Fatalf("not an error body: %s", data)
	}
	return eb.Error.Message
}

// TestImageBadInput: what the API refuses before pulling anything, each with
// its status and a message that says what to fix.
func TestImageBadInput(t *testing.T) {
	s := newHostileScene(t)
	e := newEnv(t, withTemplatesDir(s.tdir))
	reg := newRegistry(t)
	small := imageOf(t, v1.Config{}, dashLayer(t))
	push(t, reg+"/small:1", small)
	e.must(http.StatusCreated, "POST", "/v1/templates", api.CreateTemplateRequest{Name: "small", FromImage: reg + "/small:1"}, nil)

	arm := imageOf(t, v1.Config{}, layerOf(t, tarEnt{Header: tar.Header{Name: "x"}, Body: "x"}))
	acf, _ := arm.ConfigFile()
	acf = acf.DeepCopy()
	acf.Architecture = "arm64"
	arm, err := mutate.ConfigFile(arm, acf)
	if err != nil {
		t.Fatal(err)
	}
	push(t, reg+"/arm:1", arm)

	var tenant api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: "tenant", DailyLimitMicros: 1_000_000}, &tenant)

	cases := []struct {
		name   string
		body   any
		hdr    []string
		status int
		want   string
	}{
		{"missing image", api.CreateTemplateRequest{Name: "m", FromImage: reg + "/nope:1"}, nil, 404, reg + "/nope:1 was not found"},
		{"bad name", api.CreateTemplateRequest{Name: "Bad Name", FromImage: reg + "/small:1"}, nil, 400, "invalid template name"},
		{"taken", api.CreateTemplateRequest{Name: "small", FromImage: reg + "/small:1"}, nil, 409, `template "small" already exists`},
		{"reserved", api.CreateTemplateRequest{Name: "base", FromImage: reg + "/small:1"}, nil, 409, "reserved for the built-in recipe"},
		{"wrong arch", api.CreateTemplateRequest{Name: "arm", FromImage: reg + "/arm:1"}, nil, 400, "is for linux/arm64; Runtime runs linux/amd64 images only"},
		{"a path", api.CreateTemplateRequest{Name: "p", FromImage: "/etc"}, nil, 400, "the server does not read files on a caller's behalf"},
		{"bad reference", api.CreateTemplateRequest{Name: "r", FromImage: "UPPER/Case::x"}, nil, 400, "is not a valid reference"},
		{"unreachable registry", api.CreateTemplateRequest{Name: "u", FromImage: "127.0.0.1:1/x:1"}, nil, 400, "cannot reach its registry"},
		{"unknown field", map[string]string{"name": "x", "from": "y"}, nil, 400, `unknown field "from"`},
		{"bad tarball", "this is not a tarball", []string{"Content-Type", api.ContentTypeTar}, 400, "not a usable `docker save` tarball"},
	}
	for _, c := range cases {
		path := "/v1/templates"
		if c.name == "bad tarball" {
			path += "?name=tb"
		}
		status, data := e.do("POST", path, c.body, c.hdr...)
		if status != c.status || !strings.Contains(errorMessage(t, data), c.want) {
			t.Errorf("%s: %d %s\nwant %d saying %q", c.name, status, data, c.status, c.want)
		}
	}
	// A tenant key makes templates private to itself and deletes only
	// those; the server's shared ones are not its to delete.
	tenantAuth := []string{"Authorization", "Bearer " + tenant.Secret}
	var priv api.Template
	status, data := e.do("POST", "/v1/templates", api.CreateTemplateRequest{Name: "t", FromImage: reg + "/small:1"}, tenantAuth...)
	if status != http.StatusCreated || json.Unmarshal(data, &priv) != nil || !priv.Private {
		t.Errorf("a tenant's template: %d %s; want 201, private", status, data)
	}
	if status, data := e.do("GET", "/v1/templates/t", nil); status != 404 {
		t.Errorf("another key GETs the tenant's template: %d %s", status, data)
	}
	if status, data := e.do("DELETE", "/v1/templates/small", nil, tenantAuth...); status != 403 {
		t.Errorf("tenant DELETE of a shared template: %d %s", status, data)
	}
	if status, data := e.do("DELETE", "/v1/templates/t", nil, tenantAuth...); status != http.StatusNoContent {
		t.Errorf("tenant DELETE of its own template: %d %s", status, data)
	}
	if status, data := e.do("DELETE", "/v1/templates/nope", nil); status != 404 {
		t.Errorf("DELETE a missing template: %d %s", status, data)
	}
	if left := s.leftovers(t); strings.Join(left, ",") != "small" {
		t.Errorf("templates directory holds %v; want only small", left)
	}
}

// TestImageCABundleSymlink: an image whose CA bundle is a symlink to a host
// file must not get that file mounted into a sandbox with secrets (the host
// builds the bundle from the template's: it must read it inside the root).
func TestImageCABundleSymlink(t *testing.T) {
	s := newHostileScene(t)
	e := newEnv(t, withTemplatesDir(s.tdir))
	const marker = "HOST-ONLY-8f3a2c"
	if err := os.WriteFile(s.victim, []byte(marker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := func(n string) tarEnt { return tarEnt{Header: tar.Header{Name: n, Typeflag: tar.TypeDir}} }
	img := imageOf(t, v1.Config{}, dashLayer(t), layerOf(t, dir("etc/"), dir("etc/ssl/"), dir("etc/ssl/certs/"),
		tarEnt{Header: tar.Header{Name: "etc/ssl/certs/ca-certificates.crt", Typeflag: tar.TypeSymlink, Linkname: s.victim}}))
	var tb bytes.Buffer
	if err := tarball.Write(mustTag(t, "example.test/cabundle:1"), img, &tb); err != nil {
		t.Fatal(err)
	}
	if status, data := e.do("POST", "/v1/templates?name=cabundle", tb.Bytes(), "Content-Type", api.ContentTypeTar); status != http.StatusCreated {
		t.Fatalf("upload: %d %s", status, data)
	}
	e.must(http.StatusCreated, "POST", "/v1/secrets", api.CreateSecretRequest{Name: "TOKEN", Value: "s3cret-value", Hosts: []string{"api.example.test"}}, nil)
	sb := e.create(api.CreateSandboxRequest{Template: "cabundle", Secrets: []string{"TOKEN"}})
	status, data := e.do("GET", "/v1/sandboxes/"+sb.ID+"/files?path=/etc/ssl/certs/ca-certificates.crt", nil)
	if status != http.StatusOK || strings.Contains(string(data), marker) || !strings.Contains(string(data), "BEGIN CERTIFICATE") {
		t.Fatalf("the sandbox's CA bundle: %d %q; want the Runtime CA and not the host file", status, data)
	}
	res := e.exec(sb.ID, agentapi.ExecRequest{Command: `echo "$SSL_CERT_FILE"`})
	if res.Stdout != "/etc/ssl/certs/ca-certificates.crt\n" {
		t.Errorf("SSL_CERT_FILE: %+v", res)
	}
}
