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
