package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// Snapshots. A snapshot is a running sandbox saved whole — memory,
// processes, files — by the driver (driver.Snapshotter) while the sandbox
// runs on after a brief pause; any number of new sandboxes start from it
// (Create with CreateParams.Snapshot), each with its own id, lease,
// limits, network, secrets and metering. Fork is a snapshot and count
// creates from it.
//
//   - A snapshot belongs to the key that took it (store.Snapshot.KeyID). A
//     tenant key sees, uses and deletes only its own (another's answers as a
//     missing one: errs.NotFound); an administrator's key sees every key's.
//     A name resolves among the caller's own snapshots only.
//   - Its image counts in its key's disk quota (store.KeyUse.SnapshotBytes)
//     and is admitted like a pause image (quota.go) before anything is
//     written; metering bills it at the storage price under its own id
//     (snapmeter.go) from the moment it is ready until it is deleted.
//   - The record is inserted "creating" before the driver writes and says
//     "ready" once the image is complete; Recover removes a snapshot a
//     dead server left creating, and images no record knows.
//   - Requests to the source in flight when the save starts end (their
//     connections close: the command is killed, as when a client goes
//     away) with errs.Conflict; requests that arrive during the save wait
//     for it. Background processes run on.
//   - A create from a snapshot restores it instead of booting: its disk is
//     the source's (diskMiB, if given, must be the same), its memory at
//     least the source's (more is given to the agent's guard), its template
//     the source's. Programs already running keep the environment they
//     had; commands started afterwards get the source's environment with
//     the create's env (and its secrets' placeholders) on top.
//   - A files-only snapshot (mode SnapshotFilesystem, driver.FileSnapshotter)
//     saves the source's writable root layer alone — not its memory,
//     processes, /tmp, /dev/shm or volumes — without interrupting anything
//     (writes to its root wait while the layer is read). A create from it
//     boots fresh from the template, as the source's template is now, with
//     those files: no process runs but the agent, the create's env is the
//     environment, volumes may be mounted, memory and CPU are the create's
//     (the source's when 0), and its disk at least the source's. It is
//     billed, counted and kept as a full snapshot is.

// Snapshot modes.
const (
	// SnapshotFull saves memory, processes and files.
	SnapshotFull = "full"
	// SnapshotFilesystem saves the files of the root filesystem only.
	SnapshotFilesystem = "filesystem"
)

// MaxForkCount is the most sandboxes one fork makes.
const MaxForkCount = 32

// forkParallel is how many of a fork's sandboxes are restored at once.
const forkParallel = 4

// errSnapshotInFlight is the cause given to requests in flight at a
// snapshot's save.
var errSnapshotInFlight = errors.New("a snapshot of the sandbox was taken while the request ran")

var snapshotName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// SnapshotParams is what a snapshot is asked with.
type SnapshotParams struct {
	// KeyID is the key taking it, which will own it.
	KeyID string
	// Name, when set, names it among its key's snapshots (lower-case
	// letters, digits, '.', '_', '-'; at most 63; unique per key).
	Name string
	// Mode is SnapshotFull ("" means it) or SnapshotFilesystem.
	Mode string
}

// snapshotter is the driver as a driver.Snapshotter, or errs.NotImplemented.
func (m *Manager) snapshotter() (driver.Snapshotter, error) {
	s, ok := m.driver.(driver.Snapshotter)
	if !ok {
		return nil, errs.New(errs.NotImplemented,
			"this server's driver (%s) cannot take snapshots: saving a running sandbox with its memory (checkpoint and restore) is built for the gvisor driver only", m.driver.Name())
	}
	return s, nil
}

// fileSnapshotter is the driver as a driver.FileSnapshotter, or
// errs.NotImplemented.
func (m *Manager) fileSnapshotter() (driver.FileSnapshotter, error) {
	s, ok := m.driver.(driver.FileSnapshotter)
	if !ok {
		return nil, errs.New(errs.NotImplemented,
			"this server's driver (%s) cannot take files-only snapshots (mode %q): saving a sandbox's root layer is built for the gvisor driver only", m.driver.Name(), SnapshotFilesystem)
	}
	return s, nil
}

// checkSnapshotParams checks p and fills its defaults.
func checkSnapshotParams(p *SnapshotParams) error {
	switch p.Mode {
	case "":
		p.Mode = SnapshotFull
	case SnapshotFull:
	case SnapshotFilesystem:
	default:
		return errs.New(errs.Invalid, `mode must be "full" or "filesystem"; got %q`, p.Mode)
	}
	if p.Name != "" && !snapshotName.MatchString(p.Name) {
		return errs.New(errs.Invalid, "name %q: a snapshot name is 1 to 63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit", p.Name)
	}
	if strings.HasPrefix(p.Name, "snap_") {
		return errs.New(errs.Invalid, "name %q: names starting with snap_ are snapshot ids; choose another", p.Name)
	}
	return nil
}

// Snapshot saves the running sandbox id as a new snapshot; the sandbox
// runs on. Errors: errs.NotImplemented when the driver cannot take that
// mode, errs.Invalid for a bad name or mode, errs.Conflict when the
// key already has a snapshot of that name or the sandbox holds what cannot
// be saved, errs.Paused for a paused sandbox, errs.DiskQuota and
// errs.NoSpace when the image would not fit (nothing was written), and
// those of Running.
func (m *Manager) Snapshot(ctx context.Context, id string, p SnapshotParams) (store.Snapshot, error) {
	ss, err := m.snapshotter()
	if err != nil {
		return store.Snapshot{}, err
	}
	if err := checkSnapshotParams(&p); err != nil {
		return store.Snapshot{}, err
	}
	var fs driver.FileSnapshotter
	if p.Mode == SnapshotFilesystem {
		if fs, err = m.fileSnapshotter(); err != nil {
			return store.Snapshot{}, err
		}
	}
	unlock := m.lockSandbox(id)
	defer unlock()
	sb, err := m.Running(ctx, id)
	if errors.Is(err, errs.Paused) {
		return store.Snapshot{}, errs.New(errs.Paused, "sandbox %s is paused; resume it (POST /v1/sandboxes/%s/resume) and take the snapshot then", id, id)
	}
	if err != nil {
		return store.Snapshot{}, err
	}
	ls, err := m.attached(ctx, sb)
	if err != nil {
		return store.Snapshot{}, err
	}
	// A volume's files are never in a snapshot, and a restore keeps the
	// source's mounts: a copy would mount the volume unrecorded (a delete
	// would not see it). Refused until a restore mounts volumes again. A
	// files-only snapshot holds the root layer alone and boots fresh.
	if vols, err := m.store.SandboxVolumes(ctx, []string{id}); err != nil {
		return store.Snapshot{}, err
	} else if len(vols[id]) > 0 && fs == nil {
		return store.Snapshot{}, errs.New(errs.Conflict,
			"sandbox %s mounts volumes, and a snapshot of a sandbox with volumes is not supported yet (a volume's files are never in a snapshot); take it from a sandbox without volumes", id)
	}
	hold, err := m.admitSnapshot(ctx, p.KeyID, sb, p.Mode)
	if err != nil {
		return store.Snapshot{}, err
	}
	defer hold.release()
	ctx = context.WithoutCancel(ctx) // a snapshot is finished or undone, never left half-way
	snap := store.Snapshot{ID: newSnapshotID(), KeyID: p.KeyID, Name: p.Name, SourceID: id, Template: sb.Template,
		Mode: p.Mode, State: store.SnapshotCreating, CPU: sb.CPU, MemoryMiB: sb.MemoryMiB, DiskMiB: sb.DiskMiB,
		Driver: m.driver.Name(), CreatedAt: m.now().UTC().Truncate(time.Millisecond)}
	if r := m.limits.SnapshotRetention; r > 0 {
		end := snap.CreatedAt.Add(r)
		snap.ExpiresAt = &end
	}
	if err := m.store.InsertSnapshot(ctx, snap); err != nil {
		if errors.Is(err, store.ErrDuplicate) {
			return store.Snapshot{}, errs.New(errs.Conflict, "you have a snapshot named %q already; delete it (DELETE /v1/snapshots/%s) or choose another name", p.Name, p.Name)
		}
		return store.Snapshot{}, err
	}
	start := m.now()
	var img driver.Image
	if fs != nil {
		img, err = fs.SnapshotFiles(ctx, id, sb.DriverState, snap.ID)
	} else {
		release := ls.quiesce(errSnapshotInFlight)
		img, err = ss.Snapshot(ctx, id, sb.DriverState, snap.ID)
		release()
	}
	if err != nil {
		m.dropSnapshot(ctx, ss, snap.ID)
		switch {
		case errors.Is(err, driver.ErrNoSpace):
			return store.Snapshot{}, errs.New(errs.NoSpace, "the snapshot of sandbox %s could not be written: %v; the sandbox runs on", id, err)
		case errors.Is(err, driver.ErrNotSavable):
			return store.Snapshot{}, errs.New(errs.Conflict, "sandbox %s could not be saved: %v; it runs on", id, err)
		}
		// Not "it runs on": a sentry may die while it writes the archive.
		return store.Snapshot{}, fmt.Errorf("the snapshot of sandbox %s failed: %w", id, err)
	}
	if err := hold.countedBy(func() error { return m.store.MarkSnapshotReady(ctx, snap.ID, img.Bytes) }); err != nil {
		m.dropSnapshot(ctx, ss, snap.ID)
		return store.Snapshot{}, err
	}
	snap.State, snap.Bytes = store.SnapshotReady, img.Bytes
	m.meterSnapshotStart(ctx, snap)
	m.log.Info("snapshot taken", "sandbox", id, "snapshot", snap.ID, "mode", snap.Mode, "bytes", img.Bytes, "took", m.now().Sub(start))
	return snap, nil
}

// dropSnapshot removes a snapshot that failed: its image and its record.
func (m *Manager) dropSnapshot(ctx context.Context, ss driver.Snapshotter, id string) {
	if err := ss.DeleteSnapshot(ctx, id); err != nil {
		m.log.Error("remove a failed snapshot's image", "snapshot", id, "err", err)
	}
	if err := m.store.DeleteSnapshot(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		m.log.Error("remove a failed snapshot's record", "snapshot", id, "err", err)
	}
}

// admitSnapshot admits a snapshot of sb in mode by key keyID against
// that key's disk quota and the host's disk, with its image's estimate (as
// a pause's; a files-only one's is the blocks its root layer takes, or its
// disk size when that cannot be measured).
func (m *Manager) admitSnapshot(ctx context.Context, keyID string, sb store.Sandbox, mode string) (*quotaHold, error) {
	estimate, what := m.imageEstimate(ctx, sb), "its memory in use and the blocks its files take"
	if mode == SnapshotFilesystem {
		estimate, what = sb.DiskMiB<<20, "the blocks its files take"
		if du, ok := m.driver.(driver.DiskUser); ok {
			if n, err := du.DiskUsed(ctx, sb.ID); err == nil {
				estimate = n
			}
		}
	}
	imageMiB := (estimate + 1<<20 - 1) >> 20
	h := &quotaHold{m: m, key: keyID, use: store.KeyUse{DiskMiB: imageMiB}, writing: estimate}
	return h, m.admit(ctx, h, estimate, fmt.Sprintf("a snapshot of sandbox %s (about %d MiB: %s)", sb.ID, imageMiB, what))
}

// SnapshotScope is who asks for snapshots: KeyID, and whether it is a
// tenant key (sees only its own) or an administrator's (sees every key's).
type SnapshotScope struct {
	KeyID  string
	Tenant bool
}

// GetSnapshot returns the snapshot named by ref — its id, or a name among
// scope's key's own snapshots. errs.NotFound when there is none, or when
// it is another key's and scope is a tenant.
func (m *Manager) GetSnapshot(ctx context.Context, scope SnapshotScope, ref string) (store.Snapshot, error) {
	var sn store.Snapshot
	var err error
	if strings.HasPrefix(ref, "snap_") {
		sn, err = m.store.GetSnapshot(ctx, ref)
		if err == nil && scope.Tenant && sn.KeyID != scope.KeyID {
			err = store.ErrNotFound
		}
	} else {
		sn, err = m.store.SnapshotByName(ctx, scope.KeyID, ref)
	}
	if err == nil && isWarm(sn) {
		err = store.ErrNotFound // a template's (warm.go): no caller's
	}
	if errors.Is(err, store.ErrNotFound) {
		return store.Snapshot{}, errs.New(errs.NotFound, "no snapshot %q; list yours with GET /v1/snapshots", ref)
	}
	return sn, err
}

// ListSnapshots returns scope's snapshots (every key's for an
// administrator), newest first; sourceID, when set, only those of that
// sandbox.
func (m *Manager) ListSnapshots(ctx context.Context, scope SnapshotScope, sourceID string) ([]store.Snapshot, error) {
	f := store.SnapshotFilter{SourceID: sourceID}
	if scope.Tenant {
		f.KeyID = scope.KeyID
	}
	all, err := m.store.ListSnapshots(ctx, f)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, sn := range all {
		if !isWarm(sn) { // a template's (warm.go)
			out = append(out, sn)
		}
	}
	return out, nil
}

// DeleteSnapshot deletes the snapshot ref (as GetSnapshot finds it): its
// record, then its image. Sandboxes made from it run on. A create from it
// under way finishes first. Errors as GetSnapshot; errs.Conflict while it
// is still being taken.
func (m *Manager) DeleteSnapshot(ctx context.Context, scope SnapshotScope, ref string) error {
	sn, err := m.GetSnapshot(ctx, scope, ref)
	if err != nil {
		return err
	}
	if sn.State != store.SnapshotReady {
		return errs.New(errs.Conflict, "snapshot %s is still being taken; delete it once it is ready", sn.ID)
	}
	return m.deleteSnapshot(ctx, sn.ID)
}

// deleteSnapshot removes snapshot id, its usage closed first.
func (m *Manager) deleteSnapshot(ctx context.Context, id string) error {
	ss, err := m.snapshotter()
	if err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	unlock := m.snapLocks.lock(id, true) // after the creates from it under way
	defer unlock()
	m.meterSnapshotFinal(ctx, id)
	if err := m.store.DeleteSnapshot(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err := ss.DeleteSnapshot(ctx, id); err != nil {
		return fmt.Errorf("snapshot %s: its record is deleted but its image could not be removed (the next server start removes it): %w", id, err)
	}
	m.log.Info("snapshot deleted", "snapshot", id)
	return nil
}

// resolveSnapshot, for a create from a snapshot (p.Snapshot set), finds
// the snapshot, checks p against it and fills p from it: template, disk,
// and the memory and CPU when p leaves them at 0. It must run before
// applyDefaults.
func (m *Manager) resolveSnapshot(ctx context.Context, p *CreateParams) error {
	if p.Snapshot == "" {
		return nil
	}
	if _, err := m.snapshotter(); err != nil {
		return err
	}
	sn, err := m.GetSnapshot(ctx, SnapshotScope{KeyID: p.KeyID, Tenant: !p.AnyKeysSnapshot}, p.Snapshot)
	if err != nil {
		return err
	}
	if sn.State != store.SnapshotReady {
		return errs.New(errs.Conflict, "snapshot %s is still being taken; retry when it is ready", sn.ID)
	}
	if sn.Mode == SnapshotFilesystem {
		return m.resolveFilesSnapshot(p, sn)
	}
	if len(p.Volumes) > 0 {
		return errs.New(errs.Invalid, "volumes: snapshot %s holds a running sandbox, whose mounts are its source's; a sandbox made from it mounts no volumes (a files-only snapshot, mode %q, boots with them)", sn.ID, SnapshotFilesystem)
	}
	if p.Template != "" && p.Template != sn.Template {
		return errs.New(errs.Invalid, "template %q: snapshot %s was taken of a sandbox of template %q, and a sandbox made from it has that template; omit template", p.Template, sn.ID, sn.Template)
	}
	if p.DiskMiB != 0 && p.DiskMiB != sn.DiskMiB {
		return errs.New(errs.Invalid, "diskMiB %d: a sandbox made from snapshot %s has its source's disk of %d MiB (its files are in the snapshot); omit diskMiB", p.DiskMiB, sn.ID, sn.DiskMiB)
	}
	if p.MemoryMiB != 0 && p.MemoryMiB < sn.MemoryMiB {
		return errs.New(errs.Invalid, "memoryMiB %d: snapshot %s holds the memory of a sandbox of %d MiB, and its programs need it all back; ask for %d MiB or more, or omit memoryMiB", p.MemoryMiB, sn.ID, sn.MemoryMiB, sn.MemoryMiB)
	}
	if p.MemoryMiB == 0 {
		p.MemoryMiB = sn.MemoryMiB
	}
	if p.CPU == 0 {
		p.CPU = sn.CPU
	}
	p.Template, p.DiskMiB, p.snapshot = sn.Template, sn.DiskMiB, &sn
	return nil
}

// resolveFilesSnapshot is resolveSnapshot for files-only snapshot sn: the
// template is the snapshot's, the disk at least the source's (its files
// were written within it), memory at least filesBootMiB of its archive
// (the larger of that and the source's when 0), CPU the create's (the
// source's when 0).
func (m *Manager) resolveFilesSnapshot(p *CreateParams, sn store.Snapshot) error {
	if _, err := m.fileSnapshotter(); err != nil {
		return err
	}
	if p.Template != "" && p.Template != sn.Template {
		return errs.New(errs.Invalid, "template %q: snapshot %s holds files written over template %q, and a sandbox made from it has that template; omit template", p.Template, sn.ID, sn.Template)
	}
	if p.DiskMiB != 0 && p.DiskMiB < sn.DiskMiB {
		return errs.New(errs.Invalid, "diskMiB %d: snapshot %s holds files written on a disk of %d MiB; ask for %d MiB or more, or omit diskMiB", p.DiskMiB, sn.ID, sn.DiskMiB, sn.DiskMiB)
	}
	if p.DiskMiB == 0 {
		p.DiskMiB = sn.DiskMiB
	}
	need := filesBootMiB(sn.Bytes)
	if p.MemoryMiB != 0 && p.MemoryMiB < need {
		return errs.New(errs.Invalid, "memoryMiB %d: snapshot %s holds %d MiB of files, which gVisor reads into the new sandbox's memory as it boots (twice over, then freed); ask for %d MiB or more, or omit memoryMiB", p.MemoryMiB, sn.ID, mibOf(sn.Bytes), need)
	}
	if p.MemoryMiB == 0 {
		p.MemoryMiB = max(sn.MemoryMiB, need)
	}
	if p.CPU == 0 {
		p.CPU = sn.CPU
	}
	p.Template, p.snapshot = sn.Template, &sn
	return nil
}

// filesBootMiB is the least memory, in MiB, a sandbox booted from a
// files-only snapshot of archive bytes needs: gVisor's sentry reads every
// file of the archive into a buffer and then into the new root layer, so at
// boot the files are in its memory twice, beside the sandbox's own 128 MiB.
// Measured: 700 MiB of files boot in 2048 MiB and fail (the sentry dies
// with no message) in 1024.
func filesBootMiB(bytes int64) int64 { return 2*mibOf(bytes) + 128 }

// mibOf is bytes in MiB, rounded up.
func mibOf(bytes int64) int64 { return (bytes + 1<<20 - 1) >> 20 }

// boot starts a create's sandbox in the driver: booted from its template
// (warm.go for a warm template's), or restored from its snapshot (and then
// given what a booted sandbox gets in its spec: the create's environment,
// its lease end and memory size).
func (m *Manager) boot(ctx context.Context, p CreateParams, spec driver.Spec) (*driver.Handle, error) {
	if p.snapshot == nil {
		if st := m.startOf(p.Template); st != nil {
			return m.bootWarm(ctx, p.Template, spec, st, m.warmFits(p))
		}
		return m.driver.Create(ctx, spec)
	}
	var h *driver.Handle
	var err error
	if p.snapshot.Mode == SnapshotFilesystem {
		h, err = m.bootFiles(ctx, spec, p.snapshot)
	} else {
		h, err = m.restoreSnapshot(ctx, spec, p.snapshot, p.MemoryMiB)
	}
	switch {
	case errors.Is(err, driver.ErrNotRestorable):
		return nil, errs.New(errs.Conflict, "snapshot %s cannot be restored: %v; delete it and take a new one", p.snapshot.ID, err)
	case errors.Is(err, driver.ErrNotFound):
		return nil, errs.New(errs.Conflict, "snapshot %s has no image on this server (it was lost or is another server's): %v", p.snapshot.ID, err)
	}
	return h, err
}

// bootFiles boots spec fresh with files-only snapshot sn's files (its
// image kept from a delete until the boot read it). Driver errors are
// returned as they are; errs.NotFound when the snapshot was deleted
// meanwhile.
func (m *Manager) bootFiles(ctx context.Context, spec driver.Spec, sn *store.Snapshot) (*driver.Handle, error) {
	unlock := m.snapLocks.lock(sn.ID, false)
	defer unlock()
	if _, err := m.store.GetSnapshot(ctx, sn.ID); errors.Is(err, store.ErrNotFound) {
		return nil, errs.New(errs.NotFound, "snapshot %s was deleted while the sandbox was being created from it", sn.ID)
	}
	start := m.now()
	spec.RootFiles = sn.ID
	h, err := m.driver.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	m.log.Info("booted with a snapshot's files", "sandbox", spec.ID, "snapshot", sn.ID, "template", sn.Template, "took", m.now().Sub(start))
	return h, nil
}

// restoreSnapshot restores spec from snapshot sn (its image kept from a
// delete until the restore read it) and gives the restored agent spec's
// environment and lease end, and memoryMiB when it is more than the
// snapshot's. Driver errors are returned as they are; errs.NotFound when
// the snapshot was deleted meanwhile.
func (m *Manager) restoreSnapshot(ctx context.Context, spec driver.Spec, sn *store.Snapshot, memoryMiB int64) (*driver.Handle, error) {
	ss, err := m.snapshotter()
	if err != nil {
		return nil, err
	}
	unlock := m.snapLocks.lock(sn.ID, false) // the image stays until the restore read it
	defer unlock()
	if _, err := m.store.GetSnapshot(ctx, sn.ID); errors.Is(err, store.ErrNotFound) {
		return nil, errs.New(errs.NotFound, "snapshot %s was deleted while the sandbox was being created from it", sn.ID)
	}
	start := m.now()
	h, err := ss.Restore(ctx, spec, sn.ID)
	if err != nil {
		return nil, err
	}
	conf := agentapi.ConfigureRequest{Env: envMap(spec.Env), LeaseEndsAt: &spec.LeaseEndsAt}
	if memoryMiB > sn.MemoryMiB {
		conf.MemoryBytes = spec.MemoryBytes
	}
	if err := configureAgent(ctx, h, conf); err != nil {
		_ = m.driver.Destroy(context.WithoutCancel(ctx), spec.ID)
		return nil, fmt.Errorf("the restored agent did not take the create's settings: %w", err)
	}
	m.log.Info("restored from a snapshot", "sandbox", spec.ID, "snapshot", sn.ID, "template", sn.Template, "took", m.now().Sub(start))
	return h, nil
}

// imageEstimate is about the most a saved image of the running sandbox sb
// would take: the driver's estimate, or its memory and disk sizes.
func (m *Manager) imageEstimate(ctx context.Context, sb store.Sandbox) int64 {
	if dr, ok := m.driver.(driver.DiskReporter); ok {
		if n, err := dr.ImageEstimate(ctx, sb.ID); err == nil {
			return n
		}
	}
	return (sb.MemoryMiB + sb.DiskMiB) << 20
}

// recoverSnapshots settles snapshots after a restart: one a dead server
// left creating is removed, an image no record knows is removed, a
// record whose image is gone is deleted (with a warning).
func (m *Manager) recoverSnapshots(ctx context.Context) {
	ss, ok := m.driver.(driver.Snapshotter)
	if !ok {
		return
	}
	images, err := ss.ListSnapshots(ctx)
	if err != nil {
		m.log.Error("recover snapshots", "err", err)
		return
	}
	records, err := m.store.ListSnapshots(ctx, store.SnapshotFilter{})
	if err != nil {
		m.log.Error("recover snapshots", "err", err)
		return
	}
	onDisk := map[string]bool{}
	for _, id := range images {
		onDisk[id] = true
	}
	known := map[string]bool{}
	for _, sn := range records {
		if sn.Driver != m.driver.Name() {
			continue
		}
		known[sn.ID] = true
		switch {
		case sn.State == store.SnapshotCreating:
			m.log.Warn("removing a snapshot the last server did not finish", "snapshot", sn.ID)
			m.dropSnapshot(ctx, ss, sn.ID)
		case !onDisk[sn.ID]:
			m.log.Warn("snapshot image lost while the server was down; deleting its record", "snapshot", sn.ID)
			m.meterSnapshotFinal(ctx, sn.ID)
			_ = m.store.DeleteSnapshot(ctx, sn.ID)
		}
	}
	for _, id := range images {
		if !known[id] {
			m.log.Info("removing an orphaned snapshot image", "snapshot", id)
			if err := ss.DeleteSnapshot(ctx, id); err != nil {
				m.log.Error("remove orphaned snapshot", "snapshot", id, "err", err)
			}
		}
	}
}

// snapLocks are per-snapshot read-write locks: creates from a snapshot
// hold it shared while they restore, a delete holds it alone.
type snapLocks struct {
	mu    sync.Mutex
	locks map[string]*snapLock
}

type snapLock struct {
	mu   sync.RWMutex
	refs int
}

// lock takes snapshot id's lock (exclusive or shared) and returns its
// release.
func (sl *snapLocks) lock(id string, exclusive bool) func() {
	sl.mu.Lock()
	if sl.locks == nil {
		sl.locks = map[string]*snapLock{}
	}
	l := sl.locks[id]
	if l == nil {
		l = &snapLock{}
		sl.locks[id] = l
	}
	l.refs++
	sl.mu.Unlock()
	if exclusive {
		l.mu.Lock()
	} else {
		l.mu.RLock()
	}
	return func() {
		if exclusive {
			l.mu.Unlock()
		} else {
			l.mu.RUnlock()
		}
		sl.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(sl.locks, id)
		}
		sl.mu.Unlock()
	}
}

// quiesce holds new requests to the sandbox (they wait) and ends those in
// flight with cause, until the returned release.
func (ls *liveSandbox) quiesce(cause error) (release func()) {
	gate := make(chan struct{})
	ls.reqMu.Lock()
	ls.gate = gate
	ls.reqMu.Unlock()
	ls.interrupt(cause)
	ls.transport.CloseIdleConnections()
	return func() {
		ls.reopen()
		ls.reqMu.Lock()
		ls.gate = nil
		ls.reqMu.Unlock()
		close(gate)
	}
}

// waitGate waits while the sandbox is quiesced (a snapshot's save), or
// until ctx ends.
func (ls *liveSandbox) waitGate(ctx context.Context) error {
	ls.reqMu.Lock()
	gate := ls.gate
	ls.reqMu.Unlock()
	if gate == nil {
		return nil
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func newSnapshotID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "snap_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// envMap turns "KEY=value" entries into a map (later entries win).
func envMap(env []string) map[string]string {
	out := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			out[k] = v
		}
	}
	return out
}
