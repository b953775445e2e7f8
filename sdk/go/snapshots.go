package withruntime

import (
	"context"
	"errors"
	"net/url"

	"withruntime.dev/runtime/sdk/go/wire"
)

// Snapshots: a running sandbox saved whole (memory, processes, files)
// while it runs on, from which new sandboxes start (Options.Snapshot), and
// fork (one snapshot, many sandboxes). A snapshot belongs to the key that
// took it; its bytes count in that key's disk quota and are billed at the
// storage price until it is deleted.
type (
	// SnapshotInfo is a snapshot's record as the server returns it.
	SnapshotInfo = wire.Snapshot
	// CreateSnapshotRequest is the body of POST
	// /v1/sandboxes/{id}/snapshots; Sandbox.Snapshot builds it.
	CreateSnapshotRequest = wire.CreateSnapshotRequest
	// SnapshotList is the body of GET /v1/snapshots.
	SnapshotList = wire.SnapshotList
	// ForkRequest is the body of POST /v1/sandboxes/{id}/fork;
	// Sandbox.Fork builds it.
	ForkRequest = wire.ForkRequest
	// ForkAnswer is the server's answer to a fork (Fork gives it as a
	// ForkResult, with handles).
	ForkAnswer = wire.ForkResult
	// ForkedSandbox is one entry of a ForkAnswer.
	ForkedSandbox = wire.ForkedSandbox
)

// SnapshotOptions configures Sandbox.Snapshot. Every field is optional.
type SnapshotOptions struct {
	// Name names the snapshot among the key's own (lower-case letters,
	// digits, '.', '_', '-'; unique per key), so that Options.Snapshot
	// may give it instead of the id.
	Name string
	// Mode is "full" (default: memory, processes and files) or
	// "filesystem" (the files of the root filesystem alone, taken while
	// the sandbox runs on; a sandbox made from it boots fresh with them).
	Mode string
}

// Snapshot saves the running sandbox as a new snapshot; the sandbox runs
// on after a brief pause (a few hundred milliseconds). Commands running
// at that moment end with ErrConflict (their connections close; the
// command is killed); background processes run on. Errors: ErrConflict
// (a snapshot of that name exists; the sandbox holds what cannot be
// saved), ErrPaused (resume it first), ErrQuota and ErrNoSpace (the image
// would not fit: nothing was written), ErrNotImplemented (the server's
// driver has no snapshots), ErrLeaseEnded, ErrSandboxStopped.
func (s *Sandbox) Snapshot(ctx context.Context, opts SnapshotOptions) (SnapshotInfo, error) {
	var sn SnapshotInfo
	err := s.c.doJSON(waitFor(ctx, checkpointWait), "POST", s.path("/snapshots"),
		CreateSnapshotRequest{Name: opts.Name, Mode: opts.Mode}, &sn)
	return sn, err
}

// ForkOptions configures Sandbox.Fork: what each new sandbox gets, as in
// Options (Template, DiskMiB and Snapshot do not apply: they are the
// source's), and whether the fork's snapshot is kept.
type ForkOptions struct {
	// TimeoutSeconds, CPU (0: the source's), MemoryMiB (0: the source's;
	// at least the source's), Env, Metadata, Network, Secrets,
	// MaxCostMicros, OnLeaseEnd, PauseMode and AutoResume are as in
	// Options, for each new sandbox.
	TimeoutSeconds int64
	CPU            float64
	MemoryMiB      int64
	Env            map[string]string
	Metadata       map[string]string
	Network        *NetworkPolicy
	Secrets        []string
	MaxCostMicros  int64
	OnLeaseEnd     string
	PauseMode      string
	AutoResume     *bool
	// Mode is what the fork's snapshot holds: "full" ("", the
	// default: each new sandbox starts where the source was) or
	// "filesystem" (its files alone: each new sandbox boots fresh
	// with them, and needs at least twice their size plus 128 MiB of
	// memory).
	Mode string
	// KeepSnapshot keeps the fork's snapshot afterwards (named Name, if
	// set); otherwise the server deletes it once the sandboxes are made.
	KeepSnapshot bool
	Name         string
}

// ForkResult is what Fork made.
type ForkResult struct {
	// Snapshot is the snapshot the sandboxes were made from (deleted
	// unless SnapshotKept).
	Snapshot     SnapshotInfo
	SnapshotKept bool
	// Sandboxes[i] is the i-th new sandbox, or nil when Errors[i] says
	// why it could not be made (an *APIError).
	Sandboxes []*Sandbox
	Errors    []error
}

// Err joins the errors of the sandboxes that could not be made (nil when
// every one was).
func (r ForkResult) Err() error { return errors.Join(r.Errors...) }

// Fork snapshots the running sandbox (which runs on after a brief pause)
// and makes count sandboxes (1 to 32) from that snapshot, each with its
// own id, lease, network and secrets, each made or failed on its own
// (ForkResult.Errors). Close the new sandboxes when done. Errors (nothing
// was made): ErrBadRequest, and those of Snapshot.
func (s *Sandbox) Fork(ctx context.Context, count int, opts ForkOptions) (ForkResult, error) {
	req := ForkRequest{Count: count, TimeoutSeconds: opts.TimeoutSeconds, CPU: opts.CPU, MemoryMiB: opts.MemoryMiB,
		Env: opts.Env, Metadata: opts.Metadata, Network: opts.Network, Secrets: opts.Secrets,
		MaxCostMicros: opts.MaxCostMicros, OnLeaseEnd: opts.OnLeaseEnd, AutoResume: opts.AutoResume,
		PauseMode: opts.PauseMode, Mode: opts.Mode, KeepSnapshot: opts.KeepSnapshot, Name: opts.Name}
	var ans ForkAnswer
	if err := s.c.doJSON(waitFor(ctx, checkpointWait), "POST", s.path("/fork"), req, &ans); err != nil {
		return ForkResult{}, err
	}
	res := ForkResult{Snapshot: ans.Snapshot, SnapshotKept: ans.SnapshotKept,
		Sandboxes: make([]*Sandbox, len(ans.Sandboxes)), Errors: make([]error, len(ans.Sandboxes))}
	for i, f := range ans.Sandboxes {
		switch {
		case f.Sandbox != nil:
			res.Sandboxes[i] = &Sandbox{c: s.c, id: f.Sandbox.ID, info: *f.Sandbox}
		case f.Error != nil:
			res.Errors[i] = &APIError{Status: statusOfCode(f.Error.Code), Code: f.Error.Code, Message: f.Error.Message}
		default:
			res.Errors[i] = &APIError{Status: 500, Code: "internal", Message: "the server said nothing of this sandbox"}
		}
	}
	return res, nil
}

// Snapshots lists the key's snapshots (an administrator's key: every
// key's), newest first.
func (c *Client) Snapshots(ctx context.Context) ([]SnapshotInfo, error) {
	var list SnapshotList
	if err := c.doJSON(ctx, "GET", "/v1/snapshots", nil, &list); err != nil {
		return nil, err
	}
	return list.Snapshots, nil
}

// Snapshot returns one snapshot by id or name. Errors: ErrNotFound (none,
// or another key's).
func (c *Client) Snapshot(ctx context.Context, ref string) (SnapshotInfo, error) {
	var sn SnapshotInfo
	err := c.doJSON(ctx, "GET", "/v1/snapshots/"+url.PathEscape(ref), nil, &sn)
	return sn, err
}

// DeleteSnapshot deletes a snapshot (by id or name) and its image;
// sandboxes made from it run on. Errors: ErrNotFound, ErrConflict (it is
// still being taken).
func (c *Client) DeleteSnapshot(ctx context.Context, ref string) error {
	return c.doJSON(ctx, "DELETE", "/v1/snapshots/"+url.PathEscape(ref), nil, nil)
}
