package sandbox

import (
	"context"
	"sync"

	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// ForkParams is what a fork is asked with.
type ForkParams struct {
	// Count is how many sandboxes to make (1 to MaxForkCount).
	Count int
	// Mode is the snapshot's mode: SnapshotFull ("" means it) or
	// SnapshotFilesystem (one files-only snapshot, Count fresh boots).
	Mode string
	// Create is what each new sandbox is created with (its KeyID is the
	// caller's, which also owns the snapshot); its Snapshot, Template and
	// DiskMiB are set by the fork, and MemoryMiB, CPU at 0 take the
	// source's.
	Create CreateParams
	// KeepSnapshot keeps the fork's snapshot (named Name, if set) after
	// the creates; otherwise it is deleted once they are done.
	KeepSnapshot bool
	Name         string
}

// ForkResult is what a fork made.
type ForkResult struct {
	// Snapshot is the snapshot the sandboxes were made from (deleted
	// unless Kept).
	Snapshot store.Snapshot
	Kept     bool
	// Sandboxes[i] is the i-th new sandbox, or zero with Errors[i] saying
	// why that one failed; each succeeds or fails on its own.
	Sandboxes []store.Sandbox
	Errors    []error
}

// Fork snapshots the running sandbox id (which runs on after a brief
// pause) and makes p.Count sandboxes from that snapshot, forkParallel at a
// time. Errors: errs.Invalid for a bad count, and those of Snapshot; a
// failed create is reported in the result, not as the error.
func (m *Manager) Fork(ctx context.Context, id string, p ForkParams) (ForkResult, error) {
	if p.Count < 1 || p.Count > MaxForkCount {
		return ForkResult{}, errs.New(errs.Invalid, "count must be between 1 and %d; got %d", MaxForkCount, p.Count)
	}
	if !p.KeepSnapshot && p.Name != "" {
		return ForkResult{}, errs.New(errs.Invalid, "name %q: only a kept snapshot has a name; set keepSnapshot, or omit name", p.Name)
	}
	snap, err := m.Snapshot(ctx, id, SnapshotParams{KeyID: p.Create.KeyID, Name: p.Name, Mode: p.Mode})
	if err != nil {
		return ForkResult{}, err
	}
	res := ForkResult{Snapshot: snap, Kept: p.KeepSnapshot,
		Sandboxes: make([]store.Sandbox, p.Count), Errors: make([]error, p.Count)}
	cp := p.Create
	cp.Snapshot, cp.AnyKeysSnapshot = snap.ID, true // its own, by id
	cp.Template, cp.DiskMiB = "", 0
	sem := make(chan struct{}, forkParallel)
	var wg sync.WaitGroup
	for i := range p.Count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			res.Sandboxes[i], res.Errors[i] = m.Create(ctx, cp)
		}()
	}
	wg.Wait()
	if !p.KeepSnapshot {
		if err := m.deleteSnapshot(ctx, snap.ID); err != nil {
			m.log.Error("delete a fork's snapshot", "snapshot", snap.ID, "err", err)
		}
	}
	return res, nil
}
