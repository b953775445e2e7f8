package registry

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sync/singleflight"

	"withruntime.dev/runtime/internal/template"
)

// DefaultRefresh is how long a Catalog trusts what it resolved before it
// asks the registry again.
const DefaultRefresh = time.Minute

// resolveTimeout bounds one resolution (a HEAD, a GET of the manifest and
// one of the config) when the caller gives no context.
const resolveTimeout = 30 * time.Second

// Catalog finds templates in a registry: template NAME is the image
// Prefix+NAME+":latest", as Push wrote it. It implements the sandbox
// manager's Templates (RootFS gives the image pinned by digest, which the
// Kubernetes driver names in the pod) and TemplateEnv (the environment from
// the image's labels), so that a server with --driver kubernetes needs no
// template directory.
//
// What it resolved is cached: the first use of a template waits for the
// registry; later ones never do. Once an answer is older than Refresh, the
// next use gets it still and starts a refresh behind, so a re-push is seen
// by the creates after that one (new sandboxes get the new digest, running
// ones keep theirs), and a refresh that fails (registry unreachable, or
// answering something refused) keeps the last good answer: a registry
// outage does not stop creates of a template already seen (it is tried
// again after another Refresh). Errors are returned only for a template
// never resolved.
type Catalog struct {
	// Prefix is put before a template's name, e.g.
	// "registry.example/withruntime-template-".
	Prefix string
	// Refresh is how long a resolution is trusted (default DefaultRefresh).
	Refresh time.Duration
	// Options say how to reach the registry.
	Options Options

	now    func() time.Time
	group  singleflight.Group
	mu     sync.Mutex
	cached map[string]entry
}

type entry struct {
	t  Template
	at time.Time
}

// Template is a template as its image describes it.
type Template struct {
	Meta
	// Ref is the image pinned by digest (repository@sha256:…).
	Ref string
}

// Tag is the image reference of template tname (not resolved).
func (c *Catalog) Tag(tname string) (name.Tag, error) {
	if err := template.ValidName(tname); err != nil {
		return name.Tag{}, err
	}
	t, err := name.NewTag(c.Prefix + tname + ":latest")
	if err != nil {
		return name.Tag{}, fmt.Errorf("template %q: its image name %q: %w (check --kubernetes-template-image-prefix)", tname, c.Prefix+tname+":latest", err)
	}
	return t, nil
}

// Resolve returns template tname as its image says (from the cache after
// the first time; see Catalog). Errors say which image and what is
// wrong with it; they wrap template.ErrNotFound when the registry has no
// such image.
func (c *Catalog) Resolve(ctx context.Context, tname string) (Template, error) {
	refresh := c.Refresh
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	c.mu.Lock()
	e, ok := c.cached[tname]
	stale := ok && now().Sub(e.at) >= refresh
	if stale {
		// One refresh per Refresh: a failed one is tried again only
		// after another Refresh, with the old answer meanwhile.
		c.cached[tname] = entry{t: e.t, at: now()}
	}
	c.mu.Unlock()
	if ok {
		if stale {
			// Answered from the cache at once, refreshed behind.
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
				defer cancel()
				c.resolve(ctx, tname, now) //nolint:errcheck // the cache keeps the last good answer
			}()
		}
		return e.t, nil
	}
	return c.resolve(ctx, tname, now)
}

// resolve fetches template tname (one fetch at a time per name) and caches
// what it finds.
func (c *Catalog) resolve(ctx context.Context, tname string, now func() time.Time) (Template, error) {
	v, err, _ := c.group.Do(tname, func() (any, error) {
		t, err := c.fetch(ctx, tname)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		if c.cached == nil {
			c.cached = map[string]entry{}
		}
		c.cached[tname] = entry{t: t, at: now()}
		c.mu.Unlock()
		return t, nil
	})
	if err != nil {
		return Template{}, err
	}
	return v.(Template), nil
}

// RootFS returns template tname's image pinned by digest (for the
// Kubernetes driver, whose Spec.RootFS is an image reference).
func (c *Catalog) RootFS(tname string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	t, err := c.Resolve(ctx, tname)
	return t.Ref, err
}

// Env returns the environment template tname's sandboxes start with.
func (c *Catalog) Env(tname string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	t, err := c.Resolve(ctx, tname)
	return t.Env, err
}

// fetch reads template tname's manifest and config from the registry, each
// within its cap, and checks them (metaFrom).
func (c *Catalog) fetch(ctx context.Context, tname string) (Template, error) {
	tag, err := c.Tag(tname)
	if err != nil {
		return Template{}, err
	}
	fail := func(format string, a ...any) (Template, error) {
		return Template{}, fmt.Errorf("image %s: %s", tag, fmt.Sprintf(format, a...))
	}
	opts := c.Options.remote(ctx)
	head, err := remote.Head(tag, opts...)
	if err != nil {
		if isNotFound(err) {
			return Template{}, fmt.Errorf("%w: %q: no image %s in the registry; push it with `withruntime template push %s --image %s`",
				template.ErrNotFound, tname, tag, tname, tag)
		}
		return fail("%v", err)
	}
	if head.Size > MaxManifestBytes {
		return fail("its manifest is %d bytes, more than the %d a template's may be", head.Size, MaxManifestBytes)
	}
	if head.MediaType != types.OCIManifestSchema1 && head.MediaType != types.DockerManifestSchema2 {
		return fail("it is a %s, not an image manifest (push it with `withruntime template push`)", head.MediaType)
	}
	// Fetched by the digest the HEAD gave, so that manifest and pin agree
	// even if the tag moves meanwhile.
	pinned := tag.Context().Digest(head.Digest.String())
	desc, err := remote.Get(pinned, opts...)
	if err != nil {
		return fail("%v", err)
	}
	if len(desc.Manifest) > MaxManifestBytes {
		return fail("its manifest is %d bytes, more than the %d a template's may be", len(desc.Manifest), MaxManifestBytes)
	}
	m, err := v1.ParseManifest(bytesReader(desc.Manifest))
	if err != nil {
		return fail("unreadable manifest: %v", err)
	}
	if m.Config.Size <= 0 || m.Config.Size > MaxConfigBytes {
		return fail("its config is %d bytes; a template's is 1 to %d", m.Config.Size, MaxConfigBytes)
	}
	if len(m.Layers) == 0 {
		return fail("it has no layers")
	}
	blob, err := remote.Layer(tag.Context().Digest(m.Config.Digest.String()), opts...)
	if err != nil {
		return fail("config: %v", err)
	}
	rc, err := blob.Compressed()
	if err != nil {
		return fail("config: %v", err)
	}
	defer rc.Close()
	// The blob reader checks the digest at EOF: read one byte more than
	// the cap so that an overlong blob is refused, not cut.
	raw, err := io.ReadAll(io.LimitReader(rc, MaxConfigBytes+1))
	if err != nil {
		return fail("config: %v", err)
	}
	if int64(len(raw)) != m.Config.Size {
		return fail("its config is %d bytes, not the %d its manifest says", len(raw), m.Config.Size)
	}
	if h, _, err := v1.SHA256(bytesReader(raw)); err != nil || h != m.Config.Digest {
		return fail("its config does not match its digest %s", m.Config.Digest)
	}
	meta, err := metaFrom(tname, raw)
	if err != nil {
		return fail("%v", err)
	}
	return Template{Meta: meta, Ref: pinned.String()}, nil
}
