package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// Volumes (issue 28): storage that outlives sandboxes. A volume belongs to
// the key that made it and is named per key (another key's volume of any
// name is not found); its size is a hard quota the driver enforces on the
// host (driver.Volumes; the gVisor driver's form is in package volume), and
// counts in its key's disk quota from its create to its delete (quota.go).
// A create mounts volumes by name (CreateParams.Volumes); several
// sandboxes may mount one at once, read-write or read-only. A volume is
// deleted only when no sandbox that is not stopped mounts it (a paused one
// counts: its resume mounts it again); the refusal names them. Its size is
// billed at the storage price for as long as it exists (volumeInterval),
// whether or not anything is written. A driver that keeps no volumes
// (Kubernetes) answers errs.NotImplemented.

// VolumeRequest is one volume a create mounts.
type VolumeRequest struct {
	// Name is the volume's name (one of the creating key's volumes).
	Name string
	// Path is where the sandbox sees it: an absolute path, not "/" and
	// not in the sandbox's system directories (checkVolumePath).
	Path string
	// ReadOnly mounts it read-only (writes inside fail with EROFS).
	ReadOnly bool
}

// VolumeInfo is a volume with what its record does not hold: its use on the
// host and the sandboxes that mount it.
type VolumeInfo struct {
	store.Volume
	// UsedBytes is what its files take on its filesystem, in bytes.
	UsedBytes int64
	// CapacityBytes is what its files may take in all, in bytes: its size
	// less the filesystem's own structures.
	CapacityBytes int64
	// MountedBy are the sandboxes that are not stopped and mount it.
	MountedBy []string
	// Damaged, when set, says why its filesystem failed its check: it is
	// not mounted until an administrator repairs it.
	Damaged string
}

// MaxVolumesPerSandbox bounds the volumes one create mounts: each costs the
// sandbox a gofer connection (about two host threads) for its life.
const MaxVolumesPerSandbox = 8

// MinVolumeMiB is the smallest volume, in MiB.
const MinVolumeMiB = 16

var volumeNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// CheckVolumeName refuses a volume name that is not 1 to 63 letters,
// digits, '.', '_' or '-', starting with a letter or digit.
func CheckVolumeName(name string) error {
	if !volumeNamePattern.MatchString(name) {
		return errs.New(errs.Invalid, "volume name %q: use 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// reservedPaths are the sandbox's own directories: a volume is mounted
// neither at nor under them (the agent, its mounts and the host's files
// live there), nor at "/".
var reservedPaths = []string{"/proc", "/sys", "/dev", "/run", "/tmp", "/etc"}

// checkVolumePath refuses a mount path that is not absolute and clean, is
// "/" or in a reserved directory, or is longer than Linux allows.
func checkVolumePath(p string) error {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p || strings.ContainsRune(p, 0) {
		return errs.New(errs.Invalid, "volume path %q: give an absolute, clean path such as /data (no '..', '.', '//' or trailing '/')", p)
	}
	if p == "/" {
		return errs.New(errs.Invalid, "volume path \"/\": a volume cannot replace the root; mount it at a directory such as /data")
	}
	if len(p) > 4095 {
		return errs.New(errs.Invalid, "volume path of %d bytes: a path may be at most 4095 bytes", len(p))
	}
	for name := range strings.SplitSeq(p[1:], "/") {
		if len(name) > 255 {
			return errs.New(errs.Invalid, "volume path %q: a name may be at most 255 bytes", p)
		}
	}
	for _, r := range reservedPaths {
		if p == r || strings.HasPrefix(p, r+"/") {
			return errs.New(errs.Invalid, "volume path %q is in %s, which the sandbox's system needs; mount it elsewhere, such as /data or under /workspace", p, r)
		}
	}
	return nil
}

// volumesDriver is the driver's volumes, or errs.NotImplemented.
func (m *Manager) volumesDriver() (driver.Volumes, error) {
	if v, ok := m.driver.(driver.Volumes); ok {
		return v, nil
	}
	return nil, errs.New(errs.NotImplemented, "volumes are not supported by this server's %s driver yet (on Kubernetes they will be PersistentVolumeClaims); use a server with the gvisor driver", m.driver.Name())
}

// CreateVolume makes key keyID's volume name of sizeMiB. Errors:
// errs.Invalid (name, size), errs.Conflict (the key has one of that name),
// errs.DiskQuota and errs.NoSpace (quota.go), errs.NotImplemented.
func (m *Manager) CreateVolume(ctx context.Context, keyID, name string, sizeMiB int64) (VolumeInfo, error) {
	vd, err := m.volumesDriver()
	if err != nil {
		return VolumeInfo{}, err
	}
	if err := CheckVolumeName(name); err != nil {
		return VolumeInfo{}, err
	}
	if maxMiB := m.limits.MaxVolume(); sizeMiB < MinVolumeMiB || sizeMiB > maxMiB {
		return VolumeInfo{}, errs.New(errs.Invalid, "sizeMiB must be between %d and %d; got %d", MinVolumeMiB, maxMiB, sizeMiB)
	}
	hold, err := m.admitVolume(ctx, keyID, name, sizeMiB)
	if err != nil {
		return VolumeInfo{}, err
	}
	defer hold.release()
	v := store.Volume{ID: newVolumeID(), KeyID: keyID, Name: name, SizeMiB: sizeMiB, State: store.VolumeCreating,
		CreatedAt: m.now().UTC().Truncate(1e6), Driver: m.driver.Name()}
	err = hold.countedBy(func() error { return m.store.InsertVolume(ctx, v) })
	if errors.Is(err, store.ErrNameTaken) {
		return VolumeInfo{}, errs.New(errs.Conflict, "you already have a volume named %q; pick another name, or delete it first (DELETE /v1/volumes/%s)", name, name)
	}
	if err != nil {
		return VolumeInfo{}, err
	}
	// The record first, the files after: a server that dies in between
	// leaves a record in "creating", which Recover removes with whatever
	// the driver made.
	wctx := context.WithoutCancel(ctx)
	if err := vd.CreateVolume(wctx, v.ID, sizeMiB<<20); err != nil {
		_ = m.store.DeleteVolumeRecord(wctx, v.ID)
		return VolumeInfo{}, fmt.Errorf("create volume %q: %w", name, err)
	}
	if err := m.store.MarkVolumeReady(wctx, v.ID); err != nil {
		return VolumeInfo{}, err
	}
	v.State = store.VolumeReady
	m.volumeMeterStart(wctx, v)
	return m.volumeInfo(ctx, vd, v)
}

// GetVolume returns key keyID's volume name; errs.NotFound when it has none
// of that name (another key's is never found).
func (m *Manager) GetVolume(ctx context.Context, keyID, name string) (VolumeInfo, error) {
	vd, err := m.volumesDriver()
	if err != nil {
		return VolumeInfo{}, err
	}
	v, err := m.keyVolume(ctx, keyID, name)
	if err != nil {
		return VolumeInfo{}, err
	}
	return m.volumeInfo(ctx, vd, v)
}

// ListVolumes returns key keyID's volumes, by name.
func (m *Manager) ListVolumes(ctx context.Context, keyID string) ([]VolumeInfo, error) {
	vd, err := m.volumesDriver()
	if err != nil {
		return nil, err
	}
	vols, err := m.store.ListVolumes(ctx, keyID)
	if err != nil {
		return nil, err
	}
	out := make([]VolumeInfo, 0, len(vols))
	for _, v := range vols {
		vi, err := m.volumeInfo(ctx, vd, v)
		if err != nil {
			return nil, err
		}
		out = append(out, vi)
	}
	return out, nil
}

// keyVolume finds key keyID's volume name.
func (m *Manager) keyVolume(ctx context.Context, keyID, name string) (store.Volume, error) {
	if err := CheckVolumeName(name); err != nil {
		return store.Volume{}, err
	}
	v, err := m.store.GetVolumeByName(ctx, keyID, name)
	if errors.Is(err, store.ErrNotFound) {
		return store.Volume{}, errs.New(errs.NotFound, "no volume named %q; list yours with GET /v1/volumes, or create it with POST /v1/volumes", name)
	}
	return v, err
}

// volumeInfo adds v's use and mounters. A damaged volume is reported as
// such, not as an error: it is listed, and can be deleted.
func (m *Manager) volumeInfo(ctx context.Context, vd driver.Volumes, v store.Volume) (VolumeInfo, error) {
	vi := VolumeInfo{Volume: v}
	var err error
	if vi.MountedBy, err = m.store.VolumeMounters(ctx, v.ID); err != nil {
		return VolumeInfo{}, err
	}
	if v.State != store.VolumeReady {
		return vi, nil
	}
	vi.UsedBytes, vi.CapacityBytes, err = vd.VolumeUsage(ctx, v.ID)
	if errors.Is(err, driver.ErrVolumeCorrupt) {
		vi.Damaged = err.Error()
		return vi, nil
	}
	if err != nil {
		return VolumeInfo{}, fmt.Errorf("volume %q: %w", v.Name, err)
	}
	return vi, nil
}

// DeleteVolume deletes key keyID's volume name and its files. errs.Conflict
// while a sandbox that is not stopped mounts it (the message names them),
// errs.NotFound when the key has none of that name.
func (m *Manager) DeleteVolume(ctx context.Context, keyID, name string) error {
	vd, err := m.volumesDriver()
	if err != nil {
		return err
	}
	v, err := m.keyVolume(ctx, keyID, name)
	if err != nil {
		return err
	}
	if v.State != store.VolumeReady {
		return errs.New(errs.Conflict, "volume %q is %s; try again in a moment", name, v.State)
	}
	mounters, err := m.store.StartDeleteVolume(ctx, v.ID)
	if errors.Is(err, store.ErrNotFound) {
		return errs.New(errs.Conflict, "volume %q is being created or deleted by another request; try again in a moment", name)
	}
	if err != nil {
		return err
	}
	if len(mounters) > 0 {
		return errs.New(errs.Conflict, "volume %q is mounted by %s %s (paused ones count: a resume mounts it again); delete %s first",
			name, plural(len(mounters), "sandbox", "sandboxes"), strings.Join(mounters, ", "), plural(len(mounters), "it", "them"))
	}
	return m.finishVolumeDelete(context.WithoutCancel(ctx), vd, v)
}

// finishVolumeDelete bills a deleting volume's last interval and removes
// its files and record.
func (m *Manager) finishVolumeDelete(ctx context.Context, vd driver.Volumes, v store.Volume) error {
	m.volumeMeterFinal(ctx, v)
	if err := vd.DeleteVolume(ctx, v.ID); err != nil {
		return fmt.Errorf("delete volume %q: %w", v.Name, err)
	}
	return m.store.DeleteVolumeRecord(ctx, v.ID)
}

// OpenVolume opens key keyID's volume name's files (the file API without a
// sandbox). errs.Conflict for a damaged volume.
func (m *Manager) OpenVolume(ctx context.Context, keyID, name string) (*os.Root, error) {
	vd, err := m.volumesDriver()
	if err != nil {
		return nil, err
	}
	v, err := m.keyVolume(ctx, keyID, name)
	if err != nil {
		return nil, err
	}
	if v.State != store.VolumeReady {
		return nil, errs.New(errs.Conflict, "volume %q is %s", name, v.State)
	}
	r, err := vd.OpenVolume(ctx, v.ID)
	if err != nil {
		return nil, volumeErr(name, err)
	}
	return r, nil
}

// resolveVolumes turns a create's volume requests into the mounts to
// record and to boot with: each a volume of the creating key, at a path
// apart from the others'. Errors: errs.Invalid, errs.NotFound,
// errs.Conflict (a volume not ready), errs.NotImplemented.
func (m *Manager) resolveVolumes(ctx context.Context, p CreateParams) ([]store.SandboxVolume, []driver.VolumeMount, error) {
	if len(p.Volumes) == 0 {
		return nil, nil, nil
	}
	if _, err := m.volumesDriver(); err != nil {
		return nil, nil, err
	}
	if len(p.Volumes) > MaxVolumesPerSandbox {
		return nil, nil, errs.New(errs.Invalid, "a sandbox may mount at most %d volumes; got %d", MaxVolumesPerSandbox, len(p.Volumes))
	}
	rec := make([]store.SandboxVolume, 0, len(p.Volumes))
	mounts := make([]driver.VolumeMount, 0, len(p.Volumes))
	for i, req := range p.Volumes {
		if err := checkVolumePath(req.Path); err != nil {
			return nil, nil, err
		}
		for _, o := range p.Volumes[:i] {
			if o.Name == req.Name {
				return nil, nil, errs.New(errs.Invalid, "volume %q is mounted twice; mount each volume once", req.Name)
			}
			if o.Path == req.Path || strings.HasPrefix(req.Path, o.Path+"/") || strings.HasPrefix(o.Path, req.Path+"/") {
				return nil, nil, errs.New(errs.Invalid, "volume paths %s and %s overlap; mount each volume at a path of its own, neither inside the other", o.Path, req.Path)
			}
		}
		v, err := m.keyVolume(ctx, p.KeyID, req.Name)
		if err != nil {
			return nil, nil, err
		}
		if v.State != store.VolumeReady {
			return nil, nil, errs.New(errs.Conflict, "volume %q is %s; it cannot be mounted", req.Name, v.State)
		}
		rec = append(rec, store.SandboxVolume{VolumeID: v.ID, Name: v.Name, Path: req.Path, ReadOnly: req.ReadOnly})
		mounts = append(mounts, driver.VolumeMount{ID: v.ID, Path: req.Path, ReadOnly: req.ReadOnly})
	}
	return rec, mounts, nil
}

// volumeErr explains a driver's failure to use volume name.
func volumeErr(name string, err error) error {
	if !errors.Is(err, driver.ErrVolumeCorrupt) {
		return err
	}
	what := fmt.Sprintf("volume %q is", name)
	if name == "" {
		what = "a volume the sandbox mounts is"
	}
	return errs.New(errs.Conflict, "%s damaged and is not mounted (%v); an administrator can repair its image with e2fsck, or delete the volume", what, err)
}

// mountErr is the error of a create whose record could not be written
// because a volume went meanwhile, or whose boot failed on a volume.
func mountErr(err error) error {
	if errors.Is(err, store.ErrVolumeGone) {
		return errs.New(errs.Conflict, "%v: it was deleted while the sandbox was being created; create it again or mount another", err)
	}
	if errors.Is(err, driver.ErrVolumeCorrupt) {
		return volumeErr("", err)
	}
	return err
}

// recoverVolumes finishes what a dead server left of volume creates and
// deletes, and removes volumes on the host that no record knows.
func (m *Manager) recoverVolumes(ctx context.Context) {
	vd, ok := m.driver.(driver.Volumes)
	if !ok {
		return
	}
	vols, err := m.store.ListVolumes(ctx, "")
	if err != nil {
		m.log.Error("recover volumes", "err", err)
		return
	}
	known := map[string]bool{}
	for _, v := range vols {
		known[v.ID] = true
		switch v.State {
		case store.VolumeCreating:
			m.log.Warn("removing a volume whose create the last server did not finish", "volume", v.ID, "name", v.Name)
			err := vd.DeleteVolume(ctx, v.ID)
			if err == nil {
				err = m.store.DeleteVolumeRecord(ctx, v.ID)
			}
			if err != nil {
				m.log.Error("remove an unfinished volume", "volume", v.ID, "err", err)
			}
		case store.VolumeDeleting:
			if err = m.finishVolumeDelete(ctx, vd, v); err != nil {
				m.log.Error("finish volume delete", "volume", v.ID, "err", err)
			}
		}
	}
	ids, err := vd.ListVolumes(ctx)
	if err != nil {
		m.log.Error("recover volumes", "err", err)
		return
	}
	for _, id := range ids {
		if !known[id] {
			m.log.Warn("removing a volume no record knows", "volume", id)
			if err := vd.DeleteVolume(ctx, id); err != nil {
				m.log.Error("remove orphaned volume", "volume", id, "err", err)
			}
		}
	}
}

func newVolumeID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "vol_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
