package gvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/driver"
)

var _ driver.Snapshotter = (*Driver)(nil)

// Snapshots are pause's checkpoint (pause.go) taken with the sandbox left
// running, kept under the driver's state directory instead of the
// sandbox's, and restored as new sandboxes:
//
//   - `runsc checkpoint --leave-running` writes the image into
//     snapshots/.new-<id> (a fresh directory); with the agent's note of
//     how it was taken (snapshot.json) and a hard link of the agent binary
//     that runs in it, the directory is renamed to snapshots/<id> in one
//     step. Nothing inside any sandbox can name or write that directory.
//     The source's agent listens again once the save is over; requests to
//     it in flight at the save end (their host connections close).
//   - A restore is a create (driver.boot) whose last step is `runsc
//     restore --detach --background` of the image instead of `runsc run`:
//     the new sandbox has its own id, directory, cgroup (the spec's
//     limits), socket and host directories (the agent binary linked from
//     the snapshot, so a server upgraded since runs the image's agent
//     against its own file), and network namespace. The runsc flags are
//     the source's (a restore must match how the image was booted), with
//     the writable layer's file in the new sandbox's directory.
//   - What a restore reads is checked first, so a snapshot that cannot
//     come back is refused before anything starts (driver.ErrNotRestorable):
//     the template directory must be the very one the source ran on (its
//     device and inode: a rebuilt template is a new directory), runsc the
//     same version, and the network present exactly when it was.
//   - --background reads the memory after the command returns, from files
//     it opened: deleting a snapshot while a sandbox restored from it is
//     still loading is safe.

const (
	snapshotsDir      = "snapshots"
	snapshotNewPrefix = ".new-"
	snapshotMetaFile  = "snapshot.json"
)

// snapshotMeta is what a restore needs besides the image (snapshot.json).
type snapshotMeta struct {
	ID string `json:"id"`
	// Mode is "" for a full snapshot, modeFiles for a files-only one
	// (snapfiles.go: then only Source, RootFS and Runsc are set).
	Mode string `json:"mode,omitempty"`
	// Source is the sandbox the snapshot was taken of.
	Source string `json:"source"`
	// Flags are the runsc flags the source was booted with.
	Flags []string `json:"flags"`
	// RootFS is the source's template root, and RootDev, RootIno its
	// directory's identity when the snapshot was taken.
	RootFS  string `json:"rootfs"`
	RootDev uint64 `json:"rootDev"`
	RootIno uint64 `json:"rootIno"`
	// Runsc is the version of runsc that wrote the image.
	Runsc string `json:"runsc"`
	// Process and Mounts are the source's, from its bundle: a restore
	// must ask for the same (runsc compares them with the image's).
	Process *specs.Process `json:"process"`
	Mounts  []specs.Mount  `json:"mounts"`
	// Annotations are the source bundle's, which runsc also compares: a
	// sandbox booted from a files-only snapshot names its layer's archive
	// there (snapfiles.go), read only at that boot.
	Annotations map[string]string `json:"annotations,omitempty"`
}

func (d *Driver) snapshotsRoot() string { return filepath.Join(d.cfg.StateDir, snapshotsDir) }

func (d *Driver) snapshotDir(id string) string { return filepath.Join(d.snapshotsRoot(), id) }

// commitSnapshot writes meta's note into tmp, a snapshot's directory being
// written under root, and renames it into place as snapshot meta.ID, each
// step synced; on an error nothing of it is in place (tmp is the caller's
// to remove).
func (d *Driver) commitSnapshot(root, tmp string, meta snapshotMeta) error {
	data, _ := json.Marshal(meta)
	if err := os.WriteFile(filepath.Join(tmp, snapshotMetaFile), data, 0o600); err != nil {
		return err
	}
	if err := syncDir(tmp); err != nil {
		return err
	}
	final := d.snapshotDir(meta.ID)
	if err := os.RemoveAll(final); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	if err := syncDir(root); err != nil {
		_ = os.RemoveAll(final)
		return err
	}
	return nil
}

// validSnapshotID reports whether id may name a snapshot directory.
func validSnapshotID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// Snapshot implements driver.Snapshotter.
func (d *Driver) Snapshot(ctx context.Context, id string, raw []byte, snapID string) (driver.Image, error) {
	if !validSnapshotID(snapID) {
		return driver.Image{}, fmt.Errorf("gvisor snapshot %s: invalid snapshot id %q", id, snapID)
	}
	st, err := pausable(raw)
	if err != nil {
		return driver.Image{}, fmt.Errorf("gvisor snapshot %s: %w", id, err)
	}
	if _, busy := d.snapshotting.LoadOrStore(snapID, true); busy {
		return driver.Image{}, fmt.Errorf("gvisor snapshot %s: snapshot %s is already being written", id, snapID)
	}
	defer d.snapshotting.Delete(snapID)
	dir := d.sandboxDir(id)
	root := d.snapshotsRoot()
	tmp := filepath.Join(root, snapshotNewPrefix+snapID)
	if err := freshDir(root, tmp); err != nil {
		return driver.Image{}, fmt.Errorf("gvisor snapshot %s: %w", id, err)
	}
	fail := func(err error) (driver.Image, error) {
		_ = os.RemoveAll(tmp)
		return driver.Image{}, fmt.Errorf("gvisor snapshot %s: %w", id, err)
	}
	meta := snapshotMeta{ID: snapID, Source: id, Flags: st.Flags, Runsc: d.runscVersion(ctx)}
	src, err := readBundle(dir)
	if err != nil {
		return fail(err)
	}
	meta.RootFS, meta.Process, meta.Mounts, meta.Annotations = src.Root.Path, src.Process, src.Mounts, src.Annotations
	if meta.RootDev, meta.RootIno, err = dirIdentity(meta.RootFS); err != nil {
		return fail(fmt.Errorf("the sandbox's template: %w", err))
	}
	// The agent that runs in the sandbox (its host directory's link), kept
	// with the image.
	if err := linkOrCopy(filepath.Join(dir, hostDirName, agentName), filepath.Join(tmp, agentName)); err != nil {
		return fail(fmt.Errorf("%w: the sandbox was created by an older version of the server (no host directory): %v", driver.ErrNotSavable, err))
	}
	// The CA bundle its /etc links to, if it has one (public certificates:
	// the template's roots and the Runtime CA), for restores that have none
	// of their own (restoreNetwork).
	bundle := filepath.Join(dir, hostDirName, hostEtcDir, caBundleFile)
	if _, err := os.Lstat(bundle); err == nil {
		if err := linkOrCopy(bundle, filepath.Join(tmp, caBundleFile)); err != nil {
			return fail(err)
		}
	}
	if err := checkSpace(tmp, d.imageNeed(ctx, id)); err != nil {
		return fail(err)
	}
	sockDir := filepath.Join(dir, "sock")
	if name, err := boundSocket(sockDir); err != nil || name != "" {
		if err == nil {
			err = fmt.Errorf("%w: something in the sandbox made the socket %s in %s, and a socket bound on the host cannot be saved; remove it (and stop what listens on it) and try again",
				driver.ErrNotSavable, name, socketDirInSandbox)
		}
		return fail(err)
	}
	agent := newAgentDialer(id, sockDir)
	if err := prepareCheckpoint(ctx, agent); err != nil {
		_ = waitReady(context.WithoutCancel(ctx), agent, agentRelisten)
		return fail(fmt.Errorf("the agent did not prepare for the checkpoint: %w", err))
	}
	ckCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkpointTimeout)
	defer cancel()
	_, ckErr := d.runsc(ckCtx, nil, "checkpoint", "--leave-running", "--image-path", tmp, id)
	// Saved or not, the sandbox runs on and its agent listens again.
	if err := waitReady(context.WithoutCancel(ctx), agent, agentRelisten); err != nil {
		if ckErr == nil {
			ckErr = fmt.Errorf("the sandbox's agent did not answer after the save: %w", err)
		} else {
			ckErr = fmt.Errorf("%w; and the agent did not answer after it: %v", ckErr, err)
		}
	}
	if ckErr != nil {
		if cerr := checkSpace(tmp, 0); cerr != nil {
			ckErr = fmt.Errorf("%w (%w)", cerr, ckErr)
		}
		return fail(ckErr)
	}
	size, err := imageBytes(tmp)
	if err != nil {
		return fail(err)
	}
	if err := d.commitSnapshot(root, tmp, meta); err != nil {
		return fail(err)
	}
	return driver.Image{Bytes: size}, nil
}

// Restore implements driver.Snapshotter.
func (d *Driver) Restore(ctx context.Context, spec driver.Spec, snapID string) (*driver.Handle, error) {
	meta, err := d.readSnapshot(snapID)
	if err != nil {
		return nil, fmt.Errorf("gvisor restore %s: %w", spec.ID, err)
	}
	if err := d.restorable(ctx, meta, spec); err != nil {
		return nil, fmt.Errorf("gvisor restore %s from %s: %w", spec.ID, snapID, err)
	}
	return d.boot(ctx, spec, &meta)
}

// restoreNetwork is the network of a sandbox restored from snapshot snapID
// in network n: n, with the source's CA bundle when n brings none and the
// source had one. The programs in the image may have linked
// /etc/ssl/certs/ca-certificates.crt to the host directory's bundle (the
// agent does at boot for a sandbox with secrets); without a file there,
// every TLS client inside would fail.
func (d *Driver) restoreNetwork(snapID string, n *driver.Network) (*driver.Network, error) {
	if n == nil || len(n.CABundle) > 0 {
		return n, nil
	}
	data, err := os.ReadFile(filepath.Join(d.snapshotDir(snapID), caBundleFile))
	if errors.Is(err, fs.ErrNotExist) {
		return n, nil
	}
	if err != nil {
		return nil, err
	}
	withCA := *n
	withCA.CABundle = data
	return &withCA, nil
}

// readSnapshot reads snapshot snapID's note; driver.ErrNotFound when it
// has none.
func (d *Driver) readSnapshot(snapID string) (snapshotMeta, error) {
	var meta snapshotMeta
	if !validSnapshotID(snapID) {
		return meta, fmt.Errorf("invalid snapshot id %q: %w", snapID, driver.ErrNotFound)
	}
	data, err := os.ReadFile(filepath.Join(d.snapshotDir(snapID), snapshotMetaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return meta, fmt.Errorf("no snapshot image %s: %w", snapID, driver.ErrNotFound)
	}
	if err != nil {
		return meta, err
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return meta, fmt.Errorf("snapshot %s: bad note: %w", snapID, err)
	}
	if meta.ID != snapID || (meta.Mode != modeFiles && len(meta.Flags) == 0) {
		return meta, fmt.Errorf("snapshot %s: its note is not this snapshot's", snapID)
	}
	return meta, nil
}

// restorable says why snapshot meta cannot be restored as spec, or nil.
func (d *Driver) restorable(ctx context.Context, meta snapshotMeta, spec driver.Spec) error {
	if meta.Mode != "" {
		return fmt.Errorf("%w: it holds files alone (mode %q), no memory or processes to restore; boot a sandbox with its files instead", driver.ErrNotRestorable, meta.Mode)
	}
	if spec.RootFS != meta.RootFS {
		return fmt.Errorf("%w: it was taken of a sandbox of another template (root %s, not %s)", driver.ErrNotRestorable, meta.RootFS, spec.RootFS)
	}
	dev, ino, err := dirIdentity(spec.RootFS)
	if err != nil || dev != meta.RootDev || ino != meta.RootIno {
		return fmt.Errorf("%w: its template was rebuilt or deleted since the snapshot was taken, and the programs saved in it need the files they ran on", driver.ErrNotRestorable)
	}
	if v := d.runscVersion(ctx); v != meta.Runsc {
		return fmt.Errorf("%w: it was written by runsc %q and this server runs %q", driver.ErrNotRestorable, meta.Runsc, v)
	}
	if !slices.Contains(meta.Flags, networkFlag(spec.Network)) {
		return fmt.Errorf("%w: its sandbox had %s and the new one would have %s; a snapshot restores only with the same kind of network (a server with or without egress)",
			driver.ErrNotRestorable, flagWith(meta.Flags, "--network="), networkFlag(spec.Network))
	}
	return nil
}

// restoreFlags are the runsc flags of a sandbox in dir restored from
// snapshot meta: the source's, with the writable layer's file in dir. The
// disk keeps the source's size (the image holds it: a larger size asked at
// the restore is not seen inside).
func restoreFlags(meta *snapshotMeta, dir string) ([]string, error) {
	flags := make([]string, 0, len(meta.Flags))
	found := false
	for _, f := range meta.Flags {
		if rest, ok := strings.CutPrefix(f, overlayPrefix); ok {
			medium, size, ok := strings.Cut(rest, ",size=")
			if !ok {
				return nil, fmt.Errorf("snapshot %s: its sandbox's flag %q has no size", meta.ID, f)
			}
			if strings.HasPrefix(medium, "dir=") {
				medium = "dir=" + dir
			}
			f, found = overlayPrefix+medium+",size="+size, true
		}
		flags = append(flags, f)
	}
	if !found {
		return nil, fmt.Errorf("snapshot %s: its sandbox's flags have no %s", meta.ID, overlayPrefix)
	}
	return flags, nil
}

// DeleteSnapshot implements driver.Snapshotter.
func (d *Driver) DeleteSnapshot(_ context.Context, snapID string) error {
	if !validSnapshotID(snapID) {
		return fmt.Errorf("gvisor delete snapshot: invalid id %q", snapID)
	}
	if err := os.RemoveAll(d.snapshotDir(snapID)); err != nil {
		return fmt.Errorf("gvisor delete snapshot %s: %w", snapID, err)
	}
	return nil
}

// ListSnapshots implements driver.Snapshotter.
func (d *Driver) ListSnapshots(_ context.Context) ([]string, error) {
	entries, err := os.ReadDir(d.snapshotsRoot())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("gvisor list snapshots: %w", err)
	}
	var ids []string
	for _, e := range entries {
		name := e.Name()
		if tmp, ok := strings.CutPrefix(name, snapshotNewPrefix); ok {
			if _, busy := d.snapshotting.Load(tmp); !busy {
				_ = os.RemoveAll(filepath.Join(d.snapshotsRoot(), name))
			}
			continue
		}
		if validSnapshotID(name) {
			ids = append(ids, name)
		}
	}
	return ids, nil
}

// runscVersion is the first line of `runsc --version` ("" when it fails),
// asked once.
func (d *Driver) runscVersion(ctx context.Context) string {
	d.versionOnce.Do(func() {
		out, err := d.runsc(ctx, nil, "--version")
		if err == nil {
			d.version, _, _ = strings.Cut(string(out), "\n")
		}
	})
	return d.version
}

// readBundle reads the OCI spec in the bundle of the sandbox in dir
// (written by the host; nothing inside can change it).
func readBundle(dir string) (*specs.Spec, error) {
	data, err := os.ReadFile(filepath.Join(dir, "bundle", "config.json"))
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	var s specs.Spec
	if err := json.Unmarshal(data, &s); err != nil || s.Root == nil || s.Process == nil {
		return nil, fmt.Errorf("bundle: no root or process (%v)", err)
	}
	return &s, nil
}

// restoreSpec turns oci, the spec of a new sandbox whose socket directory
// is sockDir, into the spec of its restore from snapshot meta: the
// source's process and mounts (the socket directory's mount from sockDir),
// the new sandbox's cgroup, limits and namespaces.
func restoreSpec(oci *specs.Spec, meta *snapshotMeta, sockDir string) error {
	if meta.Process == nil || len(meta.Mounts) == 0 {
		return fmt.Errorf("snapshot %s: its note has no process or mounts", meta.ID)
	}
	oci.Process = meta.Process
	oci.Mounts = slices.Clone(meta.Mounts)
	oci.Annotations = maps.Clone(meta.Annotations)
	found := false
	for i := range oci.Mounts {
		if oci.Mounts[i].Destination == socketDirInSandbox {
			oci.Mounts[i].Source, found = sockDir, true
		}
	}
	if !found {
		return fmt.Errorf("snapshot %s: its sandbox had no socket directory mount", meta.ID)
	}
	return nil
}

// dirIdentity is directory path's device and inode.
func dirIdentity(path string) (dev, ino uint64, err error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return 0, 0, fmt.Errorf("%s is not a directory", path)
	}
	return st.Dev, st.Ino, nil
}

// imageBytes is the disk space of the image files (*.img) in dir.
func imageBytes(dir string) (int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".img") {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return 0, err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().IsRegular() {
			n += st.Blocks * 512
		}
	}
	return n, nil
}

// flagWith is the first of flags that starts with prefix ("" if none).
func flagWith(flags []string, prefix string) string {
	for _, f := range flags {
		if strings.HasPrefix(f, prefix) {
			return f
		}
	}
	return ""
}
