package sandbox

import (
	"context"
	"time"
)

// Snapshot retention. With Limits.SnapshotRetention set (serve
// --snapshot-retention), a snapshot taken is recorded with ExpiresAt, its
// creation plus the retention, and is deleted (its usage closed, its record
// and image removed, as DELETE /v1/snapshots/{id} does) once that has
// passed: by the leader's sweep (leader.go) when leader election gates the
// leader-only work, else by a loop of this server (StartSnapshotExpiry),
// each at most snapshotExpiryEvery late. A snapshot keeps the expiry it was
// recorded with whatever the retention is later; one taken with no
// retention is kept until deleted. Sandboxes made from it run on.

// snapshotExpiryEvery is how often a server without leader election looks
// for expired snapshots.
const snapshotExpiryEvery = 5 * time.Second

// StartSnapshotExpiry starts the loop that deletes expired snapshots, for
// a server without GateLeaderWork (with it, the leader's sweep does); it
// ends at Close.
func (m *Manager) StartSnapshotExpiry() {
	if m.lead.gated {
		return
	}
	go m.background(func() {
		t := time.NewTicker(snapshotExpiryEvery)
		defer t.Stop()
		for {
			m.expireSnapshots(context.Background())
			select {
			case <-m.closing:
				return
			case <-t.C:
			}
		}
	})
}

// expireSnapshots deletes the ready snapshots whose expiry has come.
func (m *Manager) expireSnapshots(ctx context.Context) {
	expired, err := m.store.ExpiredSnapshots(ctx, m.now())
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("snapshot expiry", "err", err)
		}
		return
	}
	for _, sn := range expired {
		if ctx.Err() != nil {
			return
		}
		if err := m.deleteSnapshot(ctx, sn.ID); err != nil {
			m.log.Error("delete an expired snapshot", "snapshot", sn.ID, "err", err)
			continue
		}
		m.log.Info("snapshot expired and deleted", "snapshot", sn.ID, "key", sn.KeyID, "expiresAt", sn.ExpiresAt)
	}
}
