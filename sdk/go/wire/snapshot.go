package wire

import "time"

// CreateSnapshotRequest is the optional body of POST
// /v1/sandboxes/{id}/snapshots.
type CreateSnapshotRequest struct {
	// Name, when set, names the snapshot among the key's own (1 to 63
	// lower-case letters, digits, '.', '_' or '-'; unique per key; not
	// starting with "snap_"); creates may then name it instead of its id.
	Name string `json:"name,omitempty"`
	// Mode is what the snapshot holds: "full" (default: memory, processes
	// and files) or "filesystem" (the files of the root filesystem alone:
	// a sandbox made from it boots fresh with them; never /tmp, /dev/shm
	// or volumes).
	Mode string `json:"mode,omitempty"`
}

// Snapshot is a snapshot's record: a running sandbox saved whole, from
// which new sandboxes start (POST /v1/sandboxes with snapshot).
type Snapshot struct {
	// ID is the snapshot's id ("snap_" followed by 16 characters).
	ID string `json:"id"`
	// Name is the snapshot's name among its key's, if it was given one.
	Name string `json:"name,omitempty"`
	// SourceSandboxID is the sandbox it was taken of.
	SourceSandboxID string `json:"sourceSandboxId"`
	// Template is the source's template, and so every sandbox's made from
	// the snapshot.
	Template string `json:"template"`
	// Mode is what it holds: "full" (memory, processes and files) or
	// "filesystem" (the files of its root filesystem alone).
	Mode string `json:"mode"`
	// State is "creating" while its image is written, then "ready".
	State string `json:"state"`
	// Bytes is the size of its image on the host, in bytes; it counts in
	// the key's disk quota and is billed at the storage price.
	Bytes int64 `json:"bytes"`
	// CPU is the source's number of vCPUs (a create from the snapshot
	// that gives no cpu gets it).
	CPU float64 `json:"cpu"`
	// MemoryMiB is the source's memory, in MiB: a sandbox made from the
	// snapshot has at least this much.
	MemoryMiB int64 `json:"memoryMiB"`
	// DiskMiB is the source's disk cap, in MiB: a sandbox made from the
	// snapshot has exactly this.
	DiskMiB int64 `json:"diskMiB"`
	// CreatedAt is when it was taken (RFC 3339, UTC).
	CreatedAt time.Time `json:"createdAt"`
	// ExpiresAt, when set, is when the server's snapshot retention deletes
	// it (RFC 3339, UTC; within seconds after); absent: kept until deleted.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// CostMicros is what keeping it has cost so far, in micro-dollars:
	// its bytes × time at the storage price, as of the last metering
	// sample.
	CostMicros int64 `json:"costMicros"`
}

// SnapshotList is the answer of GET /v1/snapshots.
type SnapshotList struct {
	// Snapshots are the key's snapshots (an administrator's key: every
	// key's), newest first.
	Snapshots []Snapshot `json:"snapshots"`
}

// ForkRequest is the body of POST /v1/sandboxes/{id}/fork: count new
// sandboxes from one snapshot of the sandbox, each with the settings
// here (the fields a create takes; absent ones as in a create, and cpu
// and memoryMiB the source's).
type ForkRequest struct {
	// Count is how many sandboxes to make, 1 to 32.
	Count int `json:"count"`
	// Mode is what the fork's snapshot holds: "full" (default: memory,
	// processes and files; each new sandbox starts where the source was)
	// or "filesystem" (the source's root filesystem's files alone, as a
	// files-only snapshot: each new sandbox boots fresh with them, and
	// needs at least twice their size plus 128 MiB of memory).
	Mode string `json:"mode,omitempty"`
	// TimeoutSeconds is each new sandbox's lease, in seconds (0 or
	// absent: the server's default).
	TimeoutSeconds int64 `json:"timeoutSeconds,omitempty"`
	// CPU is each new sandbox's number of vCPUs (0 or absent: the
	// source's).
	CPU float64 `json:"cpu,omitempty"`
	// MemoryMiB is each new sandbox's memory in MiB, at least the
	// source's (0 or absent: the source's).
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
	// Env is added to the environment of commands started in the new
	// sandboxes (processes already running keep theirs).
	Env map[string]string `json:"env,omitempty"`
	// Metadata is each new sandbox's labels.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Network is each new sandbox's network policy (default
	// {"internet": false}: the source's is not inherited).
	Network *NetworkPolicy `json:"network,omitempty"`
	// Secrets names stored secrets each new sandbox may use, as in a
	// create.
	Secrets []string `json:"secrets,omitempty"`
	// MaxCostMicros refuses each new sandbox whose first lease could cost
	// more, in micro-dollars (0 or absent: no cap).
	MaxCostMicros int64 `json:"maxCostMicros,omitempty"`
	// OnLeaseEnd is what each new sandbox's lease end does: "stop"
	// (default) or "pause".
	OnLeaseEnd string `json:"onLeaseEnd,omitempty"`
	// AutoResume is as in a create.
	AutoResume *bool `json:"autoResume,omitempty"`
	// PauseMode is what each new sandbox's lease-end pause saves, as in a
	// create: "full" (default) or "filesystem".
	PauseMode string `json:"pauseMode,omitempty"`
	// KeepSnapshot keeps the fork's snapshot after the creates (it is
	// then the key's, billed and counted as any); otherwise it is
	// deleted.
	KeepSnapshot bool `json:"keepSnapshot,omitempty"`
	// Name names the kept snapshot (only with keepSnapshot).
	Name string `json:"name,omitempty"`
}

// ForkResult is the answer of POST /v1/sandboxes/{id}/fork.
type ForkResult struct {
	// Snapshot is the snapshot the sandboxes were made from.
	Snapshot Snapshot `json:"snapshot"`
	// SnapshotKept says the snapshot is kept (keepSnapshot); otherwise it
	// was deleted after the creates.
	SnapshotKept bool `json:"snapshotKept"`
	// Sandboxes are the count new sandboxes in order, each made or failed
	// on its own.
	Sandboxes []ForkedSandbox `json:"sandboxes"`
}

// ForkedSandbox is one of a fork's new sandboxes: exactly one of Sandbox
// and Error is set.
type ForkedSandbox struct {
	// Sandbox is the new sandbox, running.
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	// Error says why this one could not be made (the code and message a
	// create would have answered).
	Error *ErrorDetail `json:"error,omitempty"`
}
