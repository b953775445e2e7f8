package registry

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"withruntime.dev/runtime/internal/template"
)

// AgentPath is where the agent's image holds the static agent, where the
// Kubernetes driver's init container runs it from.
const AgentPath = "/withruntime-agent"

// epoch is the creation time of every image pushed: the same template (or
// agent binary) gives the same digest whenever it is pushed.
var epoch = v1.Time{Time: time.Unix(0, 0).UTC()}

// Options say how to reach a registry.
type Options struct {
	// Keychain finds credentials for a registry (default
	// authn.DefaultKeychain: the docker config, ~/.docker/config.json or
	// $DOCKER_CONFIG, and its credential helpers).
	Keychain authn.Keychain
	// Transport, when set, replaces the default HTTP transport.
	Transport http.RoundTripper
}

func (o Options) remote(ctx context.Context) []remote.Option {
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)}
	if o.Transport != nil {
		opts = append(opts, remote.WithTransport(o.Transport))
	}
	return opts
}

// Pushed is an image Push or PushAgent wrote.
type Pushed struct {
	// Tag is the reference pushed to, as parsed (e.g.
	// "registry.example/withruntime-template-base:latest").
	Tag string
	// Digest is the image manifest's digest ("sha256:…").
	Digest string
	// Ref is the image pinned by digest (repository@digest): what pods
	// should name so that a later push to Tag changes nothing of them.
	Ref string
}

// ParseTag parses where to push: a tag reference (a missing tag is
// "latest"). A digest reference is refused (a digest names an image already
// pushed, not a place to push to).
func ParseTag(ref string) (name.Tag, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return name.Tag{}, fmt.Errorf("image reference %q: %w (want e.g. registry.example:5000/withruntime-template-base:latest)", ref, err)
	}
	t, ok := r.(name.Tag)
	if !ok {
		return name.Tag{}, fmt.Errorf("image reference %q is a digest: push to a tag (e.g. %s:latest); the digest pushed is printed", ref, r.Context())
	}
	return t, nil
}

// Push writes the built template name of store to the registry at ref (a
// tag; see ParseTag): one layer, its root filesystem (writeTar: owners,
// modes, symlinks, hard links and file capabilities kept, devices left
// out), and a linux/amd64 config whose Env is the template's (a default
// PATH when it sets none), WorkingDir Workdir, User User, and labels
// LabelTemplate and LabelInfo. The same template gives the same digest.
//
// Errors: the template's (wrapping template.ErrNotFound for a missing
// one), a bad reference, or the registry's (refused credentials, no
// space, unreachable), each saying which. The manifest is written last, so
// on error the tag is not moved: nothing half-pushed is ever named by it.
func Push(ctx context.Context, store *template.Store, tname, ref string, opts Options) (Pushed, error) {
	info, err := store.Get(tname)
	if err != nil {
		return Pushed{}, err
	}
	root, err := store.RootFS(tname)
	if err != nil {
		return Pushed{}, err
	}
	tag, err := ParseTag(ref)
	if err != nil {
		return Pushed{}, err
	}
	// The root must be readable throughout (root-owned files of 0600).
	if err := checkReadable(root); err != nil {
		return Pushed{}, err
	}
	layer, err := DirLayer(root, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return Pushed{}, fmt.Errorf("template %q: layer: %w", tname, err)
	}
	cfg, err := configFor(info)
	if err != nil {
		return Pushed{}, err
	}
	img, err := ociImage(layer, cfg)
	if err != nil {
		return Pushed{}, fmt.Errorf("template %q: %w", tname, err)
	}
	return write(ctx, tag, img, opts)
}

// PushAgent writes the static agent binary at agent to the registry at ref:
// an image holding it alone, at AgentPath (mode 0755, owned by root), the
// image whose name `serve --driver kubernetes --kubernetes-agent-image`
// takes. A binary that is not a static linux/amd64 executable is refused
// (the init container runs it in the agent's image, which has nothing else,
// and then in the template's image).
func PushAgent(ctx context.Context, agent, ref string, opts Options) (Pushed, error) {
	tag, err := ParseTag(ref)
	if err != nil {
		return Pushed{}, err
	}
	bin, err := os.ReadFile(agent)
	if err != nil {
		return Pushed{}, fmt.Errorf("agent: %w", err)
	}
	if err := checkStatic(bin); err != nil {
		return Pushed{}, fmt.Errorf("agent %s: %w (build it with CGO_ENABLED=0 go build ./cmd/withruntime-agent)", agent, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: AgentPath[1:], Mode: 0o755, Size: int64(len(bin)),
		ModTime: epoch.Time, Format: tar.FormatPAX}); err != nil {
		return Pushed{}, err
	}
	if _, err := tw.Write(bin); err != nil {
		return Pushed{}, err
	}
	if err := tw.Close(); err != nil {
		return Pushed{}, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return Pushed{}, err
	}
	img, err := ociImage(layer, v1.Config{Entrypoint: []string{AgentPath}, Labels: map[string]string{LabelAgent: "1"}})
	if err != nil {
		return Pushed{}, err
	}
	return write(ctx, tag, img, opts)
}

// ociImage is an OCI image of layer alone with config cfg, linux/amd64,
// created at epoch.
func ociImage(layer v1.Layer, cfg v1.Config) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created, cf.Config = "linux", "amd64", epoch, cfg
	return mutate.ConfigFile(img, cf)
}

// write pushes img to tag and says what it pushed.
func write(ctx context.Context, tag name.Tag, img v1.Image, opts Options) (Pushed, error) {
	digest, err := img.Digest()
	if err != nil {
		return Pushed{}, fmt.Errorf("image: %w", err)
	}
	if err := remote.Write(tag, img, opts.remote(ctx)...); err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return Pushed{}, fmt.Errorf("push %s: %w (nothing was tagged)", tag, err)
	}
	return Pushed{Tag: tag.Name(), Digest: digest.String(), Ref: tag.Context().Digest(digest.String()).String()}, nil
}

// checkReadable fails early, before any upload, when this process cannot
// read the root (a template's files are root's: push as root).
func checkReadable(root string) error {
	for _, p := range []string{root, root + "/etc/shadow"} {
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("template root filesystem: %w (push as root: its files are root's)", err)
		}
		f.Close()
	}
	return nil
}

// checkStatic refuses what is not a statically linked x86-64 ELF
// executable.
func checkStatic(bin []byte) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("not an ELF executable: %w", err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 || f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("not an x86-64 executable (%v, %v)", f.Machine, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked: the agent's image has no libc")
		}
	}
	return nil
}
