package itest

// Charts: a matplotlib figure's result carries, beside its PNG, the chart
// the kernel read from the figure (wire.Chart), and a DataFrame's result
// its columns.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/sdk/go/wire"
)

// chartOf is the one result of ex with a chart, which must also carry a PNG.
func chartOf(t *testing.T, ex agentapi.Execution) *wire.Chart {
	t.Helper()
	if ex.Error != nil {
		t.Fatalf("%s: %s\n%s", ex.Error.Name, ex.Error.Value, ex.Error.Traceback)
	}
	var found *wire.Chart
	for _, r := range ex.Results {
		if r.Chart == nil {
			continue
		}
		if found != nil {
			t.Fatalf("two results with a chart (%d results)", len(ex.Results))
		}
		if _, ok := r.Data["image/png"]; !ok {
			t.Fatalf("the chart's result has no PNG beside it: %v", r.Formats())
		}
		if _, ok := r.Data[wire.ChartMIME]; ok {
			t.Fatalf("the chart's MIME type reached the client in data")
		}
		found = r.Chart
	}
	if found == nil {
		t.Fatalf("no result of %d has a chart", len(ex.Results))
	}
	return found
}

func num(t *testing.T, raw json.RawMessage) float64 {
	t.Helper()
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s is not a number: %v", raw, err)
	}
	return f
}

func TestCodeCharts(t *testing.T) {
	e := newEnv(t)
	id := e.ciSandbox(api.CreateSandboxRequest{}).ID

	t.Run("line", func(t *testing.T) {
		c := chartOf(t, e.code(id, agentapi.RunCodeRequest{Code: `
import matplotlib.pyplot as plt
xs = [0, 1, 2, 3, 4]
plt.plot(xs, [x * x for x in xs], label="squares")
plt.plot(xs, [10 - x for x in xs], label="countdown")
plt.axhline(5)  # a reference line, not data
plt.title("Growth")
plt.xlabel("Step (n)")
plt.ylabel("Value [units]")
plt.legend()
plt.show()`}))
		if c.Type != "line" || c.Title != "Growth" || c.XLabel != "Step (n)" || c.XUnit != "n" || c.YUnit != "units" ||
			c.XScale != "linear" || len(c.XTicks) == 0 || len(c.XTicks) != len(c.XTickLabels) {
			t.Fatalf("chart = %+v", c)
		}
		if len(c.Elements) != 2 || c.Elements[0].Label != "squares" || c.Elements[1].Label != "countdown" {
			t.Fatalf("elements = %+v", c.Elements)
		}
		var got []string
		for _, p := range c.Elements[0].Points {
			got = append(got, fmt.Sprintf("%g,%g", num(t, p[0]), num(t, p[1])))
		}
		if s := strings.Join(got, " "); s != "0,0 1,1 2,4 3,9 4,16" {
			t.Fatalf("squares' points = %s", s)
		}
		if p := c.Elements[1].Points[4]; num(t, p[0]) != 4 || num(t, p[1]) != 6 {
			t.Fatalf("countdown's last point = %s", p)
		}
	})

	t.Run("bar", func(t *testing.T) {
		c := chartOf(t, e.code(id, agentapi.RunCodeRequest{Code: `
import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.bar(["north", "south", "east"], [12.5, 7, 3], label="rain")
ax.set_title("Rain by region")
ax.set_ylabel("Rain (mm)")
plt.show()`}))
		if c.Type != "bar" || c.Title != "Rain by region" || c.YUnit != "mm" {
			t.Fatalf("chart = %+v", c)
		}
		var got []string
		for _, el := range c.Elements {
			if el.Value == nil || el.Group != "rain" {
				t.Fatalf("bar %+v", el)
			}
			got = append(got, fmt.Sprintf("%s=%g", el.Label, *el.Value))
		}
		if s := strings.Join(got, " "); s != "north=12.5 south=7 east=3" {
			t.Fatalf("bars = %s", s)
		}
	})

	t.Run("horizontal bars and a box plot in one figure", func(t *testing.T) {
		c := chartOf(t, e.code(id, agentapi.RunCodeRequest{Code: `
import matplotlib.pyplot as plt
fig, (a, b) = plt.subplots(1, 2)
fig.suptitle("Two")
a.barh(["x", "y"], [3, 5])
a.set_ylabel("Letter")
b.boxplot([[1, 2, 3, 4, 5, 40]], labels=["only"])
plt.show()`}))
		if c.Type != "superchart" || c.Title != "Two" || len(c.Charts) != 2 {
			t.Fatalf("chart = %+v", c)
		}
		bars, box := c.Charts[0], c.Charts[1]
		if bars.Type != "bar" || bars.XLabel != "Letter" || len(bars.Elements) != 2 || bars.Elements[1].Label != "y" || *bars.Elements[1].Value != 5 {
			t.Fatalf("bars = %+v", bars)
		}
		if box.Type != "box_and_whisker" || len(box.Elements) != 1 {
			t.Fatalf("box = %+v", box)
		}
		el := box.Elements[0]
		if el.Label != "only" || *el.Median != 3.5 || *el.Min != 1 || *el.Max != 5 || len(el.Outliers) != 1 || el.Outliers[0] != 40 {
			t.Fatalf("box = %+v", el)
		}
	})

	t.Run("a dataframe's columns", func(t *testing.T) {
		ex := e.code(id, agentapi.RunCodeRequest{Code: "import pandas as pd\npd.DataFrame({'n': [1, 2], 'x': [0.5, None], 's': ['a', 'b']})"})
		var cols map[string][]any
		for _, r := range ex.Results {
			if raw, ok := r.Data[wire.DataFrameMIME]; ok {
				if err := json.Unmarshal(raw, &cols); err != nil {
					t.Fatal(err)
				}
			}
		}
		if fmt.Sprint(cols) != "map[n:[1 2] s:[a b] x:[0.5 <nil>]]" {
			t.Fatalf("columns = %v (%+v)", cols, ex.Results)
		}
	})

	t.Run("a figure without data has no chart", func(t *testing.T) {
		ex := e.code(id, agentapi.RunCodeRequest{Code: "import matplotlib.pyplot as plt\nplt.figure(); plt.show()\n1"})
		for _, r := range ex.Results {
			if r.Chart != nil {
				t.Fatalf("chart %+v for an empty figure", r.Chart)
			}
		}
	})
}
