package wire

import "time"

// CreateSandboxRequest is the body of POST /v1/sandboxes. Every field is
// optional; zero values take the server's defaults.
type CreateSandboxRequest struct {
	// Template names the root filesystem (default "base").
	Template string `json:"template"`
	// TimeoutSeconds is the lease, in seconds: the sandbox is destroyed
	// this long after creation unless extended (default 300, maximum set
	// by the server).
	TimeoutSeconds int64 `json:"timeoutSeconds"`
	// CPU is the number of vCPUs (default 1; fractions allowed, minimum
	// 0.05).
	CPU float64 `json:"cpu"`
	// MemoryMiB is the memory size in MiB (default 512).
	MemoryMiB int64 `json:"memoryMiB"`
	// DiskMiB caps writes to the root filesystem, in MiB (default 2048).
	DiskMiB int64 `json:"diskMiB"`
	// Env is set in every command's environment.
	Env map[string]string `json:"env"`
	// Metadata is free-form labels, returned as given and usable as list
	// filters.
	Metadata map[string]string `json:"metadata"`
	// Network is the network policy (default {"internet": false}); it can
	// change while the sandbox runs (PUT /v1/sandboxes/{id}/network).
	Network *NetworkPolicy `json:"network,omitempty"`
	// Secrets names stored secrets (POST /v1/secrets) the sandbox may use:
	// each is an environment variable holding a placeholder that the
	// egress proxy replaces with the value in requests to the secret's
	// hosts.
	Secrets []string `json:"secrets,omitempty"`
	// MaxCostMicros refuses the create (400 cost_cap) if the first lease,
	// with every vCPU busy throughout plus the memory size, could cost
	// more, in micro-dollars (0 or absent: no cap).
	MaxCostMicros int64 `json:"maxCostMicros,omitempty"`
	// OnLeaseEnd is what the lease end does: "stop" (default: the sandbox
	// is destroyed) or "pause" (it is saved whole and kept, paused, until
	// resumed or the server's paused retention ends).
	OnLeaseEnd string `json:"onLeaseEnd,omitempty"`
	// PauseMode is what a lease-end pause saves: "full" (default: memory,
	// processes and files; the resume continues where it was) or
	// "filesystem" (the root filesystem's files alone; its processes end,
	// its memory is freed, and the resume boots it fresh with those files).
	PauseMode string `json:"pauseMode,omitempty"`
	// AutoResume makes a request to the sandbox while it is paused (exec,
	// processes, files, network, timeout) resume it first (default: true
	// when OnLeaseEnd is "pause", else false).
	AutoResume *bool `json:"autoResume,omitempty"`
	// Snapshot, when set, starts the sandbox from that snapshot (its id,
	// or its name among the key's snapshots) instead of booting the
	// template: its processes run on where the snapshot was taken, with
	// their memory and files. Template and DiskMiB are then the
	// snapshot's (if given, they must be the same), MemoryMiB at least
	// its memory (default: the same) and CPU by default its source's.
	Snapshot string `json:"snapshot,omitempty"`
	// Exec, when set, is a first command to run in the new sandbox: the
	// body of POST /v1/sandboxes/{id}/exec, checked as that is (bad input
	// is a 400 before anything boots). The answer is then the sandbox and
	// the command's answer (SandboxEvent then exec events with Accept:
	// application/x-ndjson, else SandboxWithResult), in one request.
	Exec *ExecRequest `json:"exec,omitempty"`
	// Volumes are the creating key's volumes (POST /v1/volumes) to mount,
	// each at its path, read-write unless readOnly; at most 8. A sandbox
	// with volumes starts cold (never from the warm pool).
	Volumes []VolumeMount `json:"volumes,omitempty"`
}

// Sandbox is a sandbox's record as the server returns it.
type Sandbox struct {
	// ID is the sandbox's id ("sbx_...").
	ID string `json:"id"`
	// State is "starting", "running", "paused" or "stopped".
	State string `json:"state"`
	// Template is the template the sandbox started from.
	Template string `json:"template"`
	// CreatedAt and LeaseEndsAt are UTC. The server destroys (or pauses,
	// see OnLeaseEnd) the sandbox at LeaseEndsAt unless the lease is
	// extended (POST /v1/sandboxes/{id}/timeout).
	CreatedAt   time.Time `json:"createdAt"`
	LeaseEndsAt time.Time `json:"leaseEndsAt"`
	// EndedAt and EndReason ("deleted", "lease_ended", "failed",
	// "out_of_memory", "spending_limit") are set once the sandbox is
	// stopped.
	EndedAt   *time.Time `json:"endedAt,omitempty"`
	EndReason string     `json:"endReason,omitempty"`
	// CPU is in vCPUs, MemoryMiB and DiskMiB in MiB (2^20 bytes).
	CPU       float64 `json:"cpu"`
	MemoryMiB int64   `json:"memoryMiB"`
	DiskMiB   int64   `json:"diskMiB"`
	// Metadata is the labels given at create ({} when none).
	Metadata map[string]string `json:"metadata"`
	// CostMicros is what the sandbox has cost so far, in micro-dollars
	// (1 USD = 1,000,000), as of its last metering sample (every few
	// seconds while it runs, and once when it stops): CPU used (at least
	// the CPU floor over its life) plus memory size × time, at the
	// server's prices, rounded once. It is the figure GET /v1/usage
	// reports for the sandbox. A create answers 0 (nothing is metered
	// yet). A paused sandbox is billed its image's size × time at the
	// storage price, nothing else.
	CostMicros int64 `json:"costMicros"`
	// OnLeaseEnd is what the lease end does: "stop" or "pause".
	OnLeaseEnd string `json:"onLeaseEnd"`
	// PauseMode is what a lease-end pause saves: "full" or "filesystem"
	// (see CreateSandboxRequest.PauseMode).
	PauseMode string `json:"pauseMode"`
	// AutoResume says whether a request while paused resumes the sandbox.
	AutoResume bool `json:"autoResume"`
	// PausedAt is when the sandbox was paused (UTC; set while paused).
	PausedAt *time.Time `json:"pausedAt,omitempty"`
	// ImageBytes is the size of a paused sandbox's image on the host, in
	// bytes (its memory, processes and written files; set while paused).
	ImageBytes int64 `json:"imageBytes,omitempty"`
	// ImageMode is what a paused sandbox's image holds (set while paused):
	// "full" (memory, processes, files: the resume continues where it was)
	// or "filesystem" (the root filesystem's files: the resume boots it
	// fresh, no process of before runs).
	ImageMode string `json:"imageMode,omitempty"`
	// Volumes are the volumes it mounts (absent: none).
	Volumes []VolumeMount `json:"volumes,omitempty"`
}

// SandboxList is the body of GET /v1/sandboxes.
type SandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// SandboxEvent is the first line of the NDJSON answer to a create with a
// first command: the created sandbox. The command's events (those of a
// streamed POST /v1/sandboxes/{id}/exec: start, stdout, stderr, then exit
// or error) follow it.
type SandboxEvent struct {
	// Type is "sandbox".
	Type string `json:"type"`
	// Sandbox is the created sandbox.
	Sandbox Sandbox `json:"sandbox"`
}

// SandboxWithResult is the JSON answer (201) to a create with a first
// command: the created sandbox and how the command ended. Exactly one of
// Result and Error is set: Error when the command could not run (a cwd
// that does not exist, an unknown program, a sandbox that died); the
// sandbox exists either way, and is the caller's to delete.
type SandboxWithResult struct {
	Sandbox Sandbox      `json:"sandbox"`
	Result  *ExecResult  `json:"result,omitempty"`
	Error   *ErrorDetail `json:"error,omitempty"`
}

// SetTimeoutRequest is the body of POST /v1/sandboxes/{id}/timeout: the
// lease then ends TimeoutSeconds from now.
type SetTimeoutRequest struct {
	// TimeoutSeconds is the new lease, in seconds from now.
	TimeoutSeconds int64 `json:"timeoutSeconds"`
	// OnLeaseEnd, when set, changes what the lease end does: "stop" or
	// "pause".
	OnLeaseEnd string `json:"onLeaseEnd,omitempty"`
	// PauseMode, when set, changes what a lease-end pause saves: "full"
	// or "filesystem" (see CreateSandboxRequest.PauseMode).
	PauseMode string `json:"pauseMode,omitempty"`
	// AutoResume, when set, changes whether a request while paused resumes
	// the sandbox (when OnLeaseEnd is given without it: true for "pause").
	AutoResume *bool `json:"autoResume,omitempty"`
}

// PauseRequest is the optional body of POST /v1/sandboxes/{id}/pause.
type PauseRequest struct {
	// Mode is what the pause saves: "full" (default: memory, processes and
	// files; the resume continues where the sandbox was) or "filesystem"
	// (the root filesystem's files alone, as a files-only snapshot: its
	// processes end and its memory is freed at once; the resume boots it
	// fresh with the same id and those files, and no process of before
	// runs; /tmp and /dev/shm start empty, volumes are mounted again). A
	// filesystem pause answers 409 when the files' archive would pass the
	// sandbox's disk size (a sparse file), and 501 on a driver without it.
	Mode string `json:"mode,omitempty"`
}

// ResumeRequest is the optional body of POST /v1/sandboxes/{id}/resume.
type ResumeRequest struct {
	// TimeoutSeconds is the resumed sandbox's lease, in seconds (0 or
	// absent: the lease it was last given at create or set-timeout).
	TimeoutSeconds int64 `json:"timeoutSeconds,omitempty"`
}
