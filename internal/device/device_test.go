package device

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/auth"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// clock is a settable time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newService(t *testing.T, trialHours float64) (*Service, *store.Store, *clock, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runtime.db")
	st, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := &clock{now: time.Now().UTC()}
	return New(Config{Store: st, TrialHours: trialHours, Now: c.Now}), st, c, path
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var de *Error
	if !errors.As(err, &de) || de.Code != code {
		t.Fatalf("got %v, want RFC 8628 error %s", err, code)
	}
	if de.Msg == "" {
		t.Fatalf("%s without a message", code)
	}
}

// The whole grant: pending until approved, slow_down when polled too fast,
// the key once, expired_token for the same device code after that (a stolen
// code polled from elsewhere gets nothing), and the key works with its
// limit.
func TestDeviceGrant(t *testing.T) {
	ctx := context.Background()
	s, st, c, dbPath := newService(t, 0)
	g, err := s.Authorize(ctx, AuthorizeParams{ClientName: "alice@laptop"})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.UserCode) != 9 || g.UserCode[4] != '-' || strings.Trim(g.UserCode, userAlphabet+"-") != "" {
		t.Errorf("user code %q, want XXXX-XXXX from %s", g.UserCode, userAlphabet)
	}
	_, err = s.Token(ctx, g.DeviceCode)
	wantCode(t, err, CodePending)
	c.Add(time.Second) // sooner than the 5 s interval
	_, err = s.Token(ctx, g.DeviceCode)
	wantCode(t, err, CodeSlowDown)
	c.Add(11 * time.Second) // the interval is 10 s now
	_, err = s.Token(ctx, g.DeviceCode)
	wantCode(t, err, CodePending)

	p, err := s.Lookup(ctx, strings.ToLower(strings.ReplaceAll(g.UserCode, "-", " "))) // as typed
	if err != nil || p.ClientName != "alice@laptop" || p.UserCode != g.UserCode {
		t.Fatalf("lookup: %+v %v", p, err)
	}
	if err := s.Approve(ctx, Approval{UserCode: g.UserCode, KeyName: "alice", DailyLimitMicros: 0, By: "key_admin"}); !errors.Is(err, errs.Invalid) {
		t.Errorf("approve without a limit: %v, want Invalid (a device login never makes an admin key)", err)
	}
	if err := s.Approve(ctx, Approval{UserCode: g.UserCode, KeyName: "alice", DailyLimitMicros: 2_000_000, Trial: true, By: "key_admin"}); !errors.Is(err, errs.Invalid) {
		t.Errorf("approve a trial on a server without trials: %v, want Invalid", err)
	}
	if err := s.Approve(ctx, Approval{UserCode: g.UserCode, KeyName: "alice", DailyLimitMicros: 2_000_000, By: "key_admin"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Approve(ctx, Approval{UserCode: g.UserCode, KeyName: "again", DailyLimitMicros: 1, By: "key_admin"}); !errors.Is(err, errs.Conflict) {
		t.Errorf("approving twice: %v, want Conflict", err)
	}
	if err := s.Deny(ctx, g.UserCode, "key_admin"); !errors.Is(err, errs.Conflict) {
		t.Errorf("denying an approved code: %v, want Conflict", err)
	}
	c.Add(11 * time.Second)
	iss, err := s.Token(ctx, g.DeviceCode)
	if err != nil {
		t.Fatal(err)
	}
	k, err := auth.Authenticate(ctx, st, iss.Secret)
	if err != nil || k.ID != iss.Key.ID || k.Name != "alice" {
		t.Fatalf("issued key does not authenticate: %+v %v", k, err)
	}
	if lim, _ := st.KeyDailyLimit(ctx, k.ID); lim != 2_000_000 {
		t.Errorf("daily limit %d, want 2000000", lim)
	}
	c.Add(20 * time.Second)
	_, err = s.Token(ctx, g.DeviceCode) // the same device code, polled again (stolen)
	wantCode(t, err, CodeExpired)
	_, err = s.Token(ctx, "wrd_nope")
	wantCode(t, err, CodeBadDevice)
	if _, err := s.Lookup(ctx, g.UserCode); !errors.Is(err, errs.Conflict) {
		t.Errorf("lookup of a used code: %v, want Conflict", err)
	}

	// Only hashes are stored: neither code is in the database files.
	st.Close()
	for _, f := range []string{dbPath, dbPath + "-wal"} {
		data, _ := os.ReadFile(f)
		for _, secret := range []string{g.DeviceCode, strings.ReplaceAll(g.UserCode, "-", ""), g.UserCode, iss.Secret} {
			if bytes.Contains(data, []byte(secret)) {
				t.Errorf("%s holds %q in clear", filepath.Base(f), secret)
			}
		}
	}
}

// Refusals: denied, expired, unknown and malformed user codes.
func TestDeviceRefusals(t *testing.T) {
	ctx := context.Background()
	s, _, c, _ := newService(t, 0)
	denied, _ := s.Authorize(ctx, AuthorizeParams{})
	if err := s.Deny(ctx, denied.UserCode, "key_admin"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Token(ctx, denied.DeviceCode)
	wantCode(t, err, CodeDenied)

	late, _ := s.Authorize(ctx, AuthorizeParams{})
	c.Add(DefaultExpiresIn + time.Second)
	_, err = s.Token(ctx, late.DeviceCode)
	wantCode(t, err, CodeExpired)
	if err := s.Approve(ctx, Approval{UserCode: late.UserCode, KeyName: "x", DailyLimitMicros: 1}); !errors.Is(err, errs.NotFound) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("approving an expired code: %v, want NotFound saying it expired", err)
	}
	if _, err := s.Lookup(ctx, "BCDF-GHJK"); !errors.Is(err, errs.NotFound) {
		t.Errorf("unknown user code: %v, want NotFound", err)
	}
	if _, err := s.Lookup(ctx, "12"); !errors.Is(err, errs.Invalid) {
		t.Errorf("malformed user code: %v, want Invalid", err)
	}
	if _, err := s.Authorize(ctx, AuthorizeParams{ClientName: "evil\x1b[2J"}); !errors.Is(err, errs.Invalid) {
		t.Errorf("client name with a control character: %v, want Invalid", err)
	}
}

// Two polls racing after approval: exactly one gets the key.
func TestDeviceRedeemOnce(t *testing.T) {
	ctx := context.Background()
	s, st, _, _ := newService(t, 50)
	g, _ := s.Authorize(ctx, AuthorizeParams{Trial: true})
	if err := s.Approve(ctx, Approval{UserCode: g.UserCode, KeyName: "trial", DailyLimitMicros: 1_000_000, Trial: true}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var keys []Issued
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if iss, err := s.Token(ctx, g.DeviceCode); err == nil {
				mu.Lock()
				keys = append(keys, iss)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(keys) != 1 {
		t.Fatalf("%d polls got a key, want exactly 1", len(keys))
	}
	if keys[0].TrialHours != 50 {
		t.Errorf("trial hours %g, want 50", keys[0].TrialHours)
	}
	if n, _ := st.KeyTrial(ctx, keys[0].Key.ID); n != 50*3600 {
		t.Errorf("stored trial allowance %d s, want %d", n, 50*3600)
	}
	all, _ := st.ListKeys(ctx)
	if len(all) != 1 {
		t.Errorf("%d keys stored, want 1", len(all))
	}
}
