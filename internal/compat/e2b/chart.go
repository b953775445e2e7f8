package e2b

import (
	"encoding/json"

	"withruntime.dev/runtime/sdk/go/wire"
)

// A result's chart and DataFrame in e2b-code-interpreter's terms: Runtime's
// wire.Chart (camelCase, superchart's charts apart) becomes the SDK's
// `chart` (snake_case; a superchart's charts are its elements), and the
// kernel's DataFrame columns (wire.DataFrameMIME) its `data`. The SDKs read
// every key of a chart's kind by name (Python: kwargs["x_ticks"]), so each
// is sent, null when Runtime has nothing for it.

// e2bChart is a chart as the SDKs read it.
func e2bChart(c wire.Chart) map[string]any {
	out := map[string]any{"type": c.Type, "title": orNull(c.Title)}
	switch c.Type {
	case "superchart":
		charts := make([]map[string]any, 0, len(c.Charts))
		for _, sub := range c.Charts {
			charts = append(charts, e2bChart(sub))
		}
		out["elements"] = charts
		return out
	case "pie":
		els := make([]map[string]any, 0, len(c.Elements))
		for _, e := range c.Elements {
			els = append(els, map[string]any{"label": e.Label, "angle": e.Angle, "radius": e.Radius})
		}
		out["elements"] = els
		return out
	}
	out["x_label"], out["y_label"] = orNull(c.XLabel), orNull(c.YLabel)
	out["x_unit"], out["y_unit"] = orNull(c.XUnit), orNull(c.YUnit)
	els := make([]map[string]any, 0, len(c.Elements))
	switch c.Type {
	case "line", "scatter":
		out["x_ticks"], out["x_tick_labels"], out["x_scale"] = values(c.XTicks), strs(c.XTickLabels), orNull(c.XScale)
		out["y_ticks"], out["y_tick_labels"], out["y_scale"] = values(c.YTicks), strs(c.YTickLabels), orNull(c.YScale)
		for _, e := range c.Elements {
			pts := make([][]json.RawMessage, 0, len(e.Points))
			for _, p := range e.Points {
				if len(p) == 2 {
					pts = append(pts, p)
				}
			}
			els = append(els, map[string]any{"label": e.Label, "points": pts})
		}
	case "bar":
		for _, e := range c.Elements {
			els = append(els, map[string]any{"label": e.Label, "group": e.Group, "value": e.Value})
		}
	case "box_and_whisker":
		for _, e := range c.Elements {
			outliers := e.Outliers
			if outliers == nil {
				outliers = []float64{}
			}
			els = append(els, map[string]any{"label": e.Label, "min": e.Min, "first_quartile": e.FirstQuartile,
				"median": e.Median, "third_quartile": e.ThirdQuartile, "max": e.Max, "outliers": outliers})
		}
	}
	out["elements"] = els
	return out
}

func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func values(v []json.RawMessage) []json.RawMessage {
	if v == nil {
		return []json.RawMessage{}
	}
	return v
}

func strs(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}
