package sandbox

import (
	"context"
	"errors"
	"time"

	"withruntime.dev/runtime/internal/store"
)

// Metering of snapshots: a ready snapshot's image is billed at the storage
// price, like a paused sandbox's, in the same ledger under the snapshot's
// id (usage grouped by sandbox shows it as its own row, snap_...): from
// when it is ready until it is deleted, as its bytes × time
// (StorageGiBSeconds), with no CPU, wall or memory time. The periodic
// sampler writes an interval per snapshot; a delete writes the last one.

// meterSnapshotStart opens a ready snapshot's ledger.
func (m *Manager) meterSnapshotStart(ctx context.Context, sn store.Snapshot) {
	if !m.meter.on {
		return
	}
	if err := m.store.StartUsage(ctx, sn.ID, m.now().UTC().Truncate(time.Millisecond), store.CPUMark{}); err != nil {
		m.log.Warn("metering", "snapshot", sn.ID, "err", err)
	}
}

// sampleSnapshots writes every ready snapshot's interval up to now, in one
// transaction.
func (m *Manager) sampleSnapshots(ctx context.Context) {
	snaps, err := m.store.ListSnapshots(ctx, store.SnapshotFilter{State: store.SnapshotReady})
	if err != nil || len(snaps) == 0 {
		if err != nil && ctx.Err() == nil {
			m.log.Warn("metering: list snapshots", "err", err)
		}
		return
	}
	var recs []store.UsageRecord
	for _, sn := range snaps {
		l := m.meterLock(sn.ID)
		l.Lock()
		defer l.Unlock()
		rec, ok, err := m.snapshotInterval(ctx, sn, false)
		if err != nil {
			m.log.Warn("metering", "snapshot", sn.ID, "err", err)
			continue
		}
		if ok {
			recs = append(recs, rec)
		}
	}
	if _, err := m.store.RecordUsageBatch(ctx, recs); err != nil && ctx.Err() == nil {
		m.log.Warn("metering snapshots", "err", err)
	}
}

// meterSnapshotFinal writes a snapshot's last interval (it is being
// deleted) and closes its ledger.
func (m *Manager) meterSnapshotFinal(ctx context.Context, id string) {
	if !m.meter.on {
		return
	}
	l := m.meterLock(id)
	l.Lock()
	defer func() {
		l.Unlock()
		m.meter.mu.Lock()
		delete(m.meter.locks, id)
		m.meter.mu.Unlock()
	}()
	sn, err := m.store.GetSnapshot(ctx, id)
	if err != nil {
		return
	}
	rec, ok, err := m.snapshotInterval(ctx, sn, true)
	if err == nil && ok {
		_, err = m.store.RecordUsage(ctx, rec.Interval, rec.Mark, true)
	}
	if err != nil {
		m.log.Warn("metering the last interval", "snapshot", id, "err", err)
	}
}

// snapshotInterval is snapshot sn's interval from its ledger's cursor to
// now; ok is false when there is nothing to write (no ledger: metering was
// off when it was taken; closed; no time passed).
func (m *Manager) snapshotInterval(ctx context.Context, sn store.Snapshot, final bool) (store.UsageRecord, bool, error) {
	cur, err := m.store.GetUsageCursor(ctx, sn.ID)
	if errors.Is(err, store.ErrNotFound) {
		return store.UsageRecord{}, false, nil
	}
	if err != nil || cur.Closed {
		return store.UsageRecord{}, false, err
	}
	end := m.now().UTC().Truncate(time.Millisecond)
	if !end.After(cur.LastAt) {
		if !final {
			return store.UsageRecord{}, false, nil
		}
		end = cur.LastAt
	}
	iv := store.UsageInterval{SandboxID: sn.ID, KeyID: sn.KeyID, Start: cur.LastAt, End: end,
		StorageGiBSeconds: float64(sn.Bytes) / (1 << 30) * end.Sub(cur.LastAt).Seconds()}
	return store.UsageRecord{Interval: iv, Final: final}, true, nil
}
