package sandbox

import (
	"context"
	"fmt"
	"sync"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// Quotas: what one key's sandboxes may hold on the host, and what the
// host's disk may still take. Every create and every pause is admitted
// here, before anything of it is written:
//
//   - Per-key quotas (store.KeyQuotas): the key's sandboxes (starting,
//     running and paused together, a count), its paused sandboxes (a count)
//     and its disk (MiB: the sum of its running and paused sandboxes'
//     diskMiB plus its paused images' bytes plus its volumes' sizes). A key's own quota wins; a
//     field it left at 0 is the server's default (Limits.KeyQuotas) for a
//     tenant key (one with a daily limit), and no per-key bound for an
//     administrator's key, which only the server-wide caps bound. A count
//     over its quota is errs.Quota (429), the disk errs.DiskQuota (507).
//   - The host's disk (driver.DiskReporter): a create is admitted while the
//     free space, less the reserve kept for the store and templates
//     (Limits.DiskReserveMiB) and less the images being written, holds the
//     new sandbox's whole diskMiB; a pause while it holds the image's
//     estimate (memory in use plus the writable layer's blocks). Disk caps
//     are overcommitted, as thin-provisioned volumes are: what running
//     sandboxes may still write up to their caps is not set aside (1,000
//     idle sandboxes of 2 GiB on a 100 GB disk is the normal case); each
//     tenant's share of it is bounded by its disk quota. Refused: errs.NoSpace
//     (507).
//
// A resume is never refused here: it frees its image and keeps its slot.
// Admissions of one server are exact under concurrency (what is admitted
// but not yet in the store is held in quotaState); servers that share a
// store (Kubernetes replicas) may each admit one create of a key at its
// quota at the same moment.

// Server-wide defaults of the per-key quotas of tenant keys (serve
// --key-sandboxes-quota, --key-paused-quota, --key-disk-quota-mib).
const (
	// DefaultKeySandboxes is how many sandboxes (starting, running and
	// paused) a tenant key may hold at once.
	DefaultKeySandboxes = 32
	// DefaultKeyPaused is how many paused sandboxes a tenant key may hold.
	DefaultKeyPaused = 16
	// DefaultKeyDiskMiB is the disk, in MiB, that a tenant key's sandboxes
	// may hold: sixteen sandboxes of the default 2048 MiB, or fewer with
	// their pause images.
	DefaultKeyDiskMiB = 32 << 10
)

// DefaultDiskReserveMiB is the least host disk kept free for the store and
// templates, in MiB; the default reserve is the larger of it and
// DefaultDiskReservePercent of the filesystem.
const DefaultDiskReserveMiB = 2048

// DefaultDiskReservePercent is the default reserve's share of the
// filesystem that holds the sandboxes, in percent.
const DefaultDiskReservePercent = 5

// quotaState holds what was admitted and is not yet counted by the store:
// creates until their record is inserted, pauses until their record says
// paused, and the images being written.
type quotaState struct {
	mu sync.Mutex
	// pending is, by key, what its admitted creates and pauses hold
	// beyond the store's records (Sandboxes, Paused, DiskMiB).
	pending map[string]store.KeyUse
	// writing is the bytes of the images being written (pause estimates).
	writing int64
}

// quotaHold is what one admitted create or pause holds until the store
// counts it (releaseKey) and its image is written (release).
type quotaHold struct {
	m                 *Manager
	key               string
	use               store.KeyUse // on the key: 1 sandbox, or 1 paused and the image's MiB
	writing           int64        // on the host: the image's estimate, in bytes
	keyOnce, hostOnce sync.Once
}

// countedBy runs write, the store write that makes the store count what
// the hold holds on its key, and on success drops the key's part, both under
// the lock the admission check holds while it reads the store: otherwise a
// check between the two counted the sandbox twice (in the store and still
// pending) and refused a create that fitted (TestQuotaBurst, 9 of 10).
// On nil it only runs write.
func (h *quotaHold) countedBy(write func() error) error {
	if h == nil {
		return write()
	}
	q := &h.m.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := write(); err != nil {
		return err
	}
	h.keyOnce.Do(h.dropKeyLocked)
	return nil
}

// releaseKey drops the key's part of the hold: the store counts it now, or
// it failed. Safe on nil and more than once.
func (h *quotaHold) releaseKey() {
	if h == nil {
		return
	}
	h.keyOnce.Do(func() {
		q := &h.m.quota
		q.mu.Lock()
		defer q.mu.Unlock()
		h.dropKeyLocked()
	})
}

// dropKeyLocked takes the hold's use off its key's pending use; q.mu held.
func (h *quotaHold) dropKeyLocked() {
	q := &h.m.quota
	{
		p := q.pending[h.key]
		p.Sandboxes -= h.use.Sandboxes
		p.Paused -= h.use.Paused
		p.DiskMiB -= h.use.DiskMiB
		p.VolumesMiB -= h.use.VolumesMiB
		if p == (store.KeyUse{}) {
			delete(q.pending, h.key)
		} else {
			q.pending[h.key] = p
		}
	}
}

// release drops the whole hold. Safe on nil and more than once.
func (h *quotaHold) release() {
	if h == nil {
		return
	}
	h.releaseKey()
	h.hostOnce.Do(func() {
		h.m.quota.mu.Lock()
		h.m.quota.writing -= h.writing
		h.m.quota.mu.Unlock()
	})
}

// QuotasOf returns the quotas that bind a key whose own are own: a tenant
// key (one with a daily limit) gets the server's defaults in the fields it
// left at 0; an administrator's key has only its own (0: no per-key bound).
func (m *Manager) QuotasOf(own store.KeyQuotas, tenant bool) store.KeyQuotas {
	if !tenant {
		return own
	}
	def := m.limits.KeyQuotas
	if own.DiskMiB == 0 {
		own.DiskMiB = def.DiskMiB
	}
	if own.PausedSandboxes == 0 {
		own.PausedSandboxes = def.PausedSandboxes
	}
	if own.Sandboxes == 0 {
		own.Sandboxes = def.Sandboxes
	}
	return own
}

// KeyQuotas returns the quotas that bind keyID (QuotasOf its own).
func (m *Manager) KeyQuotas(ctx context.Context, keyID string) (store.KeyQuotas, error) {
	own, err := m.store.GetKeyQuotas(ctx, keyID)
	if err != nil {
		return store.KeyQuotas{}, err
	}
	limit, err := m.store.KeyDailyLimit(ctx, keyID)
	if err != nil {
		return store.KeyQuotas{}, err
	}
	return m.QuotasOf(own, limit > 0), nil
}

// admitCreate admits a create of p (defaults applied) against its key's
// quotas and the host's disk. The hold is released once the sandbox's
// record is in the store (or the create failed).
func (m *Manager) admitCreate(ctx context.Context, p CreateParams) (*quotaHold, error) {
	h := &quotaHold{m: m, key: p.KeyID, use: store.KeyUse{Sandboxes: 1, DiskMiB: p.DiskMiB}}
	return h, m.admit(ctx, h, p.DiskMiB<<20, fmt.Sprintf("a sandbox with a diskMiB of %d", p.DiskMiB))
}

// admitVolume admits a new volume of sizeMiB for key keyID against its disk
// quota and the host's disk (volume.go). The hold is released once the
// volume's record is in the store (or the create failed).
func (m *Manager) admitVolume(ctx context.Context, keyID, name string, sizeMiB int64) (*quotaHold, error) {
	h := &quotaHold{m: m, key: keyID, use: store.KeyUse{VolumesMiB: sizeMiB}}
	return h, m.admit(ctx, h, sizeMiB<<20, fmt.Sprintf("volume %q of %d MiB", name, sizeMiB))
}

// admitPause admits a pause of the running sandbox sb against its key's
// quotas and the host's disk, with its image's estimate: the driver's
// (memory in use and the writable layer's blocks) or, when that cannot be
// measured, the sandbox's memory and disk sizes; for mode
// store.PauseFilesystem the blocks its writable layer takes (its disk size
// when that cannot be measured). The key's part of the hold
// is released once the record says paused, the rest when the pause ends.
func (m *Manager) admitPause(ctx context.Context, sb store.Sandbox, mode string) (*quotaHold, error) {
	if mode == store.PauseFilesystem {
		// The blocks its root layer takes, or its disk size.
		estimate := sb.DiskMiB << 20
		if du, ok := m.driver.(driver.DiskUser); ok {
			if n, err := du.DiskUsed(ctx, sb.ID); err == nil {
				estimate = n
			}
		}
		imageMiB := (estimate + 1<<20 - 1) >> 20
		h := &quotaHold{m: m, key: sb.KeyID, use: store.KeyUse{Paused: 1, DiskMiB: imageMiB}, writing: estimate}
		return h, m.admit(ctx, h, estimate, fmt.Sprintf("sandbox %s's files-only pause image (about %d MiB: the blocks its files take)", sb.ID, imageMiB))
	}
	estimate := (sb.MemoryMiB + sb.DiskMiB) << 20
	if dr, ok := m.driver.(driver.DiskReporter); ok {
		if n, err := dr.ImageEstimate(ctx, sb.ID); err == nil {
			estimate = n
		} else {
			m.log.Warn("pause: cannot measure the image to be; counting the sandbox's memory and disk sizes", "sandbox", sb.ID, "err", err)
		}
	}
	imageMiB := (estimate + 1<<20 - 1) >> 20
	h := &quotaHold{m: m, key: sb.KeyID, use: store.KeyUse{Paused: 1, DiskMiB: imageMiB}, writing: estimate}
	return h, m.admit(ctx, h, estimate, fmt.Sprintf("sandbox %s's pause image (about %d MiB: its memory in use and the blocks its files take)", sb.ID, imageMiB))
}

// admit checks h against the host's disk (need bytes for what) and its
// key's quotas, and takes it, all under the quota lock, so that concurrent
// admissions see each other.
func (m *Manager) admit(ctx context.Context, h *quotaHold, need int64, what string) error {
	var quotas store.KeyQuotas
	if h.key != "" {
		var err error
		if quotas, err = m.KeyQuotas(ctx, h.key); err != nil {
			return err
		}
	}
	q := &m.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	if !quotas.IsZero() {
		use, err := m.store.KeyUse(ctx, h.key)
		if err != nil {
			return err
		}
		pend := q.pending[h.key]
		use.Sandboxes += pend.Sandboxes
		use.Paused += pend.Paused
		use.DiskMiB += pend.DiskMiB
		use.VolumesMiB += pend.VolumesMiB
		if err := checkKeyQuotas(h.key, quotas, use, h.use, what); err != nil {
			return err
		}
	}
	if err := m.checkHostDiskLocked(need, what); err != nil {
		return err
	}
	if !quotas.IsZero() {
		if q.pending == nil {
			q.pending = map[string]store.KeyUse{}
		}
		pend := q.pending[h.key]
		pend.Sandboxes += h.use.Sandboxes
		pend.Paused += h.use.Paused
		pend.DiskMiB += h.use.DiskMiB
		pend.VolumesMiB += h.use.VolumesMiB
		q.pending[h.key] = pend
	} else {
		h.keyOnce.Do(func() {}) // nothing held on the key
	}
	q.writing += h.writing
	return nil
}

// raiseHint is how a key's quota is raised, for the messages.
const raiseHint = "an administrator can make a key with a larger one (withruntime keys create NAME --disk-quota-mib N --sandboxes-quota N --paused-quota N, or the fields diskQuotaMiB, sandboxesQuota and pausedQuota of POST /v1/keys) or raise the server's default for tenant keys (serve --key-disk-quota-mib, --key-sandboxes-quota, --key-paused-quota); otherwise ask the server's administrator"

// checkKeyQuotas refuses adding more to use (what key keyID holds,
// admissions not yet in the store included) where it would pass quotas
// (a field at 0: no bound).
func checkKeyQuotas(keyID string, quotas store.KeyQuotas, use, more store.KeyUse, what string) error {
	if more.Sandboxes > 0 && quotas.Sandboxes > 0 && use.Sandboxes+more.Sandboxes > quotas.Sandboxes {
		return errs.New(errs.Quota,
			"sandboxes quota: key %s may hold %s at once (starting, running and paused together) and holds %d; delete one (a paused one counts until it is deleted), or for a larger quota: %s",
			keyID, sandboxes(quotas.Sandboxes), use.Sandboxes, raiseHint)
	}
	if more.Paused > 0 && quotas.PausedSandboxes > 0 && use.Paused+more.Paused > quotas.PausedSandboxes {
		return errs.New(errs.Quota,
			"paused sandboxes quota: key %s may keep %s paused and keeps %d; resume or delete one of them, or for a larger quota: %s",
			keyID, sandboxes(quotas.PausedSandboxes), use.Paused, raiseHint)
	}
	held, need := use.QuotaDiskMiB(), more.QuotaDiskMiB()
	if need > 0 && quotas.DiskMiB > 0 && held+need > quotas.DiskMiB {
		vols := ""
		if use.VolumesMiB > 0 {
			vols = fmt.Sprintf(", %d MiB of volumes", use.VolumesMiB)
		}
		return errs.New(errs.DiskQuota,
			"disk quota: key %s may hold %d MiB of host disk (its running and paused sandboxes' diskMiB plus its pause images, snapshots and volumes) and holds %d MiB (%d MiB of sandboxes' diskMiB, %d MiB of pause images and snapshots%s); %s needs %d MiB more: delete sandboxes, snapshots or volumes, create with a smaller diskMiB or sizeMiB, or for a larger quota: %s",
			keyID, quotas.DiskMiB, held, use.DiskMiB, held-use.DiskMiB-use.VolumesMiB, vols, what, need, raiseHint)
	}
	return nil
}

// sandboxes says n sandboxes with the plural right: "1 sandbox", "3 sandboxes".
func sandboxes(n int64) string {
	if n == 1 {
		return "1 sandbox"
	}
	return fmt.Sprintf("%d sandboxes", n)
}

// diskReserve is the host disk, in bytes, kept free for the store and
// templates on a filesystem of size bytes (Limits.DiskReserveMiB).
func (m *Manager) diskReserve(size int64) int64 {
	switch r := m.limits.DiskReserveMiB; {
	case r > 0:
		return r << 20
	case r < 0:
		return 0
	}
	return max(DefaultDiskReserveMiB<<20, size/100*DefaultDiskReservePercent)
}

// checkHostDiskLocked refuses (errs.NoSpace) need bytes for what when the
// host's free disk, less the reserve and the images being written, does
// not hold them. m.quota.mu is held.
func (m *Manager) checkHostDiskLocked(need int64, what string) error {
	dr, ok := m.driver.(driver.DiskReporter)
	if !ok {
		return nil
	}
	avail, size, err := dr.HostDisk()
	if err != nil {
		return err
	}
	reserve := m.diskReserve(size)
	left := avail - reserve - m.quota.writing
	if need <= left {
		return nil
	}
	return errs.New(errs.NoSpace,
		"host disk: the server's disk has %d MiB free, of which %d MiB are its reserve for the store and templates (serve --disk-reserve-mib) and %d MiB are held by pause images being written, which leaves %d MiB; %s needs %d MiB: delete sandboxes (paused ones hold their images), or ask the server's administrator for more disk",
		avail>>20, reserve>>20, m.quota.writing>>20, max(left, 0)>>20, what, (need+1<<20-1)>>20)
}
