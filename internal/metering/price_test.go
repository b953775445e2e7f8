package metering

import (
	"math"
	"testing"
)

// The published reference scenario: 5,000 tasks a month, each a 2 vCPU /
// 4 GiB sandbox running 4 minutes and using 30 CPU-seconds.
func TestReferenceScenario(t *testing.T) {
	p := DefaultPrices()
	var month Cost
	for i := 0; i < 5000; i++ {
		month = month.Add(p.Price(Usage{CPUSeconds: 30, WallSeconds: 240, GiBSeconds: 4 * 240}))
	}
	if got := cents(month.CPUMicros); got != 104 {
		t.Errorf("CPU: %d cents, want 104 ($1.04)", got)
	}
	if got := cents(month.MemoryMicros); got != 1000 {
		t.Errorf("memory: %d cents, want 1000 ($10.00)", got)
	}
	if got := cents(month.Total()); got != 1104 {
		t.Errorf("total: %d cents, want 1104 ($11.04)", got)
	}
	perTask := float64(month.Micros()) / 5000
	if perTask < 2200 || perTask > 2210 {
		t.Errorf("per task: %.1f µ$, want about 2,200 (≈ $0.0022)", perTask)
	}
}

func TestIdleSandboxHour(t *testing.T) {
	// An idle 2 vCPU / 4 GiB sandbox for an hour: floor 0.05 vCPU-h of CPU
	// ($0.00125) plus 4 GiB-h of memory ($0.03) = $0.03125.
	c := DefaultPrices().Price(Usage{CPUSeconds: 0.2, WallSeconds: 3600, GiBSeconds: 4 * 3600})
	if c.Micros() != 31_250 {
		t.Fatalf("idle hour: %d µ$, want 31,250", c.Micros())
	}
	if c.BilledCPUSeconds != 180 {
		t.Fatalf("billed CPU: %v s, want the floor of 180 s", c.BilledCPUSeconds)
	}
}

func TestFloorIsPerSandboxNotPerVCPU(t *testing.T) {
	p := DefaultPrices()
	busy := p.Price(Usage{CPUSeconds: 100, WallSeconds: 100, GiBSeconds: 0})
	if busy.BilledCPUSeconds != 100 {
		t.Fatalf("busy sandbox billed %v CPU-s, want what it used (100)", busy.BilledCPUSeconds)
	}
}

func TestWorstCase(t *testing.T) {
	// 2 vCPU, 4 GiB, 1 hour: 2 × 25,000 + 4 × 7,500 = 80,000 µ$.
	if got := DefaultPrices().WorstCase(2, 4096, 3600).Micros(); got != 80_000 {
		t.Fatalf("worst case: %d µ$, want 80,000", got)
	}
}

func TestRound(t *testing.T) {
	for in, want := range map[float64]int64{0: 0, 0.4999: 0, 0.5: 1, 1.5: 2, 2.4: 2, 1e6 - 0.5: 1e6} {
		if got := Round(in); got != want {
			t.Errorf("Round(%v) = %d, want %d", in, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultPrices().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Prices{CPUMicrosPerVCPUHour: -1}).Validate(); err == nil {
		t.Fatal("negative price accepted")
	}
}

func cents(micros float64) int64 { return Round(micros / 10_000) }

func TestSplitCPU(t *testing.T) {
	for _, c := range []struct {
		host, iso      float64
		known          bool
		user, overhead float64
	}{
		{10, 0.7, true, 9.3, 0.7},
		{10, 0.7, false, 10, 0},       // not measured: all of it is the sandbox's
		{10, 5, true, 8.8, 1.2},       // a syscall-heavy program: the sentry's work past 12% is billed
		{10, 12, true, 8.8, 1.2},      // never more overhead than the cap
		{10, -1, true, 10, 0},         // a counter that went back
		{-1, 0.5, true, 0, 0},         // never negative
		{math.NaN(), 0.5, true, 0, 0}, // nor NaN
		{0, 0, true, 0, 0},
	} {
		u, o := SplitCPU(c.host, c.iso, c.known)
		if math.Abs(u-c.user) > 1e-12 || math.Abs(o-c.overhead) > 1e-12 {
			t.Errorf("SplitCPU(%g, %g, %v) = %g, %g; want %g, %g", c.host, c.iso, c.known, u, o, c.user, c.overhead)
		}
	}
}

// A paused sandbox's image is billed at the storage price only: no CPU
// (its wall time is 0, so not even the floor) and no memory.
func TestStoragePrice(t *testing.T) {
	p := DefaultPrices()
	p.StorageMicrosPerGiBHour = 100                        // $0.0001 per GiB-hour
	c := p.Price(Usage{StorageGiBSeconds: 2 * 3600 * 1.5}) // 1.5 GiB for 2 hours
	if c.CPUMicros != 0 || c.MemoryMicros != 0 || c.Micros() != 300 {
		t.Fatalf("paused 1.5 GiB × 2 h at 100 µ$/GiB-h: %+v (%d µ$), want only 300 µ$ of storage", c, c.Micros())
	}
	// The default: 100 µ$ per GiB-hour, so 1 GiB for 10 hours is 1,000 µ$.
	if got := DefaultPrices().Price(Usage{StorageGiBSeconds: 10 * 3600}).Micros(); got != 1000 {
		t.Fatalf("default storage price billed %d µ$ for 10 GiB-hours, want 1000", got)
	}
	if err := (Prices{StorageMicrosPerGiBHour: -1}).Validate(); err == nil {
		t.Fatal("negative storage price accepted")
	}
}
