package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/egress"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/internal/template"
	"withruntime.dev/runtime/internal/version"
)

// Warm templates. A template with a start (template.Start: a start command,
// a ready check, the default code context's kernel) is warm: the manager
// boots one sandbox of it, runs its start there (start.go), saves that
// sandbox as the template's warm image (a snapshot owned by no key), and
// restores every create of the template from the image, so the first
// command of every sandbox finds the server answering, the kernel up.
//
//   - The warm image is made once, lazily, by the first create (or by the
//     build that made the template, which fails when the ready check does
//     not pass), under a lock per image: concurrent creates wait for the
//     one warm-up. A warm-up, once begun, finishes for the creates after
//     it even when the create that began it went away.
//   - An image is known by its warm name (warmName): a hash of the
//     template's root directory and its identity on disk, the start, the
//     default sandbox shape, whether sandboxes have a network, and this
//     server's build. A rebuilt template, a changed start or an upgraded
//     server gets a new image; the old one is deleted when the new one is
//     made, and at the next start (recoverWarm). A runsc of another version
//     cannot restore an image (driver.ErrNotRestorable): the image is made
//     again, once, and the create restored from the new one; nothing is
//     ever half-started.
//   - Only creates of the default shape (the server's default memory, disk
//     and visible CPU count: what the image holds), without volumes or
//     secrets, restore the image; any other create of a warm template
//     boots it and runs the start in place, waiting for the ready check
//     (slower, same result). So does every create when the driver cannot
//     take snapshots, or when the image cannot be made for a reason that is
//     not the template's (the host's disk full).
//   - The warm pool boots warm templates from their image too (pool.go).
//   - A create that starts the template in place leaves its kernel (Start.
//     Kernel) to start at its first call, as any sandbox with kernels
//     does: only a warm image is worth the wait.
//   - SetWarmImages(false) (serve --warm-images=false) turns the images
//     off: every create starts in place.
//   - A template without a start is not warm: it boots. Measured here, a
//     create from a snapshot of an idle base sandbox to python3's first
//     output was 0.98x a cold create's (bench/README.md, snapshot): a
//     restore saves nothing where nothing was started.
//   - A warm image is held like its template: a shared template's by no key
//     (store.Snapshot.KeyID ""), a private template's by its owner, in whose
//     disk quota its bytes count (the host's free disk admits every image);
//     it is billed to no one. Its name ("warm:" and a hash) is one no
//     snapshot of a caller can have (':' is not allowed in those), and no
//     API route lists, names, restores or deletes it. It lives in the
//     driver's snapshot directory, where nothing inside any sandbox can name
//     or write it.

// TemplateInfos may be implemented by Templates: a template's record
// (template.Store implements it), whose Start makes it warm and whose Owner
// holds its warm image.
type TemplateInfos interface {
	Get(name string) (template.Info, error)
}

// warmNamePrefix starts a warm image's name (its record's Name): with ':',
// which no snapshot a caller names may contain (snapshotName).
const warmNamePrefix = "warm:"

// warmLease is the lease backstop of a warm-up sandbox: it ends itself
// after it should a server die during the warm-up.
const warmLease = 20 * time.Minute

// warmBudget bounds a warm-up besides its ready check: boot, kernel,
// snapshot.
const warmBudget = 3 * time.Minute

// errStartFailed says a template's start failed in its sandbox (the start
// command exited, the ready check did not pass in time, the kernel did not
// start): the template's fault, not the host's.
var errStartFailed = errors.New("the template's start failed")

// startOf is template name's start, nil when it is not warm (or the
// templates cannot say).
func (m *Manager) startOf(name string) *template.Start {
	st, _ := m.warmOf(name)
	return st
}

// warmOf is template name's start (nil when it is not warm) and the key
// that holds its warm image ("" for a shared template).
func (m *Manager) warmOf(name string) (*template.Start, string) {
	ti, ok := m.templates.(TemplateInfos)
	if !ok {
		return nil, ""
	}
	info, err := ti.Get(name)
	if err != nil || info.Start.IsZero() {
		return nil, ""
	}
	return info.Start, info.Owner
}

// warmFits says whether a create of p (defaults applied) may restore its
// template's warm image: the image holds a sandbox of the default shape
// with no volume and no secret.
func (m *Manager) warmFits(p CreateParams) bool {
	if _, ok := m.driver.(driver.Snapshotter); !ok || m.coldTemplates.Load() {
		return false
	}
	return len(p.Volumes) == 0 && len(p.Secrets) == 0 &&
		p.MemoryMiB == m.limits.DefaultMemoryMiB && p.DiskMiB == m.limits.DefaultDiskMiB &&
		driver.VisibleCPUs(p.CPU) == driver.VisibleCPUs(m.limits.DefaultCPU)
}

// bootWarm boots spec, a sandbox of the warm template tpl whose start is
// st: restored from the template's warm image when fits, otherwise (or
// when the image cannot be had for a reason that is not the template's)
// booted with its start run in place. Errors: errs.Conflict when the
// template's start fails, otherwise the driver's.
func (m *Manager) bootWarm(ctx context.Context, tpl string, spec driver.Spec, st *template.Start, fits bool) (*driver.Handle, error) {
	if fits {
		h, err := m.restoreWarm(ctx, tpl, spec, st)
		if err == nil {
			return h, nil
		}
		if errors.Is(err, errStartFailed) {
			return nil, startConflict(tpl, err)
		}
		if ctx.Err() != nil {
			return nil, err
		}
		m.log.Warn("warm template: booting without its warm image", "template", tpl, "sandbox", spec.ID, "err", err)
	}
	h, err := m.driver.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	tr := agentConns(h)
	defer tr.CloseIdleConnections()
	if err := runStart(ctx, tr, st, true); err != nil {
		_ = m.driver.Destroy(context.WithoutCancel(ctx), spec.ID)
		if errors.Is(err, errStartFailed) {
			return nil, startConflict(tpl, err)
		}
		return nil, fmt.Errorf("starting template %q: %w", tpl, err)
	}
	return h, nil
}

// startConflict is a create's error for template tpl whose start failed.
func startConflict(tpl string, err error) error {
	return errs.New(errs.Conflict, "template %q cannot start its sandboxes: %v; fix its start (rebuild the template) or use another template", tpl, err)
}

// restoreWarm restores spec from template tpl's warm image, making the
// image first when there is none. An image that cannot be restored here
// (made by another runsc, its template rebuilt meanwhile, lost) is made
// again, once.
func (m *Manager) restoreWarm(ctx context.Context, tpl string, spec driver.Spec, st *template.Start) (*driver.Handle, error) {
	withNet := spec.Network != nil
	for attempt := 0; ; attempt++ {
		sn, err := m.warmImage(ctx, tpl, spec.RootFS, st, withNet)
		if err != nil {
			return nil, err
		}
		h, err := m.restoreSnapshot(ctx, spec, &sn, sn.MemoryMiB)
		stale := errors.Is(err, driver.ErrNotRestorable) || errors.Is(err, driver.ErrNotFound) || errors.Is(err, errs.NotFound)
		if err == nil || !stale || attempt > 0 {
			return h, err
		}
		m.log.Info("warm template: its image cannot be restored here; making it again", "template", tpl, "snapshot", sn.ID, "err", err)
		if derr := m.deleteSnapshot(ctx, sn.ID); derr != nil {
			return nil, derr
		}
	}
}

// warmName is the name of template tpl's warm image for sandboxes on
// rootfs with start st, with or without a network: see the package notes.
func (m *Manager) warmName(tpl, rootfs string, st *template.Start, withNet bool) string {
	var dev, ino uint64
	var fs unix.Stat_t
	if unix.Stat(rootfs, &fs) == nil {
		dev, ino = fs.Dev, fs.Ino
	}
	start, _ := json.Marshal(st)
	l := m.limits
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%d:%d\n%s\n%t\n%d %d %d %d %d\n%s\n", tpl, rootfs, dev, ino, start, withNet,
		driver.VisibleCPUs(l.DefaultCPU), l.DefaultMemoryMiB, l.DefaultDiskMiB, l.TmpMiB, l.PidsLimit, version.Get().String())
	return warmNamePrefix + hex.EncodeToString(h.Sum(nil))[:24]
}

// warmFlight is one warm-up under way; done is closed when sn, err are set.
type warmFlight struct {
	done chan struct{}
	sn   store.Snapshot
	err  error
}

// warmImage returns template tpl's ready warm image for sandboxes on
// rootfs with or without a network, making it once when there is none.
// ctx bounds the wait only: a warm-up, once begun, finishes (or Close ends
// it). Errors wrapping errStartFailed are the template's.
func (m *Manager) warmImage(ctx context.Context, tpl, rootfs string, st *template.Start, withNet bool) (store.Snapshot, error) {
	name := m.warmName(tpl, rootfs, st, withNet)
	_, owner := m.warmOf(tpl)
	if sn, err := m.store.SnapshotByName(ctx, owner, name); err == nil && sn.State == store.SnapshotReady {
		return sn, nil
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return store.Snapshot{}, errs.New(errs.Capacity, "the server is shutting down")
	}
	if m.warming == nil {
		m.warming = map[string]*warmFlight{}
	}
	f := m.warming[name]
	if f == nil {
		f = &warmFlight{done: make(chan struct{})}
		m.warming[name] = f
		m.bg.Add(1)
		go func() {
			defer m.bg.Done()
			wctx, cancel := context.WithTimeout(context.Background(), st.ReadyTimeout()+warmBudget)
			defer cancel()
			go func() { // Close ends it
				select {
				case <-m.closing:
					cancel()
				case <-wctx.Done():
				}
			}()
			f.sn, f.err = m.lookOrMakeWarm(wctx, tpl, owner, rootfs, st, withNet, name)
			m.mu.Lock()
			delete(m.warming, name)
			m.mu.Unlock()
			close(f.done)
		}()
	}
	m.mu.Unlock()
	select {
	case <-f.done:
		return f.sn, f.err
	case <-ctx.Done():
		return store.Snapshot{}, ctx.Err()
	}
}

// lookOrMakeWarm returns the warm image name, held by owner, made now
// unless another server on the store made it meanwhile.
func (m *Manager) lookOrMakeWarm(ctx context.Context, tpl, owner, rootfs string, st *template.Start, withNet bool, name string) (store.Snapshot, error) {
	if sn, err := m.store.SnapshotByName(ctx, owner, name); err == nil && sn.State == store.SnapshotReady {
		return sn, nil
	}
	start := m.now()
	sn, err := m.makeWarm(ctx, tpl, owner, rootfs, st, withNet, name)
	if err != nil {
		m.log.Warn("warm template: no warm image", "template", tpl, "err", err)
		return sn, err
	}
	m.log.Info("warm template: image made", "template", tpl, "snapshot", sn.ID, "bytes", sn.Bytes, "took", m.now().Sub(start))
	m.dropWarm(ctx, tpl, name)
	return sn, nil
}

// makeWarm boots a sandbox of template tpl (the default shape, no key, a
// network that lets nothing out when withNet), runs its start st, saves it
// as the warm image name held by owner (admitted against its disk quota)
// and destroys it.
func (m *Manager) makeWarm(ctx context.Context, tpl, owner, rootfs string, st *template.Start, withNet bool, name string) (store.Snapshot, error) {
	ss, err := m.snapshotter()
	if err != nil {
		return store.Snapshot{}, err
	}
	l := m.limits
	id := newID()
	spec := driver.Spec{ID: id, RootFS: rootfs, CPU: l.DefaultCPU,
		MemoryBytes: l.DefaultMemoryMiB << 20, DiskBytes: l.DefaultDiskMiB << 20,
		TmpBytes: tmpBytes(l.TmpMiB, l.DefaultMemoryMiB), ShmBytes: shmBytes(l.TmpMiB, l.DefaultMemoryMiB),
		PidsLimit: pidsLimit(l.PidsLimit, l.DefaultMemoryMiB), LeaseEndsAt: m.now().Add(warmLease)}
	if te, ok := m.templates.(TemplateEnv); ok {
		if env, err := te.Env(tpl); err == nil {
			spec.Env = append(spec.Env, env...)
		}
	}
	if withNet {
		if m.network == nil {
			return store.Snapshot{}, errors.New("sandboxes have no network on this server")
		}
		att, err := m.network.egress.Attach(ctx, id, egress.Policy{})
		if err != nil {
			return store.Snapshot{}, err
		}
		defer m.detachNetwork(context.WithoutCancel(ctx), id)
		spec.Network = &driver.Network{NetnsPath: att.NetnsPath, ResolvConf: att.ResolvConf}
		bundle, env, err := m.trustBundle(rootfs, false)
		if err != nil {
			return store.Snapshot{}, err
		}
		spec.Network.CABundle, spec.Env = bundle, append(spec.Env, env...)
	}
	h, err := m.driver.Create(ctx, spec)
	if err != nil {
		return store.Snapshot{}, fmt.Errorf("booting a sandbox of template %q: %w", tpl, err)
	}
	defer func() {
		if err := m.driver.Destroy(context.WithoutCancel(ctx), id); err != nil {
			m.log.Error("warm template: destroy the warm-up sandbox", "sandbox", id, "err", err)
		}
	}()
	tr := agentConns(h)
	err = runStart(ctx, tr, st, false)
	tr.CloseIdleConnections()
	if err != nil {
		return store.Snapshot{}, err
	}
	sb := store.Sandbox{ID: id, MemoryMiB: l.DefaultMemoryMiB, DiskMiB: l.DefaultDiskMiB}
	hold, err := m.admitSnapshot(ctx, owner, sb, SnapshotFull)
	if err != nil {
		return store.Snapshot{}, err
	}
	defer hold.release()
	snap := store.Snapshot{ID: newSnapshotID(), KeyID: owner, Name: name, SourceID: id, Template: tpl,
		Mode: SnapshotFull, State: store.SnapshotCreating, CPU: l.DefaultCPU, MemoryMiB: l.DefaultMemoryMiB,
		DiskMiB: l.DefaultDiskMiB, Driver: m.driver.Name(), CreatedAt: m.now().UTC().Truncate(time.Millisecond)}
	if err := m.store.InsertSnapshot(ctx, snap); err != nil {
		if errors.Is(err, store.ErrDuplicate) { // another server made it meanwhile
			return m.store.SnapshotByName(ctx, owner, name)
		}
		return store.Snapshot{}, err
	}
	img, err := ss.Snapshot(ctx, id, h.State, snap.ID)
	if err != nil {
		m.dropSnapshot(ctx, ss, snap.ID)
		return store.Snapshot{}, fmt.Errorf("saving the warm image of template %q: %w", tpl, err)
	}
	if err := hold.countedBy(func() error { return m.store.MarkSnapshotReady(ctx, snap.ID, img.Bytes) }); err != nil {
		m.dropSnapshot(ctx, ss, snap.ID)
		return store.Snapshot{}, err
	}
	snap.State, snap.Bytes = store.SnapshotReady, img.Bytes
	return snap, nil
}

// SetWarmImages turns warm images on (the default) or off. Off, every
// create of a warm template boots it and runs its start in place (its
// kernel left to start at the first call), and builds save no image:
// `serve --warm-images=false`, and the benchmark's baseline of a create
// without one.
func (m *Manager) SetWarmImages(on bool) { m.coldTemplates.Store(!on) }

// Warm makes template name's warm image now, for a build that made the
// template (nothing to do for one that is not warm). Errors: errs.Invalid
// when the template's start fails (the command exited, the ready check did
// not pass in time: the message has its last output). A warm image that
// cannot be made for the host's reasons is not an error (the first create
// makes it, or boots without it); it is logged.
func (m *Manager) Warm(ctx context.Context, name string) error {
	st := m.startOf(name)
	if st == nil {
		return nil
	}
	rootfs, err := m.templates.RootFS(name)
	if err != nil {
		return errs.New(errs.Invalid, "template %q: %v", name, err)
	}
	if _, ok := m.driver.(driver.Snapshotter); !ok || m.coldTemplates.Load() {
		return nil // every create starts it in place
	}
	_, err = m.warmImage(ctx, name, rootfs, st, m.network != nil)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errStartFailed):
		return errs.New(errs.Invalid, "template %q: %v", name, err)
	case ctx.Err() != nil:
		return err
	}
	m.log.Warn("warm template: its image could not be made now; the first create tries again", "template", name, "err", err)
	return nil
}

// DropWarm deletes template name's warm images (the template was deleted).
func (m *Manager) DropWarm(ctx context.Context, name string) {
	m.dropWarm(ctx, name, "")
}

// dropWarm deletes template tpl's warm images but the one named keep.
func (m *Manager) dropWarm(ctx context.Context, tpl, keep string) {
	for _, sn := range m.warmImages(ctx) {
		if sn.Template == tpl && sn.Name != keep && sn.State == store.SnapshotReady {
			if err := m.deleteSnapshot(ctx, sn.ID); err != nil {
				m.log.Warn("warm template: delete an old warm image", "template", tpl, "snapshot", sn.ID, "err", err)
			}
		}
	}
}

// warmImages are the warm images' records.
func (m *Manager) warmImages(ctx context.Context) []store.Snapshot {
	all, err := m.store.ListSnapshots(ctx, store.SnapshotFilter{})
	if err != nil {
		m.log.Warn("warm template: list warm images", "err", err)
		return nil
	}
	var out []store.Snapshot
	for _, sn := range all {
		if isWarm(sn) && sn.Driver == m.driver.Name() {
			out = append(out, sn)
		}
	}
	return out
}

// isWarm says snapshot sn is a warm image (no caller's snapshot).
func isWarm(sn store.Snapshot) bool {
	return strings.HasPrefix(sn.Name, warmNamePrefix)
}

// recoverWarm deletes, at a start, the warm images no create would use:
// of a deleted or rebuilt template, another start, another shape or build.
func (m *Manager) recoverWarm(ctx context.Context) {
	for _, sn := range m.warmImages(ctx) {
		st := m.startOf(sn.Template)
		rootfs, err := m.templates.RootFS(sn.Template)
		if st != nil && err == nil && (sn.Name == m.warmName(sn.Template, rootfs, st, true) || sn.Name == m.warmName(sn.Template, rootfs, st, false)) {
			continue
		}
		m.log.Info("warm template: deleting an out-of-date warm image", "template", sn.Template, "snapshot", sn.ID)
		if err := m.deleteSnapshot(ctx, sn.ID); err != nil {
			m.log.Warn("warm template: delete an out-of-date warm image", "snapshot", sn.ID, "err", err)
		}
	}
}
