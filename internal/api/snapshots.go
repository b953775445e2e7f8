package api

import (
	"errors"
	"net/http"
	"net/url"
	"time"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/sdk/go/wire"
)

// Snapshots and fork (sandbox/snapshot.go, fork.go). A snapshot belongs to
// the key that took it: a tenant key sees, uses and deletes only its own
// (another's answers 404 as a missing one); an administrator's key sees
// every key's. {id} of /v1/snapshots/{id} is an id or one of the caller's
// snapshot names.
func (s *Server) snapshotRoutes() {
	s.handle("POST", "/v1/sandboxes/{id}/snapshots", s.createSnapshot)
	s.handle("POST", "/v1/sandboxes/{id}/fork", s.forkSandbox)
	s.handle("GET", "/v1/snapshots", s.listSnapshots)
	s.handle("GET", "/v1/snapshots/{id}", s.getSnapshot)
	s.handle("DELETE", "/v1/snapshots/{id}", s.deleteSnapshot)
}

// snapshotScope is the request's key as the manager's SnapshotScope.
func snapshotScope(r *http.Request) sandbox.SnapshotScope {
	return sandbox.SnapshotScope{KeyID: keyFrom(r.Context()).ID, Tenant: tenantOf(r.Context())}
}

type createSnapshotRequest CreateSnapshotRequest

func (req *createSnapshotRequest) check() error {
	if err := checkName("name", req.Name); err != nil {
		return err
	}
	return checkName("mode", req.Mode)
}

// createSnapshot is POST /v1/sandboxes/{id}/snapshots (optional body
// CreateSnapshotRequest): 201 with the ready snapshot; the sandbox runs on.
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) error {
	var req createSnapshotRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	id := r.PathValue("id")
	sn, err := s.cfg.Manager.Snapshot(r.Context(), id, sandbox.SnapshotParams{KeyID: keyFrom(r.Context()).ID, Name: req.Name, Mode: req.Mode})
	if errors.Is(err, driver.ErrChannel) {
		return s.channelRefused(id, err)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, toSnapshot(sn, 0))
	return nil
}

// listSnapshots is GET /v1/snapshots (?sourceSandboxId=ID: only that
// sandbox's).
func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) error {
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return badRequest("malformed query string: %v", err)
	}
	source := ""
	for name, values := range query {
		if name != "sourceSandboxId" {
			return badRequest("unknown query parameter %q; filter with sourceSandboxId=ID", name)
		}
		if len(values) > 1 {
			return badRequest("query parameter %q is given %d times; give it once", name, len(values))
		}
		if err := checkName("sourceSandboxId", values[0]); err != nil {
			return err
		}
		source = values[0]
	}
	snaps, err := s.cfg.Manager.ListSnapshots(r.Context(), snapshotScope(r), source)
	if err != nil {
		return err
	}
	out, err := s.snapshotsOut(r, snaps...)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, SnapshotList{Snapshots: out})
	return nil
}

// getSnapshot is GET /v1/snapshots/{id}.
func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) error {
	sn, err := s.cfg.Manager.GetSnapshot(r.Context(), snapshotScope(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	out, err := s.snapshotsOut(r, sn)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out[0])
	return nil
}

// deleteSnapshot is DELETE /v1/snapshots/{id}: 204; sandboxes made from it
// run on.
func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) error {
	if err := s.cfg.Manager.DeleteSnapshot(r.Context(), snapshotScope(r), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type forkRequest ForkRequest

func (req *forkRequest) bounds(l sandbox.Limits) []bound {
	return []bound{
		intsBound("count", &req.Count, 1, sandbox.MaxForkCount, "", "sandboxes"),
		intBound("timeoutSeconds", &req.TimeoutSeconds, 1, int64(l.MaxTimeout/time.Second), "the server's default", "seconds (the server's maximum lease)"),
		floatBound("cpu", &req.CPU, minCPU, l.MaxCPU, "the source's", "vCPUs"),
		intBound("memoryMiB", &req.MemoryMiB, minMemoryMiB, l.MaxMemoryMiB, "the source's", "MiB"),
		intBound("maxCostMicros", &req.MaxCostMicros, 1, maxMicros, "no cap", "micro-dollars"),
	}
}

func (req *forkRequest) check() error {
	if req.Count == 0 {
		return badRequest("count is required: how many sandboxes to make, 1 to %d", sandbox.MaxForkCount)
	}
	if err := checkName("name", req.Name); err != nil {
		return err
	}
	c := createSandboxRequest{Env: req.Env, Metadata: req.Metadata, Secrets: req.Secrets, Network: req.Network}
	return c.check()
}

// forkSandbox is POST /v1/sandboxes/{id}/fork (ForkRequest): one snapshot
// of the sandbox, count sandboxes from it; 200 with each one's sandbox or
// error.
func (s *Server) forkSandbox(w http.ResponseWriter, r *http.Request) error {
	var req forkRequest
	if err := decode(r, &req, req.bounds(s.cfg.Limits)...); err != nil {
		return err
	}
	id := r.PathValue("id")
	ctx := r.Context()
	res, err := s.cfg.Manager.Fork(ctx, id, sandbox.ForkParams{
		Count: req.Count, Mode: req.Mode, KeepSnapshot: req.KeepSnapshot, Name: req.Name,
		Create: sandbox.CreateParams{
			KeyID: keyFrom(ctx).ID, TimeoutSeconds: req.TimeoutSeconds, CPU: req.CPU, MemoryMiB: req.MemoryMiB,
			Env: req.Env, Metadata: req.Metadata, Network: egressPolicy(req.Network), Secrets: req.Secrets,
			SecretOwner: secretOwner(ctx), MaxCostMicros: req.MaxCostMicros, OnLeaseEnd: req.OnLeaseEnd,
			AutoResume: req.AutoResume, PauseMode: req.PauseMode,
		},
	})
	if errors.Is(err, driver.ErrChannel) {
		return s.channelRefused(id, err)
	}
	if err != nil {
		return err
	}
	out := ForkResult{Snapshot: toSnapshot(res.Snapshot, 0), SnapshotKept: res.Kept, Sandboxes: make([]ForkedSandbox, len(res.Sandboxes))}
	for i, sb := range res.Sandboxes {
		if err := res.Errors[i]; err != nil {
			if isInternal(err) {
				s.cfg.Log.Error("fork: a create failed", "sandbox", id, "err", err)
			}
			out.Sandboxes[i].Error = errorDetail(err)
			continue
		}
		one := toSandbox(sb)
		out.Sandboxes[i].Sandbox = &one
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// snapshotsOut is snaps as the API answers them, with their costs.
func (s *Server) snapshotsOut(r *http.Request, snaps ...store.Snapshot) ([]Snapshot, error) {
	ids := make([]string, len(snaps))
	for i, sn := range snaps {
		ids[i] = sn.ID
	}
	costs, err := s.cfg.Manager.Costs(r.Context(), ids...)
	if err != nil {
		return nil, err
	}
	out := make([]Snapshot, len(snaps))
	for i, sn := range snaps {
		out[i] = toSnapshot(sn, costs[sn.ID])
	}
	return out, nil
}

// errorDetail is err as an answer's error would say it (code and
// message; an internal error's message points at the server log).
func errorDetail(err error) *wire.ErrorDetail {
	status, code := statusOf(err)
	msg := err.Error()
	if status == http.StatusInternalServerError {
		msg = "internal error: " + msg + " (the server log has details)"
	}
	return &wire.ErrorDetail{Code: code, Message: msg}
}

func toSnapshot(sn store.Snapshot, cost int64) Snapshot {
	return Snapshot{ID: sn.ID, Name: sn.Name, SourceSandboxID: sn.SourceID, Template: sn.Template, Mode: sn.Mode,
		State: sn.State, Bytes: sn.Bytes, CPU: sn.CPU, MemoryMiB: sn.MemoryMiB, DiskMiB: sn.DiskMiB,
		CreatedAt: sn.CreatedAt, ExpiresAt: sn.ExpiresAt, CostMicros: cost}
}
