package sandbox

import (
	"context"
	"time"

	"withruntime.dev/runtime/internal/store"
)

// A volume is billed at the storage price (Prices.StorageMicrosPerGiBHour,
// as a paused sandbox's image) for its size, from its create to its delete,
// whatever its files take: the size is what it holds of the host's disk
// and of its key's disk quota, as a provisioned block volume is billed. Its
// intervals are in the usage ledger under the volume's id (vol_...) in place
// of a sandbox's, with only StorageGiBSeconds, so reports grouped by
// sandbox show each volume as a row of its own and a key's daily spend
// includes its volumes. The periodic sampler writes one interval per volume
// every tick (with the sandboxes': sampleAll); a delete writes the last.

// volumeMeterStart opens a new volume's ledger at its creation.
func (m *Manager) volumeMeterStart(ctx context.Context, v store.Volume) {
	if !m.meter.on {
		return
	}
	if err := m.store.StartUsage(ctx, v.ID, v.CreatedAt, store.CPUMark{}); err != nil {
		m.log.Warn("metering", "volume", v.ID, "err", err)
	}
}

// volumeMeterFinal bills a volume up to now and closes its ledger.
func (m *Manager) volumeMeterFinal(ctx context.Context, v store.Volume) {
	if !m.meter.on {
		return
	}
	l := m.meterLock(v.ID)
	l.Lock()
	defer l.Unlock()
	if err := m.sampleVolumesLocked(ctx, []store.Volume{v}, true); err != nil {
		m.log.Warn("metering the last interval", "volume", v.ID, "err", err)
	}
	m.meter.mu.Lock()
	delete(m.meter.locks, v.ID)
	m.meter.mu.Unlock()
}

// sampleVolumes writes every volume's interval up to now, meterBatch at a
// time.
func (m *Manager) sampleVolumes(ctx context.Context) {
	vols, err := m.store.ListVolumes(ctx, "")
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("metering: list volumes", "err", err)
		}
		return
	}
	for len(vols) > 0 && ctx.Err() == nil {
		n := min(len(vols), meterBatch)
		batch := vols[:n]
		vols = vols[n:]
		func() {
			for _, v := range batch {
				l := m.meterLock(v.ID)
				l.Lock()
				defer l.Unlock()
			}
			if err := m.sampleVolumesLocked(ctx, batch, false); err != nil && ctx.Err() == nil {
				m.log.Warn("metering volumes", "err", err)
			}
		}()
	}
}

// sampleVolumesLocked writes the intervals of vols (their meter locks
// held) from their cursors to now; final closes their ledgers. A volume
// without a ledger (made while metering was off) is billed from its
// creation.
func (m *Manager) sampleVolumesLocked(ctx context.Context, vols []store.Volume, final bool) error {
	ids := make([]string, len(vols))
	for i, v := range vols {
		ids[i] = v.ID
	}
	curs, err := m.store.GetUsageCursors(ctx, ids)
	if err != nil {
		return err
	}
	end := m.now().UTC().Truncate(time.Millisecond)
	recs := make([]store.UsageRecord, 0, len(vols))
	for _, v := range vols {
		cur, ok := curs[v.ID]
		if !ok {
			if v.State == store.VolumeCreating {
				continue // its create opens the ledger
			}
			if err := m.store.StartUsage(ctx, v.ID, v.CreatedAt, store.CPUMark{}); err != nil {
				return err
			}
			cur = store.UsageCursor{SandboxID: v.ID, LastAt: v.CreatedAt}
		}
		if cur.Closed || (!end.After(cur.LastAt) && !final) {
			continue
		}
		stop := end
		if !stop.After(cur.LastAt) {
			stop = cur.LastAt
		}
		iv := store.UsageInterval{SandboxID: v.ID, KeyID: v.KeyID, Start: cur.LastAt, End: stop,
			StorageGiBSeconds: float64(v.SizeMiB) / 1024 * stop.Sub(cur.LastAt).Seconds()}
		recs = append(recs, store.UsageRecord{Interval: iv, Final: final})
	}
	_, err = m.store.RecordUsageBatch(ctx, recs)
	return err
}
