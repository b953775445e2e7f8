package sandbox

// Observer hears about metering and spending refusals, for metrics. Its
// methods must be quick and safe for concurrent use.
type Observer interface {
	// MeterSample is called once per sample of a sandbox with its result:
	// "written" (an interval went to the ledger), "skipped" (nothing to
	// bill) or "error".
	MeterSample(result string)
	// CreateRefused is called when a create is refused for money, with the
	// reason: "daily_limit", "trial_used" or "cost_cap".
	CreateRefused(reason string)
}

// SetObserver sets the observer of metering and refusals (nil: none). Call
// it before StartMetering.
func (m *Manager) SetObserver(o Observer) { m.meter.obs = o }

func (m *Manager) observeSample(result string) {
	if m.meter.obs != nil {
		m.meter.obs.MeterSample(result)
	}
}

func (m *Manager) observeRefusal(reason string) {
	if m.meter.obs != nil {
		m.meter.obs.CreateRefused(reason)
	}
}
