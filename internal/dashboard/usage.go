package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"time"

	"withruntime.dev/runtime/internal/api"
)

// series is one key's figures over a chart's buckets.
type series struct {
	Label string    `json:"label"`
	Cost  []float64 `json:"cost"` // dollars
	CPU   []float64 `json:"cpu"`  // CPU-seconds
	GiB   []float64 `json:"gib"`  // GiB-seconds
}

// chart is one time axis (bucket starts, Unix seconds) and a series per key.
type chart struct {
	X      []int64  `json:"x"`
	Series []series `json:"series"`
}

type usageData struct {
	Charts struct {
		Hourly chart `json:"hourly"`
		Daily  chart `json:"daily"`
	}
	Totals []usageTotal
	Total  api.UsageRow
	Trial  *api.UsageTrial
	From   time.Time
}

type usageTotal struct {
	Key  string
	Name string
	Row  api.UsageRow
}

// Hours and days the charts cover.
const (
	chartHours = 24
	chartDays  = 14
)

// usage shows cost, CPU-seconds and GiB-seconds per hour (last 24 h) and
// per day (last 14 days), a series per key, and the totals of the last 30
// days. Every figure is GET /v1/usage of the signed-in key, one call per
// bucket grouped by key: the API decides whose usage the key sees.
func (d *Dashboard) usage(w http.ResponseWriter, r *http.Request, s *signed) {
	v := s.view("Usage", "usage")
	data := &usageData{}
	v.Data = data
	names := d.keyNames(r.Context(), s)
	now := d.cfg.Now().UTC()
	hour := now.Truncate(time.Hour)
	day := now.Truncate(24 * time.Hour)
	var err error
	if data.Charts.Hourly, err = d.usageChart(r.Context(), s, names, hour.Add(-(chartHours-1)*time.Hour), time.Hour, chartHours); err == nil {
		data.Charts.Daily, err = d.usageChart(r.Context(), s, names, day.Add(-(chartDays-1)*24*time.Hour), 24*time.Hour, chartDays)
	}
	if err == nil {
		var rep api.UsageReport
		if err = d.call(r.Context(), s.key, "GET", "/v1/usage?groupBy=key", nil, &rep); err == nil {
			data.From, data.Total, data.Trial = rep.From, rep.Total, rep.Trial
			for _, row := range rep.Rows {
				data.Totals = append(data.Totals, usageTotal{Key: row.Group, Name: names[row.Group], Row: row})
			}
		}
	}
	if err != nil {
		v.Error = err.Error()
	}
	d.render(w, http.StatusOK, "usage", v)
}

// keyNames maps key ids to names: every key's for an administrator (the
// API lists keys only to them), the key's own otherwise.
func (d *Dashboard) keyNames(ctx context.Context, s *signed) map[string]string {
	names := map[string]string{s.key.ID: s.key.Name}
	var kl api.KeyList
	if s.admin && d.call(ctx, s.key, "GET", "/v1/keys", nil, &kl) == nil {
		for _, k := range kl.Keys {
			names[k.ID] = k.Name
		}
	}
	return names
}

func (d *Dashboard) usageChart(ctx context.Context, s *signed, names map[string]string, start time.Time, step time.Duration, n int) (chart, error) {
	c := chart{X: make([]int64, n)}
	byKey := map[string]*series{}
	for i := range n {
		from := start.Add(time.Duration(i) * step)
		c.X[i] = from.Unix()
		q := url.Values{"groupBy": {"key"}, "from": {from.Format(time.RFC3339)}, "to": {from.Add(step).Format(time.RFC3339)}}
		var rep api.UsageReport
		if err := d.call(ctx, s.key, "GET", "/v1/usage?"+q.Encode(), nil, &rep); err != nil {
			return chart{}, err
		}
		for _, row := range rep.Rows {
			sr := byKey[row.Group]
			if sr == nil {
				label := row.Group
				if name := names[row.Group]; name != "" {
					label = name + " (" + row.Group + ")"
				}
				sr = &series{Label: label, Cost: make([]float64, n), CPU: make([]float64, n), GiB: make([]float64, n)}
				byKey[row.Group] = sr
			}
			sr.Cost[i] = float64(row.CostMicros) / 1e6
			sr.CPU[i] = row.CPUSeconds
			sr.GiB[i] = row.GiBSeconds
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	c.Series = []series{}
	for _, k := range keys {
		c.Series = append(c.Series, *byKey[k])
	}
	return c, nil
}
