package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	withruntime "withruntime.dev/runtime/sdk/go"
)

// A chart as runtime_run_code's text gives it, so that a model reads the
// numbers a figure plots and not only its image. The Python and
// TypeScript SDKs give the same text byte for byte (run_code_summary.golden):
//
//	display: chart line "Load"; x: "Hour" (linear); y: "Jobs [n]" (linear)
//	  "load": 3 points (x, y): (0, 5) (1, 3) (2, 8)
//	  "mon" in "tickets": 4                             (bar)
//	  "No": 324 degrees, radius 1                       (pie)
//	  "A": min 78, first quartile 85, median 88, third quartile 90, max 92, outliers 76   (box)
//
// Numbers have 6 significant digits (%g). A series shows at most
// ChartTextPoints points, evenly spread; a chart at most ChartTextElements
// elements.

// Limits of a chart's text in runtime_run_code's result.
const (
	// ChartTextPoints is how many points of a series the text shows.
	ChartTextPoints = 20
	// ChartTextElements is how many elements of a chart the text shows.
	ChartTextElements = 50
)

// chartText is the chart's lines, the first prefixed by label.
func chartText(label string, c *withruntime.Chart) string {
	var b strings.Builder
	writeChart(&b, label+": ", "  ", c)
	return b.String()
}

func writeChart(b *strings.Builder, head, indent string, c *withruntime.Chart) {
	b.WriteString(head + "chart " + c.Type)
	if c.Title != "" {
		b.WriteString(" " + quoteJSON(c.Title))
	}
	if c.Type != "pie" && c.Type != "superchart" {
		b.WriteString("; x: " + axisText(c.XLabel, c.XScale) + "; y: " + axisText(c.YLabel, c.YScale))
	}
	if c.Truncated {
		b.WriteString("; thinned to " + strconv.Itoa(withruntime.MaxChartPoints) + " points")
	}
	b.WriteString("\n")
	for i, sub := range c.Charts {
		if i == ChartTextElements {
			fmt.Fprintf(b, "%s... %d more charts\n", indent, len(c.Charts)-i)
			break
		}
		writeChart(b, indent, indent+"  ", &sub)
	}
	for i, e := range c.Elements {
		if i == ChartTextElements {
			fmt.Fprintf(b, "%s... %d more elements\n", indent, len(c.Elements)-i)
			break
		}
		b.WriteString(indent + elementText(c.Type, e) + "\n")
	}
}

func axisText(label, scale string) string {
	s := "(no label)"
	if label != "" {
		s = quoteJSON(label)
	}
	if scale != "" {
		s += " (" + scale + ")"
	}
	return s
}

func elementText(typ string, e withruntime.ChartElement) string {
	l := quoteJSON(e.Label)
	switch typ {
	case "line", "scatter":
		n := len(e.Points)
		k := min(n, ChartTextPoints)
		parts := make([]string, 0, k)
		for i := range k {
			idx := 0
			if k > 1 {
				idx = i * (n - 1) / (k - 1)
			}
			p := e.Points[idx]
			if len(p) != 2 {
				continue
			}
			parts = append(parts, "("+coordText(p[0])+", "+coordText(p[1])+")")
		}
		s := fmt.Sprintf("%s: %d points (x, y): %s", l, n, strings.Join(parts, " "))
		if k < n {
			s += fmt.Sprintf(" (%d of %d, evenly spread)", k, n)
		}
		return s
	case "bar":
		return l + " in " + quoteJSON(e.Group) + ": " + numText(e.Value)
	case "pie":
		return l + ": " + numText(e.Angle) + " degrees, radius " + numText(e.Radius)
	case "box_and_whisker":
		s := fmt.Sprintf("%s: min %s, first quartile %s, median %s, third quartile %s, max %s", l,
			numText(e.Min), numText(e.FirstQuartile), numText(e.Median), numText(e.ThirdQuartile), numText(e.Max))
		if len(e.Outliers) > 0 {
			out := make([]string, 0, len(e.Outliers))
			for i, v := range e.Outliers {
				if i == ChartTextPoints {
					out = append(out, fmt.Sprintf("and %d more", len(e.Outliers)-i))
					break
				}
				out = append(out, g6(v))
			}
			s += ", outliers " + strings.Join(out, " ")
		}
		return s
	}
	return l
}

// coordText is a point's coordinate: a number as g6, a string as it is
// (a category, a time), anything else as its JSON.
func coordText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return "null"
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return g6(f)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func numText(v *float64) string {
	if v == nil {
		return "null"
	}
	return g6(*v)
}

// g6 is v with 6 significant digits, as C's %g: "0.0634239", "1e+06".
func g6(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// quoteJSON quotes s as JSON does, without escaping HTML characters.
func quoteJSON(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
