package sandbox

import (
	"context"
	"fmt"

	"withruntime.dev/runtime/internal/errs"
)

// Trial is a trial key's allowance and use, in sandbox-seconds: the wall
// time of all its sandboxes, from the ledger (a running sandbox counts up
// to its last sample).
type Trial struct {
	AllowanceSeconds int64
	UsedSeconds      float64
}

// LeftSeconds is what the trial has left (0 when used up).
func (t Trial) LeftSeconds() float64 { return max(float64(t.AllowanceSeconds)-t.UsedSeconds, 0) }

// KeyTrial returns keyID's trial; ok is false when it is not a trial key.
func (m *Manager) KeyTrial(ctx context.Context, keyID string) (t Trial, ok bool, err error) {
	allowance, err := m.store.KeyTrial(ctx, keyID)
	if err != nil || allowance <= 0 {
		return Trial{}, false, err
	}
	used, err := m.store.KeyWallSeconds(ctx, keyID)
	if err != nil {
		return Trial{}, false, err
	}
	return Trial{AllowanceSeconds: allowance, UsedSeconds: used}, true, nil
}

// checkTrial refuses a create by a trial key whose sandbox-hours are used
// up (errs.SpendingLimit: 429).
func (m *Manager) checkTrial(ctx context.Context, keyID string) error {
	t, ok, err := m.KeyTrial(ctx, keyID)
	if err != nil || !ok || t.LeftSeconds() > 0 {
		return err
	}
	m.observeRefusal("trial_used")
	hours := fmt.Sprintf("%g sandbox-hours", float64(t.AllowanceSeconds)/3600)
	if t.AllowanceSeconds == 3600 {
		hours = "1 sandbox-hour"
	}
	return errs.New(errs.SpendingLimit,
		"key %s is a trial key of %s and has used them all (%.2f h); creates are refused: ask the server's administrator for a key without a trial",
		keyID, hours, t.UsedSeconds/3600)
}
