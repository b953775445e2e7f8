package main

import (
	"fmt"
	"math"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"withruntime.dev/runtime/internal/metering"
	"withruntime.dev/runtime/internal/sandbox"
)

func newUsageCmd() *cobra.Command {
	var from, to, groupBy string
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show metered usage and cost (CPU-seconds, GiB-seconds, USD)",
		Long: `Show metered usage and cost, grouped by UTC day, sandbox or key.

--from and --to take an RFC 3339 time or a UTC date (YYYY-MM-DD; --to is then
inclusive). The default window is the last 30 days. Costs are micro-dollars
summed per row and rounded once; USD is shown to the micro-dollar.

CPU-S is the CPU the sandboxes' own processes used (billed, with the floor:
BILLED CPU-S); OVERHEAD CPU-S is the host CPU their isolation layer (gVisor)
spent on top, not billed. The host's CPU cost is CPU-S + OVERHEAD CPU-S.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			rep, err := s.Usage(cmd.Context(), from, to, groupBy)
			if err != nil {
				return err
			}
			fmt.Printf("usage %s .. %s by %s (CPU $%g/vCPU-h, floor %g vCPU; memory $%g/GiB-h)\n",
				rep.From.Format("2006-01-02 15:04Z"), rep.To.Format("2006-01-02 15:04Z"), rep.GroupBy,
				rep.Prices.CPUMicrosPerVCPUHour/1e6, rep.Prices.CPUFloorVCPU, rep.Prices.MemoryMicrosPerGiBHour/1e6)
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(tw, "%s\tCPU-S\tBILLED CPU-S\tOVERHEAD CPU-S\tGIB-S\tCOST USD\t\n", groupTitle(rep.GroupBy))
			for _, r := range rep.Rows {
				fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t\n", r.Group, r.CPUSeconds, r.BilledCPUSeconds, r.OverheadCPUSeconds, r.GiBSeconds, usd(r.CostMicros))
			}
			t := rep.Total
			fmt.Fprintf(tw, "TOTAL\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t\n", t.CPUSeconds, t.BilledCPUSeconds, t.OverheadCPUSeconds, t.GiBSeconds, usd(t.CostMicros))
			if err := tw.Flush(); err != nil {
				return err
			}
			if tr := rep.Trial; tr != nil {
				fmt.Printf("trial: %.2f of %s used, %.2f left\n", tr.UsedHours, sandboxHours(tr.AllowanceHours), tr.LeftHours)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "start of the window: RFC 3339 time or UTC date (default 30 days ago)")
	cmd.Flags().StringVar(&to, "to", "", "end of the window: RFC 3339 time or UTC date, inclusive (default now)")
	cmd.Flags().StringVar(&groupBy, "group-by", "day", "group rows by day, sandbox or key")
	return cmd
}

func groupTitle(groupBy string) string {
	switch groupBy {
	case "sandbox":
		return "SANDBOX"
	case "key":
		return "KEY"
	}
	return "DAY (UTC)"
}

// usd formats micro-dollars as dollars to the micro-dollar.
func usd(micros int64) string { return fmt.Sprintf("$%.6f", float64(micros)/1e6) }

// maxLimitUSD is the largest daily limit the API takes (1e15 µ$).
const maxLimitUSD = 1e9

// usdToMicros converts a --daily-limit-usd value (0: none). A limit that
// would round to no limit, or past what the API takes, is refused rather
// than wrapped or dropped.
func usdToMicros(v float64) (int64, error) {
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) || v > maxLimitUSD {
		return 0, fmt.Errorf("--daily-limit-usd must be an amount of dollars from 0.000001 to %d (0: no limit); got %v", int64(maxLimitUSD), v)
	}
	micros := int64(math.Round(v * 1e6))
	if v > 0 && micros == 0 {
		return 0, fmt.Errorf("--daily-limit-usd %v rounds to no limit at all; the smallest limit is 0.000001 (one micro-dollar)", v)
	}
	return micros, nil
}

// addMeterFlags adds the metering and price flags of `serve` and returns
// the configuration they make.
func addMeterFlags(cmd *cobra.Command) func() sandbox.MeterConfig {
	var interval time.Duration
	def := metering.DefaultPrices()
	var cpuUSD, memUSD, floor, storageUSD float64
	cmd.Flags().DurationVar(&interval, "meter-interval", sandbox.DefaultMeterInterval, "how often each running sandbox's usage is sampled (negative: metering off)")
	cmd.Flags().Float64Var(&cpuUSD, "price-cpu", def.CPUMicrosPerVCPUHour/1e6, "USD per vCPU-hour of CPU used")
	cmd.Flags().Float64Var(&memUSD, "price-memory", def.MemoryMicrosPerGiBHour/1e6, "USD per GiB-hour of sandbox memory size")
	cmd.Flags().Float64Var(&floor, "cpu-floor", def.CPUFloorVCPU, "least CPU billed per running sandbox, in vCPUs")
	cmd.Flags().Float64Var(&storageUSD, "price-storage", def.StorageMicrosPerGiBHour/1e6, "USD per GiB-hour of a paused sandbox's image on the host (its memory and files; CPU and memory are not billed while paused)")
	return func() sandbox.MeterConfig {
		return sandbox.MeterConfig{Interval: interval, Prices: &metering.Prices{
			CPUMicrosPerVCPUHour: cpuUSD * 1e6, MemoryMicrosPerGiBHour: memUSD * 1e6, CPUFloorVCPU: floor,
			StorageMicrosPerGiBHour: storageUSD * 1e6}}
	}
}

// sandboxHours says h sandbox-hours with the plural right: "1 sandbox-hour",
// "0.5 sandbox-hours".
func sandboxHours(h float64) string {
	if h == 1 {
		return "1 sandbox-hour"
	}
	return fmt.Sprintf("%g sandbox-hours", h)
}
