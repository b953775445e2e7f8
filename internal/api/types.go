package api

import (
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/internal/version"
)

// CreateSandboxRequest is the body of POST /v1/sandboxes. Every field is
// optional; zero values take the server's defaults.
type CreateSandboxRequest struct {
	// Template names the root filesystem (default "base").
	Template string `json:"template"`
	// TimeoutSeconds is the lease: the sandbox is destroyed this many seconds
	// after creation unless extended (default 300, maximum set by the server).
	TimeoutSeconds int64 `json:"timeoutSeconds"`
	// CPU is the number of vCPUs (default 1; fractions allowed, minimum 0.05).
	CPU float64 `json:"cpu"`
	// MemoryMiB is the memory size in MiB (default 512).
	MemoryMiB int64 `json:"memoryMiB"`
	// DiskMiB caps writes to the root filesystem, in MiB (default 2048).
	DiskMiB int64 `json:"diskMiB"`
	// Env is set in every command's environment.
	Env map[string]string `json:"env"`
	// Metadata is free-form labels, returned as given and usable as list filters.
	Metadata map[string]string `json:"metadata"`
	// Network is the network policy (default {"internet": false}); it can
	// change while the sandbox runs (PUT /v1/sandboxes/{id}/network).
	Network *NetworkPolicy `json:"network,omitempty"`
	// Secrets names stored secrets (POST /v1/secrets) the sandbox may use:
	// each is an environment variable holding a placeholder that the egress
	// proxy replaces with the value in requests to the secret's hosts.
	Secrets []string `json:"secrets,omitempty"`
	// MaxCostMicros refuses the create (400 cost_cap) if the first lease,
	// with every vCPU busy throughout plus the memory size, could cost more
	// (micro-dollars; 0 or absent: no cap).
	MaxCostMicros int64 `json:"maxCostMicros,omitempty"`
	// OnLeaseEnd is what the lease end does: "stop" (default: the sandbox
	// is destroyed) or "pause" (it is saved whole and kept, paused, until
	// resumed or the server's paused retention ends).
	OnLeaseEnd string `json:"onLeaseEnd,omitempty"`
	// AutoResume makes a request to the sandbox while it is paused (exec,
	// processes, files, network, timeout) resume it first (default: true
	// when onLeaseEnd is "pause", else false).
	AutoResume *bool `json:"autoResume,omitempty"`
	// Exec, when set, is a first command to run in the new sandbox: the
	// body of POST /v1/sandboxes/{id}/exec, checked as that is (bad input
	// is a 400 before anything boots). The answer is then the sandbox and
	// the command's answer (SandboxEvent then exec events with Accept:
	// application/x-ndjson, else SandboxWithResult), in one request.
	Exec *agentapi.ExecRequest `json:"exec,omitempty"`
	// Volumes are the creating key's volumes (POST /v1/volumes) to mount,
	// each at its path, read-write unless readOnly; at most 8. A sandbox
	// with volumes starts cold (never from the warm pool).
	Volumes []VolumeMount `json:"volumes,omitempty"`
}

// Sandbox is a sandbox as the API returns it.
type Sandbox struct {
	ID string `json:"id"`
	// State is "starting", "running", "paused" or "stopped".
	State    string `json:"state"`
	Template string `json:"template"`
	// CreatedAt and LeaseEndsAt are RFC 3339 UTC times.
	CreatedAt   time.Time `json:"createdAt"`
	LeaseEndsAt time.Time `json:"leaseEndsAt"`
	// EndedAt and EndReason ("deleted", "lease_ended", "failed") are set once stopped.
	EndedAt   *time.Time        `json:"endedAt,omitempty"`
	EndReason string            `json:"endReason,omitempty"`
	CPU       float64           `json:"cpu"`
	MemoryMiB int64             `json:"memoryMiB"`
	DiskMiB   int64             `json:"diskMiB"`
	Metadata  map[string]string `json:"metadata"`
	// CostMicros is what the sandbox has cost so far, in micro-dollars, as of
	// its last metering sample (a few seconds ago at most while it runs).
	CostMicros int64 `json:"costMicros"`
	// OnLeaseEnd is what the lease end does: "stop" or "pause".
	OnLeaseEnd string `json:"onLeaseEnd"`
	// AutoResume says whether a request while paused resumes the sandbox.
	AutoResume bool `json:"autoResume"`
	// PausedAt is when the sandbox was paused (RFC 3339; set while paused).
	PausedAt *time.Time `json:"pausedAt,omitempty"`
	// ImageBytes is the size of a paused sandbox's image on the host, in
	// bytes (its memory, processes and written files; set while paused).
	ImageBytes int64 `json:"imageBytes,omitempty"`
	// Volumes are the volumes it mounts (absent: none).
	Volumes []VolumeMount `json:"volumes,omitempty"`
}

// SandboxList is the body of GET /v1/sandboxes.
type SandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// SetTimeoutRequest is the body of POST /v1/sandboxes/{id}/timeout: the lease
// then ends TimeoutSeconds from now.
type SetTimeoutRequest struct {
	TimeoutSeconds int64 `json:"timeoutSeconds"`
	// OnLeaseEnd, when set, changes what the lease end does: "stop" or
	// "pause".
	OnLeaseEnd string `json:"onLeaseEnd,omitempty"`
	// AutoResume, when set, changes whether a request while paused resumes
	// the sandbox (when onLeaseEnd is given without it: true for "pause").
	AutoResume *bool `json:"autoResume,omitempty"`
}

// ResumeRequest is the optional body of POST /v1/sandboxes/{id}/resume.
type ResumeRequest struct {
	// TimeoutSeconds is the resumed sandbox's lease (default: the lease it
	// was last given at create or set-timeout).
	TimeoutSeconds int64 `json:"timeoutSeconds,omitempty"`
}

// CreateKeyRequest is the body of POST /v1/keys.
type CreateKeyRequest struct {
	Name string `json:"name"`
	// DailyLimitMicros caps what the key's sandboxes may cost per UTC day,
	// in micro-dollars (0 or absent: no limit).
	DailyLimitMicros int64 `json:"dailyLimitMicros,omitempty"`
	// DiskQuotaMiB bounds, in MiB, the host disk the key's sandboxes hold:
	// its running and paused sandboxes' diskMiB plus its pause images'
	// bytes (0 or absent: the server's default for a tenant key, none for
	// an administrator's).
	DiskQuotaMiB int64 `json:"diskQuotaMiB,omitempty"`
	// PausedQuota bounds how many of the key's sandboxes may be paused at
	// once, a count (0 or absent: as DiskQuotaMiB).
	PausedQuota int64 `json:"pausedQuota,omitempty"`
	// SandboxesQuota bounds how many sandboxes the key may hold at once,
	// starting, running and paused together, a count (0 or absent: as
	// DiskQuotaMiB).
	SandboxesQuota int64 `json:"sandboxesQuota,omitempty"`
}

// Key is an API key as listed; Secret is set only in the answer to its creation.
type Key struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	CreatedAt time.Time  `json:"createdAt"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
	Secret    string     `json:"secret,omitempty"`
	// DailyLimitMicros is the key's spending limit per UTC day (absent: none).
	DailyLimitMicros int64 `json:"dailyLimitMicros,omitempty"`
	// DiskQuotaMiB is the disk quota that binds the key, in MiB (its own,
	// or the server's default for a tenant key; absent: none).
	DiskQuotaMiB int64 `json:"diskQuotaMiB,omitempty"`
	// PausedQuota is the paused sandboxes quota that binds the key, a
	// count (absent: none).
	PausedQuota int64 `json:"pausedQuota,omitempty"`
	// SandboxesQuota is the sandboxes quota (starting, running and paused
	// together) that binds the key, a count (absent: none).
	SandboxesQuota int64 `json:"sandboxesQuota,omitempty"`
}

// KeyList is the body of GET /v1/keys.
type KeyList struct {
	Keys []Key `json:"keys"`
}

// Template is a template as listed.
type Template struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	// SizeBytes is the root filesystem's size on disk.
	SizeBytes int64 `json:"sizeBytes"`
	// Origin is where a template made from an image came from; absent for
	// templates built from a recipe.
	Origin *TemplateOrigin `json:"origin,omitempty"`
}

// TemplateList is the body of GET /v1/templates.
type TemplateList struct {
	Templates []Template `json:"templates"`
	// Note, when set, says why the list may be incomplete (a Kubernetes
	// server whose registry refuses its catalog API lists only the
	// templates it has used; GET /v1/templates/NAME finds any). Also in
	// the Withruntime-Templates-Note header.
	Note string `json:"note,omitempty"`
}

func toSandbox(sb store.Sandbox) Sandbox {
	meta := sb.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	return Sandbox{
		ID: sb.ID, State: sb.State, Template: sb.Template,
		CreatedAt: sb.CreatedAt, LeaseEndsAt: sb.LeaseEndsAt, EndedAt: sb.EndedAt, EndReason: sb.EndReason,
		CPU: sb.CPU, MemoryMiB: sb.MemoryMiB, DiskMiB: sb.DiskMiB, Metadata: meta,
		OnLeaseEnd: sb.OnLeaseEnd, AutoResume: sb.AutoResume, PausedAt: sb.PausedAt, ImageBytes: sb.ImageBytes,
		Volumes: toMounts(sb.Volumes),
	}
}

func toKey(k store.Key) Key {
	return Key{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

// withQuotas sets the key record's limit and the quotas that bind it.
func (k Key) withQuotas(dailyLimitMicros int64, q store.KeyQuotas) Key {
	k.DailyLimitMicros = dailyLimitMicros
	k.DiskQuotaMiB, k.PausedQuota, k.SandboxesQuota = q.DiskMiB, q.PausedSandboxes, q.Sandboxes
	return k
}

// quotas are the key quotas the request asks for.
func (req *CreateKeyRequest) quotas() store.KeyQuotas {
	return store.KeyQuotas{DiskMiB: req.DiskQuotaMiB, PausedSandboxes: req.PausedQuota, Sandboxes: req.SandboxesQuota}
}

// Health is GET /v1/health: the server answers, and how its warm pool
// stands.
type Health struct {
	// OK is always true while the server answers.
	OK bool `json:"ok"`
	// Version is the answering server's build (internal/version).
	Version version.Info `json:"version"`
	// Pool is, per pooled template, how many booted sandboxes the warm
	// pool keeps (size) and has waiting now (ready). Absent when the server
	// runs without a pool.
	Pool map[string]PoolStatus `json:"pool,omitempty"`
	// Leader is the leader election among the servers that share a store
	// (serve --leader-election). Absent without leader election.
	Leader *LeaderStatus `json:"leader,omitempty"`
}

// LeaderStatus is the leader election as the answering server sees it.
type LeaderStatus struct {
	// Identity is the answering server's identity in the election.
	Identity string `json:"identity"`
	// Leader is the leader's identity as last observed ("" while none is
	// known, e.g. just after a leader released the Lease).
	Leader string `json:"leader"`
	// Leading is true while the answering server is the leader and runs
	// the leader-only work (lease ends, warm pool, metering sampler).
	Leading bool `json:"leading"`
}

// PoolStatus is one template's warm pool.
type PoolStatus struct {
	// Size is how many booted sandboxes the pool keeps ready now: it
	// follows the recent create rate, between min and max.
	Size int `json:"size"`
	// Ready is how many are booted and waiting now.
	Ready int `json:"ready"`
	// Min is the least it keeps (serve --pool-size).
	Min int `json:"min"`
	// Max is the most it keeps after a burst (serve --pool-max).
	Max int `json:"max"`
}
