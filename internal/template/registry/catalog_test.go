package registry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"withruntime.dev/runtime/internal/template"
)

// pushConfig pushes to ref an image of one random layer whose config is
// cf, as a hostile registry (or a careless user) could hold it.
func pushConfig(t *testing.T, ref string, cf v1.ConfigFile) v1.Hash {
	t.Helper()
	layer, err := random.Layer(64, "application/vnd.oci.image.layer.v1.tar")
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.ConfigFile(img, &cf); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return d
}

// bigManifest pushes to ref an image whose manifest is over
// MaxManifestBytes (an annotation of 100 KiB).
func bigManifest(t *testing.T, ref string, cf v1.ConfigFile) {
	t.Helper()
	img, err := mutate.ConfigFile(empty.Image, &cf)
	if err != nil {
		t.Fatal(err)
	}
	img = mutate.Annotations(img, map[string]string{"pad": strings.Repeat("x", 100<<10)}).(v1.Image)
	tag, _ := name.NewTag(ref)
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
}

func templateConfig(tname, info string, env ...string) v1.ConfigFile {
	return v1.ConfigFile{OS: "linux", Architecture: "amd64", Config: v1.Config{Env: env,
		Labels: map[string]string{LabelTemplate: tname, LabelInfo: info}}}
}

// TestCatalogRefusesHostileImages: a registry answering with something
// other than a template's image of sane size gets a clear error, never a
// crash, a huge read or a template with made-up metadata.
func TestCatalogRefusesHostileImages(t *testing.T) {
	var swapConfig atomic.Bool
	host := serveRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// A registry that answers a config blob with other bytes
			// than its digest names.
			if swapConfig.Load() && r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/t-swapped/blobs/") {
				rec := &recorder{header: http.Header{}}
				h.ServeHTTP(rec, r)
				b := bytes.Replace(rec.body.Bytes(), []byte("FOO=1"), []byte("FOO=2"), 1)
				w.WriteHeader(rec.code)
				w.Write(b)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	p := host + "/wr/t-"
	good := `{"name":"x","recipe":"r","origin":{"image":"i","env":["A=1"],"shell":"/bin/sh"}}`
	pushConfig(t, p+"nolabel:latest", v1.ConfigFile{OS: "linux", Architecture: "amd64"})
	pushConfig(t, p+"other:latest", templateConfig("base", good))
	pushConfig(t, p+"badjson:latest", templateConfig("badjson", "{not json"))
	pushConfig(t, p+"nul:latest", templateConfig("nul", `{"origin":{"env":["A=1\u0000B=2"]}}`))
	pushConfig(t, p+"noeq:latest", templateConfig("noeq", `{"origin":{"env":["JUSTAKEY"]}}`))
	pushConfig(t, p+"bigenv:latest", templateConfig("bigenv", `{"origin":{"env":["A=`+strings.Repeat("x", MaxEnvBytes)+`"]}}`))
	pushConfig(t, p+"huge:latest", templateConfig("huge", good+strings.Repeat(" ", 2*MaxConfigBytes)))
	arm := templateConfig("arm", good)
	arm.Architecture = "arm64"
	pushConfig(t, p+"arm:latest", arm)
	pushConfig(t, p+"swapped:latest", templateConfig("swapped", good, "FOO=1"))
	bigManifest(t, p+"bigmanifest:latest", templateConfig("bigmanifest", good))
	swapConfig.Store(true)
	idx := mutate.AppendManifests(empty.Index)
	tag, _ := name.NewTag(p + "index:latest")
	if err := remote.WriteIndex(tag, idx); err != nil {
		t.Fatal(err)
	}

	cat := &Catalog{Prefix: p}
	ctx := context.Background()
	for tname, want := range map[string]string{
		"nolabel":     "no " + LabelTemplate + " label",
		"other":       `image of template "base", not of "other"`,
		"badjson":     "unreadable " + LabelInfo,
		"nul":         "not KEY=value",
		"noeq":        "not KEY=value",
		"bigenv":      "more than",
		"huge":        "config is",
		"arm":         "linux/amd64",
		"swapped":     "sha256", // the blob reader checks the digest
		"bigmanifest": "manifest is",
		"index":       "not an image manifest",
		"missing":     "no image",
		"Bad":         "invalid template name",
	} {
		tpl, err := cat.Resolve(ctx, tname)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %+v, %v; want an error saying %q", tname, tpl, err, want)
		}
	}
	if _, err := cat.Resolve(ctx, "missing"); !errors.Is(err, template.ErrNotFound) {
		t.Errorf("missing: %v, want template.ErrNotFound", err)
	}
	if tpl, err := (&Catalog{Prefix: p}).RootFS("huge"); err == nil || tpl != "" {
		t.Errorf("RootFS of a refused image: %q, %v", tpl, err)
	}
}

// TestCatalogCachesAndFollowsPushes: a resolution is reused until Refresh;
// then a re-push is seen (a new digest), and a registry that went bad
// keeps the last good answer.
func TestCatalogCachesAndFollowsPushes(t *testing.T) {
	var gets atomic.Int64
	var down atomic.Bool
	host := serveRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/manifests/") {
				gets.Add(1)
			}
			if down.Load() {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	p := host + "/wr/t-"
	first := pushConfig(t, p+"a:latest", templateConfig("a", `{"origin":{"env":["V=1"]}}`))
	now := time.Unix(1000, 0)
	cat := &Catalog{Prefix: p, Refresh: time.Minute, now: func() time.Time { return now }}
	ctx := context.Background()
	tpl, err := cat.Resolve(ctx, "a")
	if err != nil || !strings.HasSuffix(tpl.Ref, "@"+first.String()) || strings.Join(tpl.Env, ",") != "V=1" {
		t.Fatalf("first: %+v, %v", tpl, err)
	}
	n := gets.Load()
	second := pushConfig(t, p+"a:latest", templateConfig("a", `{"origin":{"env":["V=2"]}}`))
	gets.Store(n)
	if tpl, _ := cat.Resolve(ctx, "a"); !strings.HasSuffix(tpl.Ref, "@"+first.String()) || gets.Load() != n {
		t.Fatalf("within Refresh: %s after %d registry requests, want the cached %s", tpl.Ref, gets.Load()-n, first)
	}
	now = now.Add(2 * time.Minute)
	if tpl, _ := cat.Resolve(ctx, "a"); !strings.HasSuffix(tpl.Ref, "@"+first.String()) {
		t.Fatalf("first use after Refresh: %+v, want the cached %s (refreshed behind)", tpl, first)
	}
	waitRef(t, cat, "a", second.String())
	if tpl, _ := cat.Resolve(ctx, "a"); strings.Join(tpl.Env, ",") != "V=2" {
		t.Fatalf("after the refresh: %+v", tpl)
	}
	down.Store(true)
	now = now.Add(2 * time.Minute)
	start := time.Now()
	if tpl, err := cat.Resolve(ctx, "a"); err != nil || !strings.HasSuffix(tpl.Ref, "@"+second.String()) || time.Since(start) > time.Second {
		t.Fatalf("registry down: %+v, %v after %v; want the last good answer at once", tpl, err, time.Since(start))
	}
	if _, err := cat.Resolve(ctx, "never"); err == nil {
		t.Fatal("a template never resolved, registry down: no error")
	}
}

// waitRef waits until cat resolves tname to digest.
func waitRef(t *testing.T, cat *Catalog, tname, digest string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tpl, err := cat.Resolve(context.Background(), tname)
		if err == nil && strings.HasSuffix(tpl.Ref, "@"+digest) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still resolves to %s (%v), want %s", tname, tpl.Ref, err, digest)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recorder is a minimal http.ResponseWriter keeping what it is written.
type recorder struct {
	header http.Header
	body   bytes.Buffer
	code   int
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(c int) { r.code = c }

var _ io.Writer = (*recorder)(nil)
