// Package image makes templates from container images: an image in an OCI
// registry, an OCI layout directory or a `docker save` tarball (see
// ParseSource), linux/amd64 only.
//
// The image's layers are flattened into the new template's root filesystem
// by a Flattener, which treats every layer as hostile, and the result is
// made bootable (MakeBootable): the sandbox user, /workspace and the mount
// points the driver needs. The template is written through
// template.Store.Create, so it appears complete or not at all.
package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/template"
	"withruntime.dev/runtime/internal/template/rootfs"
)

// Options configure an import.
type Options struct {
	// Limits cap what the layers may write (default 8 GiB of content).
	Limits Limits
	// Fetch says how to reach registries.
	Fetch FetchOptions
}

// Import makes the template name from the image src names. The name is
// checked first (errs.Invalid, errs.Conflict), then the image is resolved
// (errs.NotFound for a missing image, errs.Invalid for a wrong platform or a
// broken one), then its layers are pulled and flattened one by one (a
// refused layer is a *LayerError: errs.Invalid or errs.TooLarge). Nothing is
// left behind on error. progress, if not nil, gets the steps; create says
// what the template records beside its origin (template.OwnedBy).
func Import(ctx context.Context, store *template.Store, name string, src Source, opts Options, progress func(template.Progress), create ...template.CreateOption) (template.Info, error) {
	if err := store.CheckNew(name); err != nil {
		return template.Info{}, err
	}
	start := time.Now()
	done := step(progress, start, "resolving "+src.Ref)
	img, err := src.Open(ctx, opts.Fetch)
	if err != nil {
		return template.Info{}, err
	}
	done()
	if progress != nil {
		// Create's steps count from when it starts; show them from ours.
		offset, inner := time.Since(start), progress
		progress = func(p template.Progress) {
			p.Elapsed += offset
			inner(p)
		}
	}
	return FromImage(ctx, store, name, img, src, opts, progress, create...)
}

// FromImage makes the template name from img, an image already opened
// (e.g. with OpenArchive); src is recorded as its origin, and create set
// the rest of its record (template.OwnedBy, template.WithStart). Errors as
// Import's.
func FromImage(ctx context.Context, store *template.Store, name string, img v1.Image, src Source, opts Options, progress func(template.Progress), create ...template.CreateOption) (template.Info, error) {
	fill := func(ctx context.Context, dir string, step func(string) func()) (*template.Origin, error) {
		digest, err := img.Digest()
		if err != nil {
			return nil, errs.New(errs.Invalid, "image %s: %v", src.Ref, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, errs.New(errs.Invalid, "image %s: unreadable config: %v", src.Ref, err)
		}
		if n := envBytes(cf.Config.Env); n > maxEnvBytes {
			return nil, errs.New(errs.Invalid, "image %s: its Env is %d bytes; at most %d are passed to sandboxes", src.Ref, n, maxEnvBytes)
		}
		layers, err := img.Layers()
		if err != nil {
			return nil, registryError(ctx, src.Ref, err)
		}
		root, err := rootfs.Open(dir)
		if err != nil {
			return nil, err
		}
		defer root.Close()
		fl := NewFlattener(root, opts.Limits)
		for i, l := range layers {
			if err := applyLayer(ctx, fl, l, i, len(layers), src, step); err != nil {
				return nil, err
			}
		}
		done := step("making it bootable (user, /workspace, mount points)")
		shell, err := MakeBootable(root)
		if err != nil {
			return nil, errs.New(errs.Invalid, "image %s cannot be booted: %v", src.Ref, err)
		}
		done()
		return &template.Origin{Image: src.Ref, Digest: digest.String(), Env: cf.Config.Env,
			WorkingDir: cf.Config.WorkingDir, Shell: shell}, nil
	}
	return store.Create(ctx, name, fill, progress, create...)
}

func applyLayer(ctx context.Context, fl *Flattener, l v1.Layer, i, n int, src Source, step func(string) func()) error {
	label := fmt.Sprintf("layer %d/%d", i+1, n)
	if d, err := l.Digest(); err == nil {
		label += " (" + shortDigest(d) + ")"
	}
	what := "extracting "
	if src.Kind == Registry {
		what = "pulling and extracting "
	}
	size := ""
	if sz, err := l.Size(); err == nil {
		size = fmt.Sprintf(", %s compressed", humanBytes(sz))
	}
	done := step(what + label + size)
	rc, err := l.Uncompressed()
	if err != nil {
		return registryError(ctx, src.Ref, err)
	}
	defer rc.Close()
	er := &errReader{ctx: ctx, r: rc}
	if err := fl.Apply(er, label); err != nil {
		if er.err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return registryError(ctx, src.Ref, fmt.Errorf("reading %s: %w", label, er.err))
		}
		return fmt.Errorf("image %s: %w", src.Ref, err)
	}
	done()
	return nil
}

// maxEnvBytes caps an image's Env: every command of its sandboxes gets it.
const maxEnvBytes = 256 << 10

func envBytes(env []string) int {
	n := 0
	for _, kv := range env {
		n += len(kv) + 1
	}
	return n
}

func shortDigest(d v1.Hash) string {
	if len(d.Hex) > 12 {
		return d.Algorithm + ":" + d.Hex[:12]
	}
	return d.String()
}

// errReader remembers why a layer stream failed (network, decompression,
// cancellation), to tell that from a malformed tar.
type errReader struct {
	ctx context.Context
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	if err := e.ctx.Err(); err != nil {
		e.err = err
		return 0, err
	}
	n, err := e.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		e.err = err
	}
	return n, err
}

func step(progress func(template.Progress), start time.Time, name string) func() {
	if progress == nil {
		return func() {}
	}
	progress(template.Progress{Step: name, Elapsed: time.Since(start)})
	return func() { progress(template.Progress{Step: name, Elapsed: time.Since(start), Done: true}) }
}
