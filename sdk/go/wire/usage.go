package wire

import "time"

// UsageReport is the body of GET /v1/usage: the window actually used, the
// prices, one row per group with usage in the window (sorted by Group),
// and the total over all of them.
type UsageReport struct {
	// From (exclusive) and To (inclusive) are the window, in UTC.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// GroupBy is "day", "sandbox" or "key".
	GroupBy string `json:"groupBy"`
	// Prices are the prices the report was computed with.
	Prices UsagePrices `json:"prices"`
	// Rows are the groups with usage in the window.
	Rows []UsageRow `json:"rows"`
	// Total covers every row; its CostMicros is rounded once from all of
	// them, so it may differ by a micro-dollar from the sum of the rows'.
	Total UsageRow `json:"total"`
	// Trial is set when the requesting key is a trial key: its allowance
	// of sandbox-hours and what is left. At 0 left, creates fail with 429
	// spending_limit.
	Trial *UsageTrial `json:"trial,omitempty"`
}

// UsageRow is the metered usage and cost of one group of sandboxes (a
// day, a sandbox or a key) within the window. The figures come from the
// server's ledger: every running sandbox is sampled every few seconds (the
// server's --meter-interval) and once when it stops; a sampled interval
// counts in the window and day in which it ends.
type UsageRow struct {
	// Group is the UTC day ("YYYY-MM-DD"), the sandbox id or the key id,
	// as UsageReport.GroupBy says; "total" in UsageReport.Total.
	Group string `json:"group"`
	// CPUSeconds is the CPU time the sandboxes' own processes used, in
	// CPU-seconds, as the host measures it (their host CPU less their
	// isolation layer's), to the millisecond.
	CPUSeconds float64 `json:"cpuSeconds"`
	// OverheadCPUSeconds is the host CPU time the sandboxes' isolation
	// layer (gVisor's kernel and file proxy) spent, in CPU-seconds, not
	// billed: the host's CPU cost is CPUSeconds + OverheadCPUSeconds.
	OverheadCPUSeconds float64 `json:"overheadCpuSeconds"`
	// BilledCPUSeconds is the CPU time billed, in CPU-seconds: per sandbox
	// the larger of what it used and the floor (UsagePrices.CPUFloorVCPU ×
	// its wall-clock seconds), summed.
	BilledCPUSeconds float64 `json:"billedCpuSeconds"`
	// GiBSeconds is memory size × time running, in GiB-seconds.
	GiBSeconds float64 `json:"gibSeconds"`
	// StorageGiBSeconds is paused sandboxes' image size × time paused plus
	// volumes' size × time they existed, in GiB-seconds (a paused sandbox
	// is billed no CPU and no memory; a volume's row is under its id).
	StorageGiBSeconds float64 `json:"storageGibSeconds"`
	// CostMicros is the cost in micro-dollars (1 USD = 1,000,000): billed
	// CPU, memory and paused images' storage at UsagePrices, summed
	// unrounded over the row's sandboxes and rounded once.
	CostMicros int64 `json:"costMicros"`
}

// UsagePrices are the prices a report was computed with (the server's
// configuration: serve --price-cpu, --price-memory, --price-storage,
// --cpu-floor).
type UsagePrices struct {
	// CPUMicrosPerVCPUHour is micro-dollars per vCPU-hour of CPU used
	// (reference 25,000 = $0.025).
	CPUMicrosPerVCPUHour float64 `json:"cpuMicrosPerVcpuHour"`
	// MemoryMicrosPerGiBHour is micro-dollars per GiB-hour of memory size
	// (reference 7,500 = $0.0075).
	MemoryMicrosPerGiBHour float64 `json:"memoryMicrosPerGibHour"`
	// CPUFloorVCPU is the least CPU a running sandbox is billed, in vCPUs
	// (reference 0.05).
	CPUFloorVCPU float64 `json:"cpuFloorVcpu"`
	// StorageMicrosPerGiBHour is micro-dollars per GiB-hour of a paused
	// sandbox's image (default 100 = $0.0001).
	StorageMicrosPerGiBHour float64 `json:"storageMicrosPerGibHour"`
}

// UsageTrial is a trial key's allowance of sandbox-hours (the wall time of
// all its sandboxes, ever) and what is left, in hours.
type UsageTrial struct {
	AllowanceHours float64 `json:"allowanceHours"`
	UsedHours      float64 `json:"usedHours"`
	LeftHours      float64 `json:"leftHours"`
}
