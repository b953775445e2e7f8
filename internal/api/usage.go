package api

import (
	"context"
	"net/http"
	"time"

	"withruntime.dev/runtime/internal/metering"
	"withruntime.dev/runtime/internal/sandbox"
)

// UsageRow is one row of a usage report.
type UsageRow struct {
	// Group is the UTC day (YYYY-MM-DD), the sandbox id or the key id, or
	// "total".
	Group string `json:"group"`
	// CPUSeconds is the CPU time the sandboxes' own processes used, as the
	// host measures it (their host CPU less their isolation layer's).
	CPUSeconds float64 `json:"cpuSeconds"`
	// OverheadCPUSeconds is the host CPU time the sandboxes' isolation layer
	// (gVisor's kernel and file proxy) spent, not billed: the host's cost is
	// CPUSeconds + OverheadCPUSeconds.
	OverheadCPUSeconds float64 `json:"overheadCpuSeconds"`
	// BilledCPUSeconds is CPU time billed: per sandbox, the larger of what
	// it used and the floor (cpuFloorVcpu × its wall-clock seconds).
	BilledCPUSeconds float64 `json:"billedCpuSeconds"`
	// GiBSeconds is memory size × time running.
	GiBSeconds float64 `json:"gibSeconds"`
	// StorageGiBSeconds is paused sandboxes' image size × time paused (a
	// paused sandbox has no CPU or memory time) plus volumes' size × time
	// they existed.
	StorageGiBSeconds float64 `json:"storageGibSeconds"`
	// CostMicros is the cost in micro-dollars, rounded once from the
	// unrounded costs of the row's sandboxes.
	CostMicros int64 `json:"costMicros"`
}

// UsagePrices are the prices a report was computed with.
type UsagePrices struct {
	CPUMicrosPerVCPUHour   float64 `json:"cpuMicrosPerVcpuHour"`
	MemoryMicrosPerGiBHour float64 `json:"memoryMicrosPerGibHour"`
	CPUFloorVCPU           float64 `json:"cpuFloorVcpu"`
	// StorageMicrosPerGiBHour prices paused sandboxes' images.
	StorageMicrosPerGiBHour float64 `json:"storageMicrosPerGibHour"`
}

// UsageReport is the body of GET /v1/usage.
type UsageReport struct {
	From    time.Time   `json:"from"`
	To      time.Time   `json:"to"`
	GroupBy string      `json:"groupBy"`
	Prices  UsagePrices `json:"prices"`
	Rows    []UsageRow  `json:"rows"`
	Total   UsageRow    `json:"total"`
	// Trial is the requesting key's trial allowance, when it is a trial key.
	Trial *UsageTrial `json:"trial,omitempty"`
}

// UsageTrial is a trial key's allowance of sandbox-hours (the wall time of
// all its sandboxes, ever) and what is left; at 0 left, creates answer 429.
type UsageTrial struct {
	AllowanceHours float64 `json:"allowanceHours"`
	UsedHours      float64 `json:"usedHours"`
	LeftHours      float64 `json:"leftHours"`
}

// usage answers GET /v1/usage?from=&to=&groupBy=day|sandbox|key. from and
// to are RFC 3339 times or UTC dates (YYYY-MM-DD; to is then inclusive:
// through the end of that day). Defaults: the last 30 days, by day.
func (s *Server) usage(w http.ResponseWriter, r *http.Request) error {
	now := time.Now().UTC()
	to, from, groupBy := now, time.Time{}, sandbox.GroupByDay
	err := checkQuery(r.URL.RawQuery, map[string]queryRule{
		"from": func(name, v string) (err error) { from, err = parseWhen(name, v, false); return err },
		"to":   func(name, v string) (err error) { to, err = parseWhen(name, v, true); return err },
		"groupBy": func(name, v string) error {
			groupBy = v
			return checkName("groupBy", v)
		},
	})
	if err != nil {
		return err
	}
	if from.IsZero() {
		from = to.Add(-30 * 24 * time.Hour).Truncate(24 * time.Hour)
	}
	if !from.Before(to) {
		return badRequest("from (%s) must be before to (%s)", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	keyID := "" // every key's usage, for a key that administers the server
	if tenantOf(r.Context()) {
		keyID = keyFrom(r.Context()).ID
	}
	rows, total, err := s.cfg.Manager.Usage(r.Context(), from, to, groupBy, keyID)
	if err != nil {
		return err
	}
	p := s.cfg.Manager.Prices()
	out := UsageReport{From: from, To: to, GroupBy: groupBy, Rows: make([]UsageRow, 0, len(rows)), Total: usageRow(total),
		Prices: UsagePrices{CPUMicrosPerVCPUHour: p.CPUMicrosPerVCPUHour, MemoryMicrosPerGiBHour: p.MemoryMicrosPerGiBHour, CPUFloorVCPU: p.CPUFloorVCPU,
			StorageMicrosPerGiBHour: p.StorageMicrosPerGiBHour}}
	for _, g := range rows {
		out.Rows = append(out.Rows, usageRow(g))
	}
	if t, ok, err := s.cfg.Manager.KeyTrial(r.Context(), keyFrom(r.Context()).ID); err != nil {
		return err
	} else if ok {
		out.Trial = &UsageTrial{AllowanceHours: round3(float64(t.AllowanceSeconds) / 3600),
			UsedHours: round3(t.UsedSeconds / 3600), LeftHours: round3(t.LeftSeconds() / 3600)}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func usageRow(g sandbox.UsageGroup) UsageRow {
	return UsageRow{Group: g.Group, CPUSeconds: round3(g.CPUSeconds), OverheadCPUSeconds: round3(g.OverheadCPUSeconds),
		BilledCPUSeconds: round3(g.Cost.BilledCPUSeconds),
		GiBSeconds:       round3(g.GiBSeconds), StorageGiBSeconds: round3(g.StorageGiBSeconds), CostMicros: g.Cost.Micros()}
}

// round3 keeps measured quantities to the millisecond for display; costs
// are computed from the unrounded figures.
func round3(x float64) float64 { return float64(metering.Round(x*1000)) / 1000 }

// Usage windows lie between these times: a report's times must be
// representable in JSON (RFC 3339 has four-digit years).
var (
	earliestWhen = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	latestWhen   = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
)

// parseWhen parses the usage query parameter name: an RFC 3339 time or a
// UTC date, which is the end of that day when end is set.
func parseWhen(name, v string, end bool) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		d, derr := time.Parse(time.DateOnly, v)
		if derr != nil {
			return time.Time{}, badRequest("%s: %q is neither an RFC 3339 time (2026-01-02T15:04:05Z) nor a date (2026-01-02)", name, v)
		}
		if end {
			d = d.Add(24 * time.Hour)
		}
		t = d
	}
	t = t.UTC()
	if t.Before(earliestWhen) || t.After(latestWhen) {
		return time.Time{}, badRequest("%s: %q is out of range; give a time from %s to %s", name, v,
			earliestWhen.Format(time.RFC3339), latestWhen.Format(time.RFC3339))
	}
	return t, nil
}

// addCosts sets each sandbox's costMicros from the ledger.
func (s *Server) addCosts(ctx context.Context, sbs []Sandbox) error {
	ids := make([]string, len(sbs))
	for i := range sbs {
		ids[i] = sbs[i].ID
	}
	costs, err := s.cfg.Manager.Costs(ctx, ids...)
	if err != nil {
		return err
	}
	for i := range sbs {
		sbs[i].CostMicros = costs[sbs[i].ID]
	}
	return nil
}
