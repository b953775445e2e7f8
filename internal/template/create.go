package template

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/errs"
)

// Origin says where a template that no recipe built came from. It is kept
// in template.json (Info.Origin).
type Origin struct {
	// Image is the image reference as given: a registry reference, an
	// oci-layout:DIR, or a tarball's name.
	Image string `json:"image"`
	// Digest is the image manifest's digest ("sha256:…").
	Digest string `json:"digest,omitempty"`
	// Env is the image config's environment ("KEY=value"), which sandboxes
	// of the template start with (a create's own env wins).
	Env []string `json:"env,omitempty"`
	// WorkingDir is the image config's working directory. Recorded only:
	// commands start in /workspace, as in every template.
	WorkingDir string `json:"workingDir,omitempty"`
	// Shell is what "command" runs with: "/bin/bash", "/bin/sh", or "" when
	// the image has no shell (then only argv commands work).
	Shell string `json:"shell"`
}

// Fill writes a new template's root filesystem into rootfs, an empty
// directory that already exists. step reports a step beginning and returns
// the func that reports it done. It returns the Origin to record.
type Fill func(ctx context.Context, rootfs string, step func(name string) (done func())) (*Origin, error)

// CreateOption changes what Create records.
type CreateOption func(*Info)

// OwnedBy makes the new template private to the API key keyID (Info.Owner);
// "" leaves it shared.
func OwnedBy(keyID string) CreateOption { return func(i *Info) { i.Owner = keyID } }

// Create makes the new template name with fill, with the same guarantees as
// a recipe build: it is written in a temporary directory of the store and
// appears under its name complete or not at all, and a failed or cancelled
// fill leaves nothing behind. It never replaces a template: a name that is
// taken, or that a built-in recipe builds, is errs.Conflict; an invalid name
// is errs.Invalid. opts set what it records beside the fill's Origin (the
// owner: OwnedBy; the start: WithStart).
func (s *Store) Create(ctx context.Context, name string, fill Fill, progress func(Progress), opts ...CreateOption) (info Info, err error) {
	if err := s.CheckNew(name); err != nil {
		return Info{}, err
	}
	tr := newTracker(progress)
	unlock, err := s.lock(ctx, name, tr)
	if err != nil {
		return Info{}, err
	}
	defer unlock()
	if err := s.CheckNew(name); err != nil {
		return Info{}, err
	}
	defer func() {
		if err != nil {
			if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				err = fmt.Errorf("%w (%v)", ctx.Err(), err)
			}
			err = fmt.Errorf("template %q: %w", name, err)
		}
	}()
	dir, err := filepath.Abs(s.Dir)
	if err != nil {
		return Info{}, err
	}
	if err := removeStale(dir, name); err != nil {
		return Info{}, err
	}
	tmp := filepath.Join(dir, buildPrefix+name+"-"+randomSuffix())
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return Info{}, err
	}
	installed := false
	defer func() {
		if !installed {
			if rerr := removeAll(tmp); rerr != nil && err != nil {
				err = fmt.Errorf("%w; also failed to clean up %s: %v", err, tmp, rerr)
			}
		}
	}()
	rootfs := filepath.Join(tmp, rootfsDir)
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return Info{}, err
	}
	origin, err := fill(ctx, rootfs, tr.begin)
	if err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	done := tr.begin("finalizing")
	size, err := diskUsage(rootfs)
	if err != nil {
		return Info{}, fmt.Errorf("measure rootfs: %w", err)
	}
	info = Info{Name: name, CreatedAt: time.Now().UTC().Truncate(time.Millisecond), SizeBytes: size,
		Packages: []string{}, Origin: origin}
	for _, o := range opts {
		o(&info)
	}
	if err := writeInfo(filepath.Join(tmp, infoFile), info); err != nil {
		return Info{}, err
	}
	if err := syncFS(tmp); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, filepath.Join(dir, name), unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EEXIST) {
		return Info{}, errs.New(errs.Conflict, "template %q already exists; delete it first or pick another name", name)
	}
	if err != nil {
		return Info{}, fmt.Errorf("install: %w", err)
	}
	installed = true
	done()
	return info, nil
}

// CheckNew returns nil when name is free for Create: errs.Invalid for an
// invalid name, errs.Conflict for a built template or a recipe's name.
func (s *Store) CheckNew(name string) error {
	if err := ValidName(name); err != nil {
		return errs.New(errs.Invalid, "%v", err)
	}
	if _, ok := builtinRecipes[name]; ok {
		return errs.New(errs.Conflict, "template name %q is reserved for the built-in recipe (`withruntime template build %s`); pick another name", name, name)
	}
	if _, err := os.Lstat(filepath.Join(s.Dir, name)); err == nil {
		return errs.New(errs.Conflict, "template %q already exists; delete it first or pick another name", name)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("template %q: %w", name, err)
	}
	return nil
}

// Delete removes the template name. With the build lock of name held (so no
// build or create of it runs meanwhile), it calls inUse, which refuses the
// deletion by returning an error (e.g. errs.Conflict while sandboxes run
// from it); then the template disappears from its name at once (a rename)
// and its files are removed. A missing template is errs.NotFound.
func (s *Store) Delete(ctx context.Context, name string, inUse func() error) error {
	if err := ValidName(name); err != nil {
		return errs.New(errs.Invalid, "%v", err)
	}
	if _, err := s.Get(name); errors.Is(err, ErrNotFound) {
		return errs.New(errs.NotFound, "no template %q; list them with GET /v1/templates", name)
	}
	unlock, err := s.lock(ctx, name, newTracker(nil))
	if err != nil {
		return err
	}
	defer unlock()
	dir, err := filepath.Abs(s.Dir)
	if err != nil {
		return err
	}
	final := filepath.Join(dir, name)
	if _, err := os.Lstat(final); errors.Is(err, os.ErrNotExist) {
		return errs.New(errs.NotFound, "no template %q; list them with GET /v1/templates", name)
	}
	if inUse != nil {
		if err := inUse(); err != nil {
			return err
		}
	}
	old := filepath.Join(dir, oldPrefix+name+"-"+randomSuffix())
	if err := os.Rename(final, old); err != nil {
		return fmt.Errorf("delete template %q: %w", name, err)
	}
	if err := removeAll(old); err != nil {
		return fmt.Errorf("template %q deleted, but its files could not all be removed (%s): %w", name, old, err)
	}
	return nil
}

// Env returns the environment sandboxes of template name start with: its
// image's Env for a template made from an image, nil otherwise.
func (s *Store) Env(name string) ([]string, error) {
	info, err := s.Get(name)
	if err != nil || info.Origin == nil {
		return nil, err
	}
	return info.Origin.Env, nil
}
