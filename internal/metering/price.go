// Package metering turns measured sandbox usage into money.
//
// Money is integer micro-dollars (1 USD = 1,000,000 µ$) wherever it is stored
// or returned. Costs are computed in float64 from the measured figures and
// rounded once, at the end, to the nearest micro-dollar (halves round up),
// for each figure reported: a report's total is the rounded sum of its
// unrounded parts, not the sum of rounded parts.
//
// The CPU floor applies over a sandbox's whole life (or over the part of it
// inside a report's window): an idle sandbox is billed at least
// CPUFloorVCPU × its wall-clock seconds of CPU time, and a sandbox whose
// total use is above that is billed what it used. This matches the published
// reference example, which spreads its 30 CPU-seconds over 4 minutes.
package metering

import (
	"fmt"
	"math"
)

// Prices are the rates, from configuration. Defaults (DefaultPrices) are the
// published reference price list.
type Prices struct {
	// CPUMicrosPerVCPUHour is the price of one vCPU busy for one hour, in
	// micro-dollars (reference: $0.025 = 25,000 µ$).
	CPUMicrosPerVCPUHour float64 `json:"cpuMicrosPerVcpuHour"`
	// MemoryMicrosPerGiBHour is the price of one GiB of sandbox memory size
	// held for one hour, in micro-dollars (reference: $0.0075 = 7,500 µ$).
	MemoryMicrosPerGiBHour float64 `json:"memoryMicrosPerGibHour"`
	// CPUFloorVCPU is the least CPU a running sandbox is billed, in vCPUs
	// (reference: 1/20 = 0.05), whatever its size.
	CPUFloorVCPU float64 `json:"cpuFloorVcpu"`
	// StorageMicrosPerGiBHour is the price of one GiB of a paused sandbox's
	// image (its memory, processes and files saved on the host) kept for
	// one hour, in micro-dollars (default DefaultStorageMicrosPerGiBHour).
	StorageMicrosPerGiBHour float64 `json:"storageMicrosPerGibHour"`
}

// DefaultStorageMicrosPerGiBHour is the default price of paused sandboxes'
// images: 100 µ$ ($0.0001) per GiB-hour, about $0.073 per GiB-month, the
// field's figure for stored disk: sandbox providers' storage at $0.00009
// per GB-hour (Novita's agent sandboxes), block storage at $0.08 per
// GB-month (AWS EBS gp3, about $0.00012 per GiB-hour). With it a daily
// spending limit bounds what a key's paused images may hold too.
const DefaultStorageMicrosPerGiBHour = 100

// DefaultPrices is the published reference price list, with the default
// storage price.
func DefaultPrices() Prices {
	return Prices{CPUMicrosPerVCPUHour: 25_000, MemoryMicrosPerGiBHour: 7_500, CPUFloorVCPU: 0.05,
		StorageMicrosPerGiBHour: DefaultStorageMicrosPerGiBHour}
}

// Validate says what is wrong with a price configuration.
func (p Prices) Validate() error {
	if p.CPUMicrosPerVCPUHour < 0 || p.MemoryMicrosPerGiBHour < 0 || p.CPUFloorVCPU < 0 || p.StorageMicrosPerGiBHour < 0 ||
		math.IsNaN(p.CPUMicrosPerVCPUHour+p.MemoryMicrosPerGiBHour+p.CPUFloorVCPU+p.StorageMicrosPerGiBHour) {
		return fmt.Errorf("prices must be non-negative numbers: %+v", p)
	}
	return nil
}

// Usage is what a sandbox (or a group of them) used.
type Usage struct {
	// CPUSeconds is CPU time actually used, from the runtime's accounting.
	CPUSeconds float64
	// WallSeconds is how long it ran (for the CPU floor).
	WallSeconds float64
	// GiBSeconds is memory size × time running, in GiB-seconds.
	GiBSeconds float64
	// StorageGiBSeconds is a paused sandbox's image size × time paused, in
	// GiB-seconds (a paused sandbox has no CPU, wall or memory time).
	StorageGiBSeconds float64
}

// Add sums two usages.
func (u Usage) Add(v Usage) Usage {
	return Usage{CPUSeconds: u.CPUSeconds + v.CPUSeconds, WallSeconds: u.WallSeconds + v.WallSeconds,
		GiBSeconds: u.GiBSeconds + v.GiBSeconds, StorageGiBSeconds: u.StorageGiBSeconds + v.StorageGiBSeconds}
}

// Cost is a priced usage, unrounded; call Micros for the amount to report.
type Cost struct {
	// BilledCPUSeconds is max(CPUSeconds, CPUFloorVCPU × WallSeconds).
	BilledCPUSeconds float64
	CPUMicros        float64
	MemoryMicros     float64
	// StorageMicros is the price of paused sandboxes' images.
	StorageMicros float64
}

// Total is CPU plus memory plus storage, unrounded.
func (c Cost) Total() float64 { return c.CPUMicros + c.MemoryMicros + c.StorageMicros }

// Micros is the total rounded once to whole micro-dollars.
func (c Cost) Micros() int64 { return Round(c.Total()) }

// Price prices one sandbox's usage (the floor is per sandbox: price each
// sandbox, then add the Costs).
func (p Prices) Price(u Usage) Cost {
	billed := math.Max(u.CPUSeconds, p.CPUFloorVCPU*u.WallSeconds)
	return Cost{
		BilledCPUSeconds: billed,
		CPUMicros:        billed / 3600 * p.CPUMicrosPerVCPUHour,
		MemoryMicros:     u.GiBSeconds / 3600 * p.MemoryMicrosPerGiBHour,
		StorageMicros:    u.StorageGiBSeconds / 3600 * p.StorageMicrosPerGiBHour,
	}
}

// Add sums two costs.
func (c Cost) Add(d Cost) Cost {
	return Cost{BilledCPUSeconds: c.BilledCPUSeconds + d.BilledCPUSeconds,
		CPUMicros: c.CPUMicros + d.CPUMicros, MemoryMicros: c.MemoryMicros + d.MemoryMicros,
		StorageMicros: c.StorageMicros + d.StorageMicros}
}

// WorstCase is the most a lease could cost: every vCPU busy for the whole
// lease, plus the memory size for the whole lease. Used by maxCostMicros.
func (p Prices) WorstCase(vcpus float64, memoryMiB int64, leaseSeconds float64) Cost {
	return p.Price(Usage{
		CPUSeconds:  vcpus * leaseSeconds,
		WallSeconds: leaseSeconds,
		GiBSeconds:  float64(memoryMiB) / 1024 * leaseSeconds,
	})
}

// Round rounds micro-dollars to the nearest whole one, halves up. A tiny
// epsilon absorbs float error so that exact halves computed from decimal
// prices (e.g. 0.5 µ$) round as a person would.
func Round(micros float64) int64 {
	return int64(math.Floor(micros + 0.5 + 1e-9))
}

// MaxOverheadFraction caps the isolation overhead that SplitCPU leaves
// unbilled, as a fraction of an interval's host CPU. gVisor's own CPU for a
// compute-bound sandbox measured 6-12% here; past that the sentry is
// serving the sandbox's system calls (it is the sandbox's kernel), which a
// program could otherwise make it do for free.
const MaxOverheadFraction = 0.12

// SplitCPU divides the host CPU seconds one sandbox used in an interval
// (host) between its own processes (user: billed) and its isolation layer
// (overhead: reported apart, not billed), given what the isolation layer's
// own processes spent in the interval (isolation; known is false when it
// could not be measured). Both figures come from the host kernel, never
// from inside the sandbox. The results are never negative and add up to
// host (0 if host is negative): overhead is isolation clamped to
// [0, MaxOverheadFraction × host], and when isolation is unknown the whole
// interval is the sandbox's.
func SplitCPU(host, isolation float64, known bool) (user, overhead float64) {
	if !(host > 0) { // negative or NaN: a counter went back
		return 0, 0
	}
	if !known || !(isolation > 0) {
		return host, 0
	}
	overhead = math.Min(isolation, MaxOverheadFraction*host)
	return host - overhead, overhead
}
