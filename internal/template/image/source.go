package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"withruntime.dev/runtime/internal/errs"
)

// Kind is where an image comes from.
type Kind int

const (
	// Registry is an image in an OCI (or Docker) registry, by tag or digest.
	Registry Kind = iota
	// Layout is an OCI image layout directory (one with an oci-layout file).
	Layout
	// Archive is a `docker save` tarball.
	Archive
)

// LayoutPrefix and ArchivePrefix name a local source explicitly.
const (
	LayoutPrefix  = "oci-layout:"
	ArchivePrefix = "docker-archive:"
)

// Source is a parsed image reference. Make it with ParseSource.
type Source struct {
	Kind Kind
	// Ref is the reference as given.
	Ref string
	// Path is the local file or directory (Layout and Archive).
	Path string
	ref  name.Reference
}

// Local reports whether the source is a file or directory on this host.
func (s Source) Local() bool { return s.Kind != Registry }

// ParseSource parses an image reference:
//
//   - "oci-layout:PATH": the OCI image layout directory PATH;
//   - "docker-archive:PATH": the `docker save` tarball PATH;
//   - a path starting with "/", "./" or "../", or ending in ".tar": a
//     directory is read as an OCI layout, a file as a `docker save` tarball;
//   - anything else: a registry reference, "[HOST[:PORT]/]REPO[:TAG|@DIGEST]".
//
// Errors wrap errs.Invalid.
func ParseSource(ref string) (Source, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return Source{}, errs.New(errs.Invalid, "no image given: name a registry image (e.g. registry.example:5000/team/app:1.2), an OCI layout (oci-layout:DIR) or a `docker save` tarball (FILE.tar)")
	}
	if p, ok := strings.CutPrefix(ref, LayoutPrefix); ok {
		return localSource(ref, p, Layout)
	}
	if p, ok := strings.CutPrefix(ref, ArchivePrefix); ok {
		return localSource(ref, p, Archive)
	}
	if IsLocal(ref) {
		st, err := os.Stat(ref)
		if err != nil {
			return Source{}, errs.New(errs.NotFound, "image %s: %v", ref, err)
		}
		if st.IsDir() {
			return localSource(ref, ref, Layout)
		}
		return localSource(ref, ref, Archive)
	}
	r, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		return Source{}, errs.New(errs.Invalid, "image %q is not a valid reference (%v); write [HOST[:PORT]/]REPO[:TAG] or REPO@sha256:DIGEST, or a path (oci-layout:DIR, FILE.tar)", ref, err)
	}
	return Source{Kind: Registry, Ref: ref, ref: r}, nil
}

// IsLocal reports whether ref names a file or directory (see ParseSource)
// rather than a registry image, from its text alone.
func IsLocal(ref string) bool {
	ref = strings.TrimSpace(ref)
	for _, p := range []string{LayoutPrefix, ArchivePrefix, "/", "./", "../"} {
		if strings.HasPrefix(ref, p) {
			return true
		}
	}
	return strings.HasSuffix(ref, ".tar")
}

func localSource(ref, p string, k Kind) (Source, error) {
	if p == "" {
		return Source{}, errs.New(errs.Invalid, "image %q names no path", ref)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return Source{}, errs.New(errs.Invalid, "image %q: %v", ref, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return Source{}, errs.New(errs.NotFound, "image %s: %v", ref, err)
	}
	switch {
	case k == Layout && !st.IsDir():
		return Source{}, errs.New(errs.Invalid, "image %s: %s is not a directory; an OCI layout is a directory with an oci-layout file", ref, abs)
	case k == Layout:
		if _, err := os.Stat(filepath.Join(abs, "oci-layout")); err != nil {
			return Source{}, errs.New(errs.Invalid, "image %s: %s has no oci-layout file, so it is not an OCI image layout (make one with `skopeo copy ... oci:DIR` or `crane pull --format=oci`)", ref, abs)
		}
	case !st.Mode().IsRegular():
		return Source{}, errs.New(errs.Invalid, "image %s: %s is not a regular file; give a `docker save` tarball", ref, abs)
	}
	return Source{Kind: k, Ref: ref, Path: abs}, nil
}

// FetchOptions say how to reach registries.
type FetchOptions struct {
	// Keychain gives registry credentials; nil: authn.DefaultKeychain (the
	// docker config of the user the server runs as: ~/.docker/config.json,
	// $DOCKER_CONFIG, credential helpers).
	Keychain authn.Keychain
	// Transport is the HTTP transport to registries; nil: remote's default.
	Transport http.RoundTripper
}

// Platform is the only platform Runtime runs.
var Platform = v1.Platform{OS: "linux", Architecture: "amd64"}

// Open returns the source's linux/amd64 image. Errors: errs.NotFound for an
// image or file that does not exist (or a registry that refuses access),
// errs.Invalid for a wrong architecture, an unreadable layout or tarball, or
// a registry that cannot be reached.
func (s Source) Open(ctx context.Context, opts FetchOptions) (v1.Image, error) {
	switch s.Kind {
	case Layout:
		idx, err := layout.ImageIndexFromPath(s.Path)
		if err != nil {
			return nil, errs.New(errs.Invalid, "image %s: not a readable OCI layout: %v", s.Ref, err)
		}
		img, err := pickImage(idx, s.Ref)
		if err != nil {
			return nil, err
		}
		return img, checkPlatform(img, s.Ref)
	case Archive:
		return OpenArchive(func() (io.ReadCloser, error) { return os.Open(s.Path) }, s.Ref)
	}
	kc := opts.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	ro := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithUserAgent("withruntime")}
	if opts.Transport != nil {
		ro = append(ro, remote.WithTransport(opts.Transport))
	}
	desc, err := remote.Get(s.ref, ro...)
	if err != nil {
		return nil, registryError(ctx, s.Ref, err)
	}
	var img v1.Image
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, registryError(ctx, s.Ref, err)
		}
		if img, err = pickImage(idx, s.Ref); err != nil {
			return nil, err
		}
	} else if img, err = desc.Image(); err != nil {
		return nil, registryError(ctx, s.Ref, err)
	}
	if err := checkPlatform(img, s.Ref); err != nil {
		return nil, registryError(ctx, s.Ref, err)
	}
	return img, nil
}

// OpenArchive reads a `docker save` tarball that open returns from the
// start each time it is called. ref names it in errors.
func OpenArchive(open func() (io.ReadCloser, error), ref string) (v1.Image, error) {
	img, err := tarball.Image(open, nil)
	if err != nil {
		return nil, errs.New(errs.Invalid, "image %s is not a usable `docker save` tarball: %v (an OCI archive must be unpacked into a directory and given as oci-layout:DIR)", ref, err)
	}
	if _, err := img.Manifest(); err != nil {
		return nil, errs.New(errs.Invalid, "image %s is not a usable `docker save` tarball: %v", ref, err)
	}
	return img, checkPlatform(img, ref)
}

// pickImage selects the linux/amd64 image of an index (recursing into
// nested indexes), or the single image of an index without platforms.
func pickImage(idx v1.ImageIndex, ref string) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, errs.New(errs.Invalid, "image %s: unreadable index: %v", ref, err)
	}
	var others []string
	var unlabelled []v1.Hash
	for _, d := range im.Manifests {
		switch {
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, errs.New(errs.Invalid, "image %s: %v", ref, err)
			}
			img, err := pickImage(child, ref)
			if err == nil {
				return img, nil
			}
			others = append(others, "(a nested index: "+err.Error()+")")
		case !d.MediaType.IsImage():
		case d.Platform == nil:
			unlabelled = append(unlabelled, d.Digest)
		case d.Platform.OS == Platform.OS && d.Platform.Architecture == Platform.Architecture:
			return idx.Image(d.Digest)
		case d.Platform.OS == "unknown":
			// buildx attestations
		default:
			others = append(others, d.Platform.String())
		}
	}
	if len(unlabelled) == 1 && len(others) == 0 {
		return idx.Image(unlabelled[0])
	}
	if len(others) > 0 {
		return nil, errs.New(errs.Invalid, "image %s has no %s variant (it has: %s); Runtime runs %s images only",
			ref, Platform.String(), strings.Join(others, ", "), Platform.String())
	}
	return nil, errs.New(errs.Invalid, "image %s: the index holds %d images without a platform; give one by digest", ref, len(unlabelled))
}

// checkPlatform refuses an image whose config is not for linux/amd64.
func checkPlatform(img v1.Image, ref string) error {
	cf, err := img.ConfigFile()
	if err != nil {
		return errs.New(errs.Invalid, "image %s: unreadable config: %v", ref, err)
	}
	if (cf.OS != "" && cf.OS != Platform.OS) || cf.Architecture != Platform.Architecture {
		return errs.New(errs.Invalid, "image %s is for %s/%s; Runtime runs %s images only (pull or build the amd64 variant, e.g. `docker build --platform linux/amd64`)",
			ref, cf.OS, cf.Architecture, Platform.String())
	}
	return nil
}

// registryError sorts a registry failure into a category with a message
// that names the reference.
func registryError(ctx context.Context, ref string, err error) error {
	var ce *errs.Error
	if errors.As(err, &ce) {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("image %s: %w", ref, ctx.Err())
	}
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusNotFound:
			return errs.New(errs.NotFound, "image %s was not found in its registry (%v); check the name and tag", ref, err)
		case http.StatusUnauthorized, http.StatusForbidden:
			return errs.New(errs.NotFound, "image %s: the registry refused access (%v); it does not exist or needs credentials (`docker login` as the user the server runs as)", ref, err)
		}
		for _, d := range te.Errors {
			switch d.Code {
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
				return errs.New(errs.NotFound, "image %s was not found in its registry (%v); check the name and tag", ref, err)
			}
		}
		return errs.New(errs.Invalid, "image %s: the registry answered %v", ref, err)
	}
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &ne) || errors.As(err, &oe) {
		return errs.New(errs.Invalid, "image %s: cannot reach its registry from the server: %v", ref, err)
	}
	return errs.New(errs.Invalid, "image %s: %v", ref, err)
}
