package wire

import "time"

// SandboxMetrics is the body of GET /v1/sandboxes/{id}/metrics: the
// sandbox's recent resource use, oldest first.
type SandboxMetrics struct {
	// Metrics are the samples in the window asked for: one per meter
	// interval (5 s by default) while the sandbox ran, the last hour of
	// them at most, kept in the server's memory since it started sampling
	// the sandbox (a restart begins the history again), and one taken at
	// the request when the last is older than an interval. Empty for a
	// stopped sandbox.
	Metrics []SandboxMetric `json:"metrics"`
}

// SandboxMetric is one sample of a sandbox's resource use, measured by the
// host (never reported from inside the sandbox).
type SandboxMetric struct {
	// At is when the sample was taken (UTC).
	At time.Time `json:"at"`
	// CPUCount is the number of CPUs the sandbox's programs see.
	CPUCount int `json:"cpuCount"`
	// CPUUsedPercent is the CPU the sandbox's own processes used since the
	// sample before (the sandbox's start for the first), as a percentage
	// of its vCPUs (0-100); the isolation layer's share is left out, as
	// in billing.
	CPUUsedPercent float64 `json:"cpuUsedPercent"`
	// MemoryUsedBytes is the memory the sandbox holds on the host, its
	// isolation layer and a memory-backed disk included; MemoryTotalBytes
	// its memory size (memoryMiB).
	MemoryUsedBytes  int64 `json:"memoryUsedBytes"`
	MemoryTotalBytes int64 `json:"memoryTotalBytes"`
	// DiskUsedBytes is what its writes take on the host's disk (0 when
	// the driver cannot measure it, as for a memory-backed disk);
	// DiskTotalBytes its disk size (diskMiB).
	DiskUsedBytes  int64 `json:"diskUsedBytes"`
	DiskTotalBytes int64 `json:"diskTotalBytes"`
}
