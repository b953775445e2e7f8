package sandbox

import (
	"context"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/sdk/go/wire"
)

// A sandbox's recent resource use, for GET /v1/sandboxes/{id}/metrics (and
// E2B's get_metrics): every sample the metering takes of a running sandbox
// (meter.go, every interval, host-measured) is also kept here, in memory,
// the last MaxMetricSamples per sandbox, and dropped when the sandbox stops.
// The ledger keeps what is billed for good; this is the short history a
// dashboard or a program watching its sandbox reads. A server that restarts
// starts the history again (the ledger's figures are unaffected).

// MaxMetricSamples is how many samples a sandbox's history keeps (an hour
// at the default 5 s meter interval).
const MaxMetricSamples = 720

// metricSample is one sample as the host took it: cumulative CPU figures,
// memory in use, and the blocks of the writable layer on the host's disk.
// A base sample only starts the CPU measure of the one after it (the
// ledger's cursor before the first sample, or the oldest sample kept).
type metricSample struct {
	at        time.Time
	mark      store.CPUMark
	memBytes  int64
	diskBytes int64
	base      bool
}

// metricHistory is the samples of each running sandbox, oldest first.
type metricHistory struct {
	mu   sync.Mutex
	byID map[string][]metricSample
}

// add appends s to id's history; base starts a new history.
func (h *metricHistory) add(id string, base, s metricSample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byID == nil {
		h.byID = map[string][]metricSample{}
	}
	l := h.byID[id]
	// A counter that went back (a sandbox restored from a pause counts
	// from 0 again) is measured from the ledger's cursor instead.
	if len(l) == 0 || s.mark.Host < l[len(l)-1].mark.Host {
		base.base = true
		l = append(l, base)
	}
	l = append(l, s)
	if len(l) > MaxMetricSamples+1 {
		l = append(l[:0:0], l[len(l)-MaxMetricSamples-1:]...)
		l[0].base = true
	}
	h.byID[id] = l
}

func (h *metricHistory) get(id string) []metricSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]metricSample(nil), h.byID[id]...)
}

func (h *metricHistory) drop(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.byID, id)
}

// recordMetric keeps a metering sample of sandbox id in its history; cur
// is the ledger's cursor before it (the base of a new history).
func (m *Manager) recordMetric(ctx context.Context, id string, cur store.UsageCursor, st driver.Stats) {
	if st.At.IsZero() {
		st.At = m.now()
	}
	m.meter.history.add(id, cursorSample(cur), metricSample{at: st.At, mark: cpuMark(st), memBytes: st.MemoryBytes,
		diskBytes: m.diskUsed(ctx, id)})
}

func cursorSample(cur store.UsageCursor) metricSample {
	return metricSample{at: cur.LastAt, base: true,
		mark: store.CPUMark{Host: cur.LastCPU, Overhead: cur.LastOverheadCPU, OverheadKnown: cur.OverheadKnown}}
}

// diskUsed is the bytes sandbox id's writable layer holds on the host's
// disk, 0 when the driver cannot say (a memory-backed layer counts in the
// sandbox's memory instead).
func (m *Manager) diskUsed(ctx context.Context, id string) int64 {
	if du, ok := m.driver.(driver.DiskUser); ok {
		if n, err := du.DiskUsed(ctx, id); err == nil {
			return n
		}
	}
	return 0
}

// Metrics returns sandbox id's samples taken in [from, to] (a zero time:
// no bound), oldest first: its history and, for a running sandbox whose
// last sample is older than the meter interval, one taken now. CPU use is
// the sandbox's own processes' (as billed: the isolation layer's share
// left out) since the sample before, as a percentage of its vCPUs.
func (m *Manager) Metrics(ctx context.Context, id string, from, to time.Time) ([]wire.SandboxMetric, error) {
	sb, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	samples := m.meter.history.get(id)
	if sb.State == store.StateRunning && sb.PausedAt == nil {
		interval := m.meter.cfg.Interval
		if len(samples) == 0 || m.now().Sub(samples[len(samples)-1].at) >= interval {
			if sr, ok := m.driver.(driver.StatsReader); ok {
				if st, err := sr.Stats(ctx, id); err == nil {
					if st.At.IsZero() {
						st.At = m.now()
					}
					samples = append(samples, metricSample{at: st.At, mark: cpuMark(st), memBytes: st.MemoryBytes,
						diskBytes: m.diskUsed(ctx, id)})
				}
			}
		}
	}
	if len(samples) == 1 {
		// Taken now, before the metering's first: measured from the start.
		if cur, err := m.store.GetUsageCursor(ctx, id); err == nil && cur.LastAt.Before(samples[0].at) {
			samples = append([]metricSample{cursorSample(cur)}, samples...)
		}
	}
	var prev *metricSample
	out := []wire.SandboxMetric{}
	for i := range samples {
		s := samples[i]
		p := prev
		prev = &samples[i]
		if s.base || (!from.IsZero() && s.at.Before(from)) || (!to.IsZero() && s.at.After(to)) {
			continue
		}
		out = append(out, metricOf(sb, p, s))
	}
	return out, nil
}

// metricOf is sample s of sb, its CPU use measured since p (none: 0).
func metricOf(sb store.Sandbox, p *metricSample, s metricSample) wire.SandboxMetric {
	out := wire.SandboxMetric{At: s.at.UTC(), CPUCount: driver.VisibleCPUs(sb.CPU),
		MemoryUsedBytes: s.memBytes, MemoryTotalBytes: sb.MemoryMiB << 20,
		DiskUsedBytes: s.diskBytes, DiskTotalBytes: sb.DiskMiB << 20}
	if p == nil || sb.CPU <= 0 {
		return out
	}
	wall := s.at.Sub(p.at).Seconds()
	if wall <= 0 {
		return out
	}
	used := s.mark.Host - p.mark.Host
	if s.mark.OverheadKnown && p.mark.OverheadKnown {
		used -= s.mark.Overhead - p.mark.Overhead
	}
	pct := used / wall / sb.CPU * 100
	out.CPUUsedPercent = min(max(pct, 0), 100)
	return out
}
