package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/metering"
	"withruntime.dev/runtime/internal/store"
)

// EndSpendingLimit is the end reason of a sandbox stopped because its key
// reached its daily spending limit.
const EndSpendingLimit = "spending_limit"

// DefaultMeterInterval is how often each running sandbox is sampled.
const DefaultMeterInterval = 5 * time.Second

// MeterConfig configures metering.
type MeterConfig struct {
	// Interval is the time between samples of each running sandbox (0 means
	// DefaultMeterInterval; negative turns metering off: no ledger, no
	// spending limits).
	Interval time.Duration
	// Prices are the rates (zero value: metering.DefaultPrices).
	Prices *metering.Prices
}

// meterState is the manager's metering: a sampler that, every Interval,
// reads each running sandbox's cumulative CPU seconds from the host
// (driver.StatsReader: the host's total and the part the isolation layer
// spent) and writes the interval since the previous sample into the store's
// ledger: the CPU the sandbox's own processes used (billed), the isolation
// layer's CPU (reported apart), and its memory size × wall time. A last
// sample is taken when a sandbox is stopped, before the driver destroys
// it. The ledger's cursor (last sample time and cumulative CPU figures per
// sandbox) is written with each interval, so a restarted server continues
// from it: the time it was down is one interval.
type meterState struct {
	on     bool
	cfg    MeterConfig
	prices metering.Prices
	cancel context.CancelFunc
	done   chan struct{}
	// compactDone is closed when the ledger's compaction loop (compact.go),
	// started and stopped with the sampler, has returned.
	compactDone chan struct{}
	// compactPause is the rest between two calls of one compaction.
	compactPause time.Duration

	mu    sync.Mutex
	locks map[string]*sync.Mutex // one sampler at a time per sandbox

	obs Observer // metrics (observe.go); nil: none

	// history is each running sandbox's recent samples (metrics.go).
	history metricHistory
}

// StartMetering turns metering on. Call it before Recover (so that the
// sandboxes Recover stops get their last sample); Close stops it. With
// GateLeaderWork the periodic sampler runs only while Lead does; the first
// and last interval of each sandbox are written by whichever server
// creates or stops it.
func (m *Manager) StartMetering(cfg MeterConfig) {
	ms := &m.meter
	ms.cfg = cfg
	ms.prices = metering.DefaultPrices()
	if cfg.Prices != nil {
		ms.prices = *cfg.Prices
	}
	ms.locks = map[string]*sync.Mutex{}
	ms.compactPause = defaultCompactPause
	if cfg.Interval < 0 {
		return
	}
	if ms.cfg.Interval == 0 {
		ms.cfg.Interval = DefaultMeterInterval
	}
	ms.on = true
	if !m.lead.gated {
		m.startMeterLoop(context.Background())
	}
}

// startMeterLoop starts the sampler and the ledger's compaction until ctx
// ends or stopMetering (with GateLeaderWork: from Lead, while this server
// leads).
func (m *Manager) startMeterLoop(ctx context.Context) {
	ms := &m.meter
	if !ms.on {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	ms.cancel, ms.done, ms.compactDone = cancel, make(chan struct{}), make(chan struct{})
	go m.meterLoop(ctx)
	go m.compactLoop(ctx, ms.compactDone)
}

// Prices returns the prices in force.
func (m *Manager) Prices() metering.Prices {
	if m.meter.locks == nil {
		return metering.DefaultPrices()
	}
	return m.meter.prices
}

// stopMetering ends the sampler and the compaction and waits for them.
func (m *Manager) stopMetering() {
	if m.meter.cancel != nil {
		m.meter.cancel()
		<-m.meter.done
		<-m.meter.compactDone
		m.meter.cancel = nil
	}
}

func (m *Manager) meterLoop(ctx context.Context) {
	defer close(m.meter.done)
	t := time.NewTicker(m.meter.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.sampleAll(ctx)
		m.sampleVolumes(ctx)
		m.sampleSnapshots(ctx)
		m.enforceLimits(ctx)
	}
}

// sharedIDs are the sandboxes the store has running or paused (any
// server's).
func (m *Manager) sharedIDs(ctx context.Context) []string {
	var ids []string
	for _, state := range []string{store.StateRunning, store.StatePaused} {
		sbs, err := m.store.ListSandboxes(ctx, store.SandboxFilter{State: state})
		if err != nil {
			if ctx.Err() == nil {
				m.log.Warn("metering: list sandboxes", "err", err)
			}
			continue
		}
		for _, sb := range sbs {
			ids = append(ids, sb.ID)
		}
	}
	return ids
}

func (m *Manager) meterLock(id string) *sync.Mutex {
	m.meter.mu.Lock()
	defer m.meter.mu.Unlock()
	l := m.meter.locks[id]
	if l == nil {
		l = &sync.Mutex{}
		m.meter.locks[id] = l
	}
	return l
}

// meterStart opens a new sandbox's ledger once it runs. Memory (and the
// CPU floor) is billed from its creation; CPU used from now: the CPU that
// gVisor spent booting it (about 0.15 s) is the platform's, not the caller's.
func (m *Manager) meterStart(ctx context.Context, sb store.Sandbox) {
	if !m.meter.on {
		return
	}
	var mark store.CPUMark
	if sr, ok := m.driver.(driver.StatsReader); ok {
		if st, err := sr.Stats(ctx, sb.ID); err == nil {
			mark = cpuMark(st)
		}
	}
	if err := m.store.StartUsage(ctx, sb.ID, sb.CreatedAt, mark); err != nil {
		m.log.Warn("metering", "sandbox", sb.ID, "err", err)
	}
}

// cpuMark is a sample's cumulative CPU figures for the ledger's cursor.
func cpuMark(st driver.Stats) store.CPUMark {
	return store.CPUMark{Host: st.CPUSeconds, Overhead: st.IsolationCPUSeconds, OverheadKnown: st.IsolationKnown}
}

// meterSample writes a sandbox's interval up to now (a pause's last
// running interval, a resume's paused one).
func (m *Manager) meterSample(ctx context.Context, id string) {
	if !m.meter.on {
		return
	}
	if err := m.sample(ctx, id, false); err != nil {
		m.log.Warn("metering", "sandbox", id, "err", err)
	}
}

// cpuMarkNow is a sandbox's cumulative CPU figures now (zero when unknown).
func (m *Manager) cpuMarkNow(ctx context.Context, id string) store.CPUMark {
	if sr, ok := m.driver.(driver.StatsReader); ok {
		if st, err := sr.Stats(ctx, id); err == nil {
			return cpuMark(st)
		}
	}
	return store.CPUMark{}
}

// meterFinal takes a stopped sandbox's last sample (before the driver
// destroys it) and closes its ledger.
func (m *Manager) meterFinal(ctx context.Context, id string) {
	if !m.meter.on {
		return
	}
	if err := m.sample(ctx, id, true); err != nil {
		m.log.Warn("metering the last interval", "sandbox", id, "err", err)
	}
	m.meter.mu.Lock()
	delete(m.meter.locks, id)
	m.meter.mu.Unlock()
	m.meter.history.drop(id)
}

// sample writes the interval from the sandbox's cursor to now. A sandbox is
// never billed past its lease end. When the driver cannot say the CPU used
// (the sandbox is already gone), a final sample bills the wall time and
// memory with no CPU beyond the last sample; a periodic one writes nothing.
//
// The interval's host CPU is split with metering.SplitCPU: what the
// isolation layer's processes spent (when measured at both ends of the
// interval) is overhead, the rest is the sandbox's processes' and billed.
func (m *Manager) sample(ctx context.Context, id string, final bool) error {
	written, err := m.sampleOnce(ctx, id, final)
	switch {
	case err != nil:
		m.observeSample("error")
	case written:
		m.observeSample("written")
	default:
		m.observeSample("skipped")
	}
	return err
}

// sampleOnce is sample; written says an interval went to the ledger.
func (m *Manager) sampleOnce(ctx context.Context, id string, final bool) (written bool, err error) {
	l := m.meterLock(id)
	l.Lock()
	defer l.Unlock()
	sb, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return false, err
	}
	cur, err := m.store.GetUsageCursor(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		if sb.DriverState == nil {
			return false, nil // never ran
		}
		// Running since before metering was on: bill from its creation.
		if err := m.store.StartUsage(ctx, id, sb.CreatedAt, store.CPUMark{}); err != nil {
			return false, err
		}
		cur, err = m.store.GetUsageCursor(ctx, id)
	}
	if err != nil || cur.Closed {
		return false, err
	}
	rec, write, err := m.nextInterval(ctx, sb, cur, final)
	if err != nil || !write {
		return false, err
	}
	return m.store.RecordUsage(ctx, rec.Interval, rec.Mark, rec.Final)
}

// nextInterval is the interval from the sandbox's open cursor cur to now,
// to be written with the cumulative CPU figures it ends on; write is false
// when there is nothing to write.
func (m *Manager) nextInterval(ctx context.Context, sb store.Sandbox, cur store.UsageCursor, final bool) (rec store.UsageRecord, write bool, err error) {
	id := sb.ID
	if sb.PausedAt != nil {
		return m.pausedInterval(sb, cur, final)
	}
	// Without a new sample the cursor's figures stand: no CPU is billed.
	mark := store.CPUMark{Host: cur.LastCPU, Overhead: cur.LastOverheadCPU, OverheadKnown: cur.OverheadKnown}
	var statsErr error
	if sr, ok := m.driver.(driver.StatsReader); ok {
		var st driver.Stats
		if st, statsErr = sr.Stats(ctx, id); statsErr == nil {
			mark = cpuMark(st)
			if !final {
				m.recordMetric(ctx, id, cur, st)
			}
		}
	} else {
		statsErr = errors.New("the driver cannot measure CPU")
	}
	if statsErr != nil && !final {
		return rec, false, statsErr
	}
	end := m.now().UTC().Truncate(time.Millisecond)
	if end.After(sb.LeaseEndsAt) {
		end = sb.LeaseEndsAt
	}
	if !end.After(cur.LastAt) {
		end = cur.LastAt
		if !final {
			return rec, false, nil
		}
	}
	// A counter that went back (never expected) bills nothing negative.
	user, overhead := metering.SplitCPU(mark.Host-cur.LastCPU, mark.Overhead-cur.LastOverheadCPU,
		mark.OverheadKnown && cur.OverheadKnown)
	wall := end.Sub(cur.LastAt).Seconds()
	iv := store.UsageInterval{
		SandboxID: id, KeyID: sb.KeyID, Start: cur.LastAt, End: end,
		CPUSeconds: user, OverheadCPUSeconds: overhead,
		WallSeconds: wall, GiBSeconds: float64(sb.MemoryMiB) / 1024 * wall,
	}
	return store.UsageRecord{Interval: iv, Mark: mark, Final: final}, true, nil
}

// pausedInterval is a paused sandbox's interval: its image's size × time,
// and no CPU, wall or memory time. It ends at the sandbox's end when it
// was stopped (destroyed while paused).
func (m *Manager) pausedInterval(sb store.Sandbox, cur store.UsageCursor, final bool) (store.UsageRecord, bool, error) {
	end := m.now().UTC().Truncate(time.Millisecond)
	if sb.EndedAt != nil && end.After(*sb.EndedAt) {
		end = *sb.EndedAt
	}
	if !end.After(cur.LastAt) {
		end = cur.LastAt
		if !final {
			return store.UsageRecord{}, false, nil
		}
	}
	mark := store.CPUMark{Host: cur.LastCPU, Overhead: cur.LastOverheadCPU, OverheadKnown: cur.OverheadKnown}
	iv := store.UsageInterval{SandboxID: sb.ID, KeyID: sb.KeyID, Start: cur.LastAt, End: end,
		StorageGiBSeconds: float64(sb.ImageBytes) / (1 << 30) * end.Sub(cur.LastAt).Seconds()}
	return store.UsageRecord{Interval: iv, Mark: mark, Final: final}, true, nil
}

// enforceLimits stops the running sandboxes of every key whose spend today
// (UTC) has reached its daily limit.
func (m *Manager) enforceLimits(ctx context.Context) {
	limits, err := m.store.KeyDailyLimits(ctx)
	if err != nil || len(limits) == 0 {
		return
	}
	running, err := m.store.ListSandboxes(ctx, store.SandboxFilter{State: store.StateRunning})
	if err != nil {
		return
	}
	byKey := map[string][]string{}
	for _, sb := range running {
		if limits[sb.KeyID] > 0 {
			byKey[sb.KeyID] = append(byKey[sb.KeyID], sb.ID)
		}
	}
	for key, ids := range byKey {
		spent, err := m.SpentToday(ctx, key)
		if err != nil || spent < limits[key] {
			continue
		}
		for _, id := range ids {
			m.log.Info("daily spending limit reached; stopping sandbox", "key", key, "sandbox", id,
				"spentMicros", spent, "limitMicros", limits[key])
			if err := m.stop(ctx, id, EndSpendingLimit); err != nil {
				m.log.Error("stop at spending limit", "sandbox", id, "err", err)
			}
		}
	}
}

// utcDay returns the start of t's UTC day and of the next.
func utcDay(t time.Time) (time.Time, time.Time) {
	d := t.UTC().Truncate(24 * time.Hour)
	return d, d.Add(24 * time.Hour)
}

// SpentToday is what a key's sandboxes cost since midnight UTC, in
// micro-dollars (each sandbox priced with its floor, summed, rounded once).
func (m *Manager) SpentToday(ctx context.Context, keyID string) (int64, error) {
	from, _ := utcDay(m.now())
	sums, err := m.store.SumUsage(ctx, store.UsageFilter{From: from, KeyID: keyID}, false)
	if err != nil {
		return 0, err
	}
	var c metering.Cost
	p := m.Prices()
	for _, s := range sums {
		c = c.Add(p.Price(usageOf(s)))
	}
	return c.Micros(), nil
}

// checkCaps refuses a create whose first lease could cost more than
// maxCostMicros, whose key is a trial key with no hours left (trial.go), or
// whose key has reached its daily spending limit.
// p has its defaults applied.
func (m *Manager) checkCaps(ctx context.Context, p CreateParams) error {
	if p.MaxCostMicros < 0 {
		return errs.New(errs.Invalid, "maxCostMicros must be positive (micro-dollars; 1 USD = 1,000,000) or absent; got %d", p.MaxCostMicros)
	}
	pr := m.Prices()
	if p.MaxCostMicros > 0 {
		lease := float64(p.TimeoutSeconds)
		wc := pr.WorstCase(p.CPU, p.MemoryMiB, lease)
		if worst := wc.Micros(); worst > p.MaxCostMicros {
			m.observeRefusal("cost_cap")
			return errs.New(errs.CostCap,
				"this sandbox's first lease could cost up to %d µ$ ($%.6f), over maxCostMicros %d: "+
					"%g vCPUs busy × %d s × %g µ$ per vCPU-hour = %.1f µ$ of CPU, plus %g GiB × %d s × %g µ$ per GiB-hour = %.1f µ$ of memory; "+
					"lower timeoutSeconds, cpu or memoryMiB, or raise maxCostMicros",
				worst, float64(worst)/1e6, p.MaxCostMicros,
				p.CPU, p.TimeoutSeconds, pr.CPUMicrosPerVCPUHour, wc.CPUMicros,
				float64(p.MemoryMiB)/1024, p.TimeoutSeconds, pr.MemoryMicrosPerGiBHour, wc.MemoryMicros)
		}
	}
	if p.KeyID != "" {
		if err := m.checkTrial(ctx, p.KeyID); err != nil {
			return err
		}
	}
	return m.checkSpending(ctx, p.KeyID)
}

// checkSpending refuses a create or a resume (errs.SpendingLimit) when the
// key has reached its daily spending limit.
func (m *Manager) checkSpending(ctx context.Context, keyID string) error {
	if !m.meter.on || keyID == "" {
		return nil
	}
	limits, err := m.store.KeyDailyLimits(ctx)
	if err != nil {
		return err
	}
	limit := limits[keyID]
	if limit <= 0 {
		return nil
	}
	spent, err := m.SpentToday(ctx, keyID)
	if err != nil {
		return err
	}
	if spent >= limit {
		m.observeRefusal("daily_limit")
		_, reset := utcDay(m.now())
		return errs.New(errs.SpendingLimit,
			"key %s has spent %d µ$ ($%.6f) today (UTC), reaching its daily limit of %d µ$ ($%.6f); creates and resumes are refused until the limit resets at %s",
			keyID, spent, float64(spent)/1e6, limit, float64(limit)/1e6, reset.Format(time.RFC3339))
	}
	return nil
}

// UsageGroup is one row of a usage report: the usage of a group of
// sandboxes, each priced with its own CPU floor, summed.
type UsageGroup struct {
	Group string
	// CPUSeconds is the CPU the sandboxes' own processes used.
	CPUSeconds float64
	// OverheadCPUSeconds is the host CPU their isolation layer spent (not
	// billed): the host's cost is CPUSeconds + OverheadCPUSeconds.
	OverheadCPUSeconds float64
	GiBSeconds         float64
	// StorageGiBSeconds is paused sandboxes' image size × time paused plus
	// volumes' size × time (volumemeter.go).
	StorageGiBSeconds float64
	Cost              metering.Cost
}

func usageOf(s store.UsageSum) metering.Usage {
	return metering.Usage{CPUSeconds: s.CPUSeconds, WallSeconds: s.WallSeconds, GiBSeconds: s.GiBSeconds, StorageGiBSeconds: s.StorageGiBSeconds}
}

// Usage groupings.
const (
	GroupByDay     = "day"
	GroupBySandbox = "sandbox"
	GroupByKey     = "key"
)

// Usage reports the intervals ending in (from, to], grouped by UTC day,
// sandbox or key, with the total. Each sandbox is priced (with its floor)
// over its part of the window — per day when grouping by day — and the
// costs are summed; rounding happens once per reported figure. keyID, when
// set, limits the report to that key's sandboxes.
func (m *Manager) Usage(ctx context.Context, from, to time.Time, groupBy, keyID string) ([]UsageGroup, UsageGroup, error) {
	switch groupBy {
	case GroupByDay, GroupBySandbox, GroupByKey:
	default:
		return nil, UsageGroup{}, errs.New(errs.Invalid, "groupBy must be day, sandbox or key; got %q", groupBy)
	}
	sums, err := m.store.SumUsage(ctx, store.UsageFilter{From: from, To: to, KeyID: keyID}, groupBy == GroupByDay)
	if err != nil {
		return nil, UsageGroup{}, err
	}
	p := m.Prices()
	groups := map[string]*UsageGroup{}
	total := UsageGroup{Group: "total"}
	for _, s := range sums {
		g := s.Day
		switch groupBy {
		case GroupBySandbox:
			g = s.SandboxID
		case GroupByKey:
			g = s.KeyID
		}
		row := groups[g]
		if row == nil {
			row = &UsageGroup{Group: g}
			groups[g] = row
		}
		c := p.Price(usageOf(s))
		for _, r := range []*UsageGroup{row, &total} {
			r.CPUSeconds += s.CPUSeconds
			r.OverheadCPUSeconds += s.OverheadCPUSeconds
			r.GiBSeconds += s.GiBSeconds
			r.StorageGiBSeconds += s.StorageGiBSeconds
			r.Cost = r.Cost.Add(c)
		}
	}
	out := make([]UsageGroup, 0, len(groups))
	for _, g := range groups {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, total, nil
}

// Costs returns what each of the sandboxes ids has cost so far, as of its
// last sample (at most the metering interval ago for a running one), in
// micro-dollars; a sandbox with nothing metered is absent.
func (m *Manager) Costs(ctx context.Context, ids ...string) (map[string]int64, error) {
	out := map[string]int64{}
	if len(ids) == 0 {
		return out, nil
	}
	sums, err := m.store.SumUsage(ctx, store.UsageFilter{SandboxIDs: ids}, false)
	if err != nil {
		return nil, fmt.Errorf("costs: %w", err)
	}
	p := m.Prices()
	for _, s := range sums {
		out[s.SandboxID] = p.Price(usageOf(s)).Micros()
	}
	return out, nil
}
