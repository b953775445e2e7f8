package api

import (
	"context"
	"net/http"
	"time"

	"withruntime.dev/runtime/internal/metering"
	"withruntime.dev/runtime/internal/sandbox"
)

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
