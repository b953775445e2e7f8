package withruntime

import (
	"context"
	"net/url"
	"time"
)

// How a usage report groups its rows (UsageQuery.GroupBy).
const (
	// GroupByDay gives one row per UTC day; UsageRow.Group is "YYYY-MM-DD".
	GroupByDay = "day"
	// GroupBySandbox gives one row per sandbox; Group is its id ("sbx_...").
	GroupBySandbox = "sandbox"
	// GroupByKey gives one row per API key; Group is the key's id ("key_...").
	GroupByKey = "key"
)

// UsageQuery selects a usage report. Zero values take the server's
// defaults: the last 30 days (from midnight UTC), grouped by day.
type UsageQuery struct {
	// From is the start of the window, exclusive (zero: 30 days before To,
	// at midnight UTC).
	From time.Time
	// To is the end of the window, inclusive (zero: now).
	To time.Time
	// GroupBy is GroupByDay (the default), GroupBySandbox or GroupByKey;
	// anything else is ErrBadRequest.
	GroupBy string
}

// UsageRow is the metered usage and cost of one group of sandboxes (a
// day, a sandbox or a key) within the window. The figures come from the
// server's ledger: every running sandbox is sampled every few seconds (the
// server's --meter-interval) and once when it stops; a sampled interval
// counts in the window and day in which it ends.
type UsageRow struct {
	// Group is the UTC day ("YYYY-MM-DD"), the sandbox id or the key id,
	// as UsageQuery.GroupBy says; "total" in UsageReport.Total.
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
// configuration: serve --price-cpu, --price-memory, --cpu-floor).
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
	// sandbox's image (serve --price-storage; default 100 = $0.0001).
	StorageMicrosPerGiBHour float64 `json:"storageMicrosPerGibHour"`
}

// UsageReport is the body of GET /v1/usage: the window actually used, the
// prices, one row per group with usage in the window (sorted by Group),
// and the total over all of them.
type UsageReport struct {
	// From (exclusive) and To (inclusive) are the window, in UTC.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// GroupBy is "day", "sandbox" or "key".
	GroupBy string      `json:"groupBy"`
	Prices  UsagePrices `json:"prices"`
	Rows    []UsageRow  `json:"rows"`
	// Total covers every row; its CostMicros is rounded once from all of
	// them, so it may differ by a micro-dollar from the sum of the rows'.
	Total UsageRow `json:"total"`
	// Trial is set when the key is a trial key (`withruntime login --trial`):
	// its allowance of sandbox-hours and what is left. At 0 left, creates
	// fail with ErrSpendingLimit (429 spending_limit).
	Trial *UsageTrial `json:"trial,omitempty"`
}

// UsageTrial is a trial key's allowance of sandbox-hours (the wall time of
// all its sandboxes, ever).
type UsageTrial struct {
	AllowanceHours float64 `json:"allowanceHours"`
	UsedHours      float64 `json:"usedHours"`
	LeftHours      float64 `json:"leftHours"`
}

// Usage returns the rows of the usage report q selects: CPU-seconds,
// GiB-seconds and micro-dollars per day, sandbox or key (see UsageRow),
// sorted by group; no rows if nothing ran in the window. UsageReport also
// gives the total and the prices. Errors: ErrBadRequest (an unknown
// GroupBy, From not before To), ErrUnauthorized.
func (c *Client) Usage(ctx context.Context, q UsageQuery) ([]UsageRow, error) {
	rep, err := c.UsageReport(ctx, q)
	if err != nil {
		return nil, err
	}
	return rep.Rows, nil
}

// UsageReport returns the whole usage report q selects: its window,
// prices, rows and total (see Usage). Errors as Usage.
func (c *Client) UsageReport(ctx context.Context, q UsageQuery) (UsageReport, error) {
	v := url.Values{}
	if !q.From.IsZero() {
		v.Set("from", q.From.UTC().Format(time.RFC3339Nano))
	}
	if !q.To.IsZero() {
		v.Set("to", q.To.UTC().Format(time.RFC3339Nano))
	}
	if q.GroupBy != "" {
		v.Set("groupBy", q.GroupBy)
	}
	path := "/v1/usage"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out UsageReport
	err := c.doJSON(ctx, "GET", path, nil, &out)
	return out, err
}
