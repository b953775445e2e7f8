package registry

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestTemplatesList: List finds the templates pushed under the prefix and
// nothing else (other repositories, an image under the prefix that is not
// a template); Get answers a template's Info.
func TestTemplatesList(t *testing.T) {
	host := serveRegistry(t, nil)
	p := host + "/team/withruntime-template-"
	pushConfig(t, p+"alpha:latest", templateConfig("alpha", `{"suite":"bookworm","packages":["python3"]}`))
	pushConfig(t, p+"beta:latest", templateConfig("beta", `{"origin":{"image":"python:3","shell":"/bin/sh","env":["A=1"]}}`))
	pushConfig(t, p+"notatemplate:latest", v1.ConfigFile{OS: "linux", Architecture: "amd64"})
	pushConfig(t, host+"/team/other:latest", templateConfig("other", `{}`))
	pushConfig(t, host+"/withruntime-template-gamma:latest", templateConfig("gamma", `{}`)) // another path

	tpl := &Templates{Catalog: &Catalog{Prefix: p}}
	infos, note, err := tpl.ListNote(context.Background())
	if err != nil || note != "" {
		t.Fatalf("ListNote: %v, note %q", err, note)
	}
	var names []string
	for _, i := range infos {
		names = append(names, i.Name)
	}
	if got := strings.Join(names, ","); got != "alpha,beta" {
		t.Fatalf("listed %q, want alpha,beta", got)
	}
	if infos[0].Suite != "bookworm" || infos[1].Origin == nil || infos[1].Origin.Image != "python:3" {
		t.Fatalf("infos: %+v", infos)
	}
	info, err := tpl.Get("beta")
	if err != nil || info.Name != "beta" || info.Origin.Shell != "/bin/sh" {
		t.Fatalf("Get(beta) = %+v, %v", info, err)
	}
}

// TestTemplatesListHostileCatalog: a registry that refuses the catalog API
// gets the templates resolved so far and a note; one that answers a huge
// page, or pages without end, is cut off by the caps, never hangs the list.
func TestTemplatesListHostileCatalog(t *testing.T) {
	var mode atomic.Int32
	var pages atomic.Int32
	host := serveRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, "/_catalog") {
				h.ServeHTTP(w, r)
				return
			}
			switch mode.Load() {
			case 1: // refused, as many public registries do
				http.Error(w, `{"errors":[{"code":"UNSUPPORTED","message":"no catalog"}]}`, http.StatusNotFound)
			case 2: // an endless body
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"repositories":["`))
				chunk := []byte(strings.Repeat("a", 64<<10))
				for r.Context().Err() == nil { // until the client hangs up
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
			case 3: // full pages without end, each moving on
				n := pages.Add(1)
				var repos []string
				for i := 0; i < catalogPageSize; i++ {
					repos = append(repos, fmt.Sprintf(`"x/r%06d-%03d"`, n, i))
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"repositories":[%s]}`, strings.Join(repos, ","))
			}
		})
	})
	p := host + "/withruntime-template-"
	pushConfig(t, p+"alpha:latest", templateConfig("alpha", `{}`))
	pushConfig(t, p+"beta:latest", templateConfig("beta", `{}`))
	tpl := &Templates{Catalog: &Catalog{Prefix: p}, ListTimeout: 10 * time.Second}
	if _, err := tpl.Get("beta"); err != nil { // a create used it
		t.Fatal(err)
	}
	for m, want := range map[int32]string{1: "does not list its repositories", 2: "does not list its repositories", 3: "over 2000 repositories"} {
		mode.Store(m)
		start := time.Now()
		infos, note, err := tpl.ListNote(context.Background())
		if err != nil {
			t.Fatalf("mode %d: %v", m, err)
		}
		if !strings.Contains(note, want) {
			t.Errorf("mode %d: note %q, want it to say %q", m, note, want)
		}
		if len(infos) != 1 || infos[0].Name != "beta" {
			t.Errorf("mode %d: listed %+v, want beta (the one resolved)", m, infos)
		}
		if d := time.Since(start); d > 8*time.Second {
			t.Errorf("mode %d: took %s", m, d)
		}
	}
	if n := pages.Load(); n != MaxCatalogPages {
		t.Errorf("read %d endless pages, want %d", n, MaxCatalogPages)
	}
}

// TestTemplatesListSlowRegistry: a registry that never answers for one
// template does not hold the list past ListTimeout; the templates resolved
// before are listed, with a note.
func TestTemplatesListSlowRegistry(t *testing.T) {
	var slow atomic.Bool
	host := serveRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if slow.Load() && strings.Contains(r.URL.Path, "template-slow/manifests/") {
				<-r.Context().Done() // until the client gives up
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	p := host + "/withruntime-template-"
	pushConfig(t, p+"alpha:latest", templateConfig("alpha", `{}`))
	pushConfig(t, p+"slow:latest", templateConfig("slow", `{}`))
	slow.Store(true)
	tpl := &Templates{Catalog: &Catalog{Prefix: p}, ListTimeout: 2 * time.Second}
	start := time.Now()
	infos, note, err := tpl.ListNote(context.Background())
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("list took %s, want about ListTimeout (2s)", d)
	}
	if err != nil || len(infos) != 1 || infos[0].Name != "alpha" || !strings.Contains(note, "took over 2s") {
		t.Fatalf("ListNote = %+v, %q, %v; want alpha and a note", infos, note, err)
	}
}
