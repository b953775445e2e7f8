package api

import (
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/sdk/go/wire"
)

// The public request and answer bodies are package wire's (the one Go copy
// of api/openapi.yaml's schemas, which the Go SDK imports too); these are
// their names in this package.
type (
	CreateSandboxRequest = wire.CreateSandboxRequest
	Sandbox              = wire.Sandbox
	SandboxList          = wire.SandboxList
	SandboxEvent         = wire.SandboxEvent
	SandboxWithResult    = wire.SandboxWithResult
	SetTimeoutRequest    = wire.SetTimeoutRequest
	ResumeRequest        = wire.ResumeRequest
	PauseRequest         = wire.PauseRequest
	NetworkPolicy        = wire.NetworkPolicy
	CreateSecretRequest  = wire.CreateSecretRequest
	Secret               = wire.Secret
	SecretList           = wire.SecretList

	CreateKeyRequest = wire.CreateKeyRequest
	Key              = wire.Key
	KeyList          = wire.KeyList

	Template              = wire.Template
	TemplateOrigin        = wire.TemplateOrigin
	TemplateStart         = wire.TemplateStart
	TemplateList          = wire.TemplateList
	CreateTemplateRequest = wire.CreateTemplateRequest
	TemplateEvent         = wire.TemplateEvent

	UsageReport = wire.UsageReport
	// FileURLRequest and FileURL are POST .../files/url's.
	FileURLRequest = wire.FileURLRequest
	FileURL        = wire.FileURL
	// SandboxMetrics is the body of GET /v1/sandboxes/{id}/metrics.
	SandboxMetrics = wire.SandboxMetrics
	UsageRow       = wire.UsageRow
	UsagePrices    = wire.UsagePrices
	UsageTrial     = wire.UsageTrial

	Health       = wire.ServerHealth
	LeaderStatus = wire.LeaderStatus
	PoolStatus   = wire.PoolStatus

	DeviceAuthorizeRequest = wire.DeviceAuthorizeRequest
	DeviceAuthorization    = wire.DeviceAuthorization
	DeviceTokenRequest     = wire.DeviceTokenRequest
	DeviceToken            = wire.DeviceToken
	DeviceRequest          = wire.DeviceRequest
	DeviceApproveRequest   = wire.DeviceApproveRequest
	DeviceDenyRequest      = wire.DeviceDenyRequest

	CreateSnapshotRequest = wire.CreateSnapshotRequest
	Snapshot              = wire.Snapshot
	SnapshotList          = wire.SnapshotList
	ForkRequest           = wire.ForkRequest
	ForkResult            = wire.ForkResult
	ForkedSandbox         = wire.ForkedSandbox
)

func toSandbox(sb store.Sandbox) Sandbox {
	meta := sb.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	out := Sandbox{
		ID: sb.ID, State: sb.State, Template: sb.Template,
		CreatedAt: sb.CreatedAt, LeaseEndsAt: sb.LeaseEndsAt, EndedAt: sb.EndedAt, EndReason: sb.EndReason,
		CPU: sb.CPU, MemoryMiB: sb.MemoryMiB, DiskMiB: sb.DiskMiB, Metadata: meta,
		OnLeaseEnd: sb.OnLeaseEnd, PauseMode: orFull(sb.LeasePauseMode), AutoResume: sb.AutoResume,
		PausedAt: sb.PausedAt, ImageBytes: sb.ImageBytes, Volumes: toMounts(sb.Volumes),
	}
	if sb.State == store.StatePaused {
		out.ImageMode = orFull(sb.PauseMode)
	}
	return out
}

// orFull is a pause mode, "" being store.PauseFull.
func orFull(mode string) string {
	if mode == "" {
		return store.PauseFull
	}
	return mode
}

func toKey(k store.Key) Key {
	return Key{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

// withQuotas sets the key record's limit and the quotas that bind it.
func withQuotas(k Key, dailyLimitMicros int64, q store.KeyQuotas) Key {
	k.DailyLimitMicros = dailyLimitMicros
	k.DiskQuotaMiB, k.PausedQuota, k.SandboxesQuota = q.DiskMiB, q.PausedSandboxes, q.Sandboxes
	return k
}

// quotas are the key quotas the request asks for.
func (req *createKeyRequest) quotas() store.KeyQuotas {
	return store.KeyQuotas{DiskMiB: req.DiskQuotaMiB, PausedSandboxes: req.PausedQuota, Sandboxes: req.SandboxesQuota}
}
