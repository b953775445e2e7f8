package gvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"withruntime.dev/runtime/internal/driver"
)

var _ driver.FilePauser = (*Driver)(nil)

// Filesystem-only pauses (driver.FilePauser). The sandbox's root layer is
// archived as a files-only snapshot's is (snapfiles.go: `runsc tar
// rootfs-upper` through a FIFO into copyLayer, which treats the archive as
// hostile and caps it at the disk size plus headers) into
// images/new/rootfs-upper.tar, renamed to images/current as a full pause's
// image is; then the sandbox is stopped (its processes end, its memory is
// freed: nothing of it runs while it is paused).
//
// Resume (pause.go) finds rootfs-upper.tar in images/current and boots the
// sandbox fresh from its own bundle with `runsc run`: the archive is
// hard-linked to <sandbox dir>/rootfs-upper.tar, which the bundle names in
// runsc's dev.gvisor.tar.rootfs.upper annotation (with
// --allow-rootfs-tar-annotation), so the new sentry builds the upper layer
// from it inside the sandbox and the host never unpacks it. The flags it
// was booted with stay, plus that one; the new state records them (a later
// full pause restores with the flags and annotations it booted with).

// PauseFiles implements driver.FilePauser.
func (d *Driver) PauseFiles(ctx context.Context, id string, raw []byte, commit func(driver.Image) error) error {
	st, err := pausable(raw)
	if err != nil {
		return fmt.Errorf("gvisor files pause %s: %w", id, err)
	}
	diskBytes, err := overlaySize(st.Flags)
	if err != nil {
		return fmt.Errorf("gvisor files pause %s: %w", id, err)
	}
	images := filepath.Join(d.sandboxDir(id), imagesDir)
	newDir := filepath.Join(images, imageNew)
	if err := freshDir(images, newDir); err != nil {
		return fmt.Errorf("gvisor files pause %s: %w", id, err)
	}
	fail := func(err error) error {
		_ = os.RemoveAll(images)
		return fmt.Errorf("gvisor files pause %s: %w", id, err)
	}
	need, err := d.upperBytes(id)
	if err != nil {
		need = diskBytes // a memory-backed layer: at most its size
	}
	if err := checkSpace(images, need); err != nil {
		return fail(err)
	}
	if err := d.tarLayer(ctx, id, filepath.Join(newDir, layerFile), diskBytes+layerHeaderSlack); err != nil {
		if cerr := checkSpace(images, 0); cerr != nil {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return fail(err)
	}
	size, err := fileBlocks(filepath.Join(newDir, layerFile))
	if err != nil {
		return fail(err)
	}
	// The store says paused: the sandbox, processes and memory, goes.
	return d.installPause(ctx, id, images, newDir, size, commit, fail)
}

// filesImage reports whether the paused image in dir (images/current) is
// a filesystem-only one.
func filesImage(cur string) bool {
	fi, err := os.Lstat(filepath.Join(cur, layerFile))
	return err == nil && fi.Mode().IsRegular()
}

// resumeFiles boots paused sandbox id (state st) fresh with the root layer
// saved in cur, in network n, and calls commit once its agent answers. As
// Resume: on error nothing of it runs and the image is kept.
func (d *Driver) resumeFiles(ctx context.Context, id string, st state, cur string, n *driver.Network, commit func(*driver.Handle) error) (*driver.Handle, error) {
	dir := d.sandboxDir(id)
	fail := func(err error) (*driver.Handle, error) {
		_ = d.unload(context.WithoutCancel(ctx), id)
		return nil, fmt.Errorf("gvisor resume %s: %w", id, err)
	}
	if err := d.unload(ctx, id); err != nil {
		return fail(err)
	}
	if err := d.prepareRestore(dir, n); err != nil {
		return fail(err)
	}
	if _, err := d.mountVolumes(ctx, st.Volumes); err != nil {
		return fail(err)
	}
	// The archive the bundle names: a link of the image's (kept until the
	// store says running), replacing the one a files-booted sandbox had.
	layer := filepath.Join(dir, layerFile)
	tmp := layer + ".new"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(err)
	}
	if err := linkOrCopy(filepath.Join(cur, layerFile), tmp); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, layer); err != nil {
		return fail(err)
	}
	bundle := filepath.Join(dir, "bundle")
	if err := setAnnotation(filepath.Join(bundle, "config.json"), rootfsTarAnnotation, layer); err != nil {
		return fail(err)
	}
	flags := slices.Clone(st.Flags)
	if !slices.Contains(flags, rootfsTarFlag) {
		flags = append(flags, rootfsTarFlag)
	}
	pidFile := filepath.Join(dir, pidFileName)
	if err := os.Remove(pidFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(err)
	}
	startCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runTimeout)
	defer cancel()
	if err := d.start(startCtx, dir, flags, "run", "--detach", "--pid-file", pidFile, "--bundle", bundle, id); err != nil {
		return fail(err)
	}
	agent := newAgentDialer(id, filepath.Join(dir, "sock"))
	if err := waitReady(ctx, agent, d.cfg.ReadyTimeout); err != nil {
		return fail(fmt.Errorf("the agent did not start: %w", err))
	}
	if err := d.widenCPUSet(id); err != nil {
		return fail(err)
	}
	st.Flags = flags
	raw, err := json.Marshal(st)
	if err != nil {
		return fail(err)
	}
	h := &driver.Handle{ID: id, State: raw, Dial: agent.dial}
	if err := commit(h); err != nil {
		return fail(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, imagesDir)); err != nil {
		return h, fmt.Errorf("gvisor resume %s: removing the image: %w", id, err)
	}
	return h, nil
}

// setAnnotation sets annotation key to value in the bundle's config.
func setAnnotation(configPath, key, value string) error {
	data, err := os.ReadFile(configPath)
	if err != nil {
		return err
	}
	var s specs.Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	if s.Annotations[key] == value {
		return nil
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[key] = value
	out, err := json.Marshal(&s)
	if err != nil {
		return err
	}
	return os.WriteFile(configPath, out, 0o600)
}
