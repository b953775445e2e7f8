package registry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"withruntime.dev/runtime/internal/template"
)

// Bounds on what Templates.List asks of a registry.
const (
	// MaxListTemplates caps the templates one List answers.
	MaxListTemplates = 200
	// MaxCatalogPages caps the catalog pages (of catalogPageSize
	// repositories each) one List reads.
	MaxCatalogPages = 20
	// MaxCatalogBytes caps one catalog page's body.
	MaxCatalogBytes = 1 << 20
	// DefaultListTimeout bounds one List, catalog and resolutions.
	DefaultListTimeout = 20 * time.Second
)

const catalogPageSize = 100

// Templates answers the template API of a server whose templates are in a
// registry (serve --driver kubernetes): Get resolves through the Catalog
// (cached), List reads the registry's catalog API. It is read-only: templates
// are built on a host and pushed (`withruntime template push`).
type Templates struct {
	// Catalog resolves templates (the sandbox manager's).
	Catalog *Catalog
	// ListTimeout bounds one List (default DefaultListTimeout).
	ListTimeout time.Duration
}

// Get returns template tname's Info as its image's label says. Errors
// wrap template.ErrNotFound when the registry has no such image.
func (t *Templates) Get(tname string) (template.Info, error) {
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	r, err := t.Catalog.Resolve(ctx, tname)
	if err != nil {
		return template.Info{}, err
	}
	return r.Info, nil
}

// List returns the templates of ListNote, without its note.
func (t *Templates) List() ([]template.Info, error) {
	infos, _, err := t.ListNote(context.Background())
	return infos, err
}

// ListNote returns the templates in the registry, sorted by name: the
// repositories the registry's catalog API (GET /v2/_catalog) names under
// the Catalog's prefix, each resolved (images that are not templates are
// left out). At most MaxListTemplates, MaxCatalogPages pages and
// ListTimeout in all. When the list is incomplete (the registry refuses
// the catalog API, as many public ones do, or a bound was reached) it
// returns what it has (at least the templates resolved so far, e.g. by
// creates) and a note saying why; an error only when it has nothing.
func (t *Templates) ListNote(ctx context.Context) ([]template.Info, string, error) {
	timeout := t.ListTimeout
	if timeout <= 0 {
		timeout = DefaultListTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := t.Catalog
	names, note := c.catalogNames(ctx)
	seen := map[string]bool{}
	for _, n := range names {
		seen[n] = true
	}
	for _, n := range c.known() {
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) > MaxListTemplates {
		names = names[:MaxListTemplates]
		note = joinNote(note, fmt.Sprintf("only the first %d templates are listed", MaxListTemplates))
	}
	infos := make([]template.Info, 0, len(names))
	late := false
	for _, n := range names {
		if ctx.Err() != nil {
			// Out of time: the cached ones only.
			if r, ok := c.cachedTemplate(n); ok {
				infos = append(infos, r.Info)
			} else {
				late = true
			}
			continue
		}
		r, err := c.Resolve(ctx, n)
		if err != nil {
			late = late || ctx.Err() != nil
			continue // not a template (or gone): GET /v1/templates/NAME says why
		}
		infos = append(infos, r.Info)
	}
	if late {
		note = joinNote(note, fmt.Sprintf("the registry took over %s; templates not resolved by then are left out", timeout))
	}
	return infos, note, nil
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// repoPrefix is the registry and the repository-name prefix of the
// Catalog's templates.
func (c *Catalog) repoPrefix() (name.Registry, string, error) {
	const probe = "x"
	repo, err := name.NewRepository(c.Prefix + probe)
	if err != nil {
		return name.Registry{}, "", fmt.Errorf("template image prefix %q: %w", c.Prefix, err)
	}
	return repo.Registry, strings.TrimSuffix(repo.RepositoryStr(), probe), nil
}

// catalogNames reads the registry's catalog, page by page within the
// bounds, and returns the template names under the prefix, with a note
// when it could not read all of it.
func (c *Catalog) catalogNames(ctx context.Context) ([]string, string) {
	reg, prefix, err := c.repoPrefix()
	if err != nil {
		return nil, err.Error()
	}
	opts := Options{Keychain: c.Options.Keychain, Transport: capBodies{c.Options.Transport}}.remote(ctx)
	var names []string
	last := ""
	for page := 0; ; page++ {
		if page == MaxCatalogPages {
			return names, fmt.Sprintf("the registry's catalog has over %d repositories; only templates among the first ones or already used are listed", MaxCatalogPages*catalogPageSize)
		}
		repos, err := remote.CatalogPage(reg, last, catalogPageSize, opts...)
		if err != nil {
			return names, fmt.Sprintf("the registry does not list its repositories (catalog API: %v); only templates this server has already used are listed, and GET /v1/templates/NAME finds any", err)
		}
		for _, r := range repos {
			if n, ok := strings.CutPrefix(r, prefix); ok && template.ValidName(n) == nil {
				names = append(names, n)
			}
		}
		// A short page is the last; a page that does not move on (a
		// registry answering the same page again) ends it too.
		if len(repos) < catalogPageSize || repos[len(repos)-1] <= last {
			return names, ""
		}
		last = repos[len(repos)-1]
	}
}

// cachedTemplate is template tname as last resolved, if it was.
func (c *Catalog) cachedTemplate(tname string) (Template, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cached[tname]
	return e.t, ok
}

// known is the names of the templates resolved so far.
func (c *Catalog) known() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.cached))
	for n := range c.cached {
		out = append(out, n)
	}
	return out
}

// capBodies cuts catalog answers at MaxCatalogBytes (the JSON decoder
// then fails: a huge answer is refused, not read).
type capBodies struct{ next http.RoundTripper }

func (c capBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	next := c.next
	if next == nil {
		next = remote.DefaultTransport
	}
	resp, err := next.RoundTrip(r)
	if err != nil || !strings.HasSuffix(r.URL.Path, "/_catalog") {
		return resp, err
	}
	resp.Body = limitedBody{io.LimitReader(resp.Body, MaxCatalogBytes), resp.Body}
	return resp, nil
}

type limitedBody struct {
	io.Reader
	io.Closer
}
