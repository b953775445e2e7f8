package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	withruntime "withruntime.dev/runtime/sdk/go"
)

// MCP checkpoints (`withruntime mcp --checkpoints`): two more tools that
// fork the session's sandbox, in the form an agent uses a fork — try
// something, and go back if it went wrong:
//
//   - runtime_checkpoint {}: a snapshot of the session's sandbox (memory,
//     processes, files; it runs on after a brief pause), answered as its
//     id. A sandbox that mounts volumes gets a files-only one (a volume is
//     never in a snapshot, and a full one cannot remount it).
//   - runtime_rollback {checkpoint}: a new sandbox made from one of the
//     session's checkpoints becomes the session's sandbox; the one it
//     replaces is destroyed. The checkpoint stays, for another rollback.
//
// A session sees only its own checkpoints (another id is refused), at
// most maxCheckpoints of them (the oldest is deleted past that), and they
// are deleted when the session ends. They count in the key's disk quota
// and are billed at the storage price while they exist.

// maxCheckpoints is the most checkpoints a session keeps.
const maxCheckpoints = 8

const (
	checkpointTool = "runtime_checkpoint"
	rollbackTool   = "runtime_rollback"
)

var checkpointSchema = json.RawMessage(`{"type":"object","properties":{},"required":[],"additionalProperties":false}`)

var rollbackSchema = json.RawMessage(`{"type":"object","properties":{"checkpoint":{"type":"string",` +
	`"description":"The id a runtime_checkpoint call answered (snap_...)."}},"required":["checkpoint"],"additionalProperties":false}`)

// addCheckpointTools adds runtime_checkpoint and runtime_rollback to srv.
func (m *mcpSandboxes) addCheckpointTools(srv *mcp.Server) {
	srv.AddTool(&mcp.Tool{Name: checkpointTool, InputSchema: checkpointSchema,
		Description: "Save the sandbox as it is now (files, running processes, memory) as a checkpoint and answer its id. " +
			"The sandbox runs on. Take one before a risky change; runtime_rollback returns to it."},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return m.checkpoint(ctx, req.Session, req.Extra), nil
		})
	srv.AddTool(&mcp.Tool{Name: rollbackTool, InputSchema: rollbackSchema,
		Description: "Return the sandbox to a checkpoint taken with runtime_checkpoint: the current sandbox is discarded " +
			"and every later call runs in a copy of the checkpoint (its files and processes as they were). " +
			"The checkpoint is kept, so you may roll back to it again."},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Checkpoint string `json:"checkpoint"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || args.Checkpoint == "" {
				return toolText(true, "checkpoint is required: the id runtime_checkpoint answered"), nil
			}
			return m.rollback(ctx, req.Session, req.Extra, args.Checkpoint), nil
		})
}

func toolText(isErr bool, format string, a ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, a...)}}, IsError: isErr}
}

// checkpoint snapshots the session's sandbox.
func (m *mcpSandboxes) checkpoint(ctx context.Context, ss *mcp.ServerSession, extra *mcp.RequestExtra) *mcp.CallToolResult {
	e := m.entry(ss, extra)
	sbx, err := m.sandbox(ctx, ss, e)
	if err != nil {
		return toolText(true, "no sandbox to checkpoint: %v", err)
	}
	opts := withruntime.SnapshotOptions{}
	if len(m.opts.Volumes) > 0 {
		opts.Mode = "filesystem"
	}
	sn, err := sbx.Snapshot(ctx, opts)
	if err != nil {
		return toolText(true, "checkpoint failed (the sandbox runs on): %v", err)
	}
	e.mu.Lock()
	e.checkpoints = append(e.checkpoints, sn.ID)
	var drop []string
	if n := len(e.checkpoints) - maxCheckpoints; n > 0 {
		drop, e.checkpoints = slices.Clone(e.checkpoints[:n]), e.checkpoints[n:]
	}
	e.mu.Unlock()
	note := ""
	for _, id := range drop {
		_ = e.c.DeleteSnapshot(context.WithoutCancel(ctx), id)
		note += fmt.Sprintf(" (checkpoint %s, the oldest, was deleted: a session keeps %d)", id, maxCheckpoints)
	}
	what := "files, processes and memory"
	if opts.Mode != "" {
		what = "files outside the volumes; a rollback starts its processes afresh"
	}
	return toolText(false, "checkpoint %s saved (%s).%s", sn.ID, what, note)
}

// rollback replaces the session's sandbox with one made from checkpoint
// id, one of the session's own.
func (m *mcpSandboxes) rollback(ctx context.Context, ss *mcp.ServerSession, extra *mcp.RequestExtra, id string) *mcp.CallToolResult {
	e := m.entry(ss, extra)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done || e.err != nil {
		return toolText(true, "the session has no sandbox: %v", e.err)
	}
	if !slices.Contains(e.checkpoints, id) {
		return toolText(true, "no checkpoint %q in this session; runtime_checkpoint answers the ids (%d kept)", id, len(e.checkpoints))
	}
	opts := m.opts
	opts.Snapshot = id
	sbx, err := e.c.Create(ctx, opts)
	if err != nil {
		return toolText(true, "rollback to %s failed; the sandbox is as it was: %v", id, err)
	}
	if e.sbx != nil {
		if err := e.sbx.Close(); err != nil {
			m.log.Warn("destroying the sandbox a rollback replaced", "id", e.sbx.ID(), "err", err)
		}
	}
	e.sbx, e.replaced = sbx, false
	return toolText(false, "rolled back to checkpoint %s: later calls run in a copy of it.", id)
}

// dropCheckpoints deletes a session's checkpoints (its end).
func (m *mcpSandboxes) dropCheckpoints(e *sessionSandbox) {
	for _, id := range e.checkpoints {
		if err := e.c.DeleteSnapshot(context.Background(), id); err != nil {
			m.log.Warn("deleting a session's checkpoint", "id", id, "err", err)
		}
	}
	e.checkpoints = nil
}
