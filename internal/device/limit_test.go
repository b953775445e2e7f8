package device

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

func limitedService(t *testing.T, cfg Config) (*Service, *clock) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := &clock{now: time.Now().UTC()}
	cfg.Store, cfg.Now = st, c.Now
	return New(cfg), c
}

// TestAuthorizeLimits: logins are counted per client address (IPv4
// address, IPv6 /64), per network (IPv4 /24, IPv6 /48) and in total; a
// client over its share gets 429 rate_limited with the wait, and other
// clients go on; a refused login takes no place.
func TestAuthorizeLimits(t *testing.T) {
	ctx := context.Background()
	s, c := limitedService(t, Config{MaxLive: 100, MaxPerAddress: 3, MaxPerNetwork: 5})
	from := func(addr string) error {
		t.Helper()
		_, err := s.Authorize(ctx, AuthorizeParams{Client: netip.MustParseAddr(addr)})
		return err
	}
	limited := func(addr, which string) {
		t.Helper()
		err := from(addr)
		if !errors.Is(err, errs.RateLimited) || !strings.Contains(err.Error(), which) {
			t.Fatalf("from %s: %v, want rate_limited naming the %s limit", addr, err, which)
		}
		if d := errs.RetryAfter(err); d <= 0 || d > DefaultExpiresIn {
			t.Fatalf("from %s: retry after %s", addr, d)
		}
	}
	for i := range 3 {
		if err := from("10.0.0.1"); err != nil {
			t.Fatalf("login %d from 10.0.0.1: %v", i, err)
		}
	}
	for range 5 {
		limited("10.0.0.1", "per-address")
	}
	limited("::ffff:10.0.0.1", "per-address") // the same address, mapped
	for range 2 {
		if err := from("10.0.0.2"); err != nil {
			t.Fatal(err)
		}
	}
	limited("10.0.0.3", "per-network") // 5 from 10.0.0.0/24
	if err := from("10.0.1.1"); err != nil {
		t.Fatalf("another network: %v", err)
	}

	// IPv6: one /64 is one address; /64s of one /48 are one network.
	for i := range 3 {
		if err := from("2001:db8:0:1::" + string(rune('1'+i))); err != nil {
			t.Fatal(err)
		}
	}
	limited("2001:db8:0:1:ffff:ffff:ffff:ffff", "per-address")
	if err := from("2001:db8:0:2::1"); err != nil {
		t.Fatalf("another /64: %v", err)
	}

	// The window passes: the address may start logins again.
	c.Add(DefaultExpiresIn)
	if err := from("10.0.0.1"); err != nil {
		t.Fatalf("after the window: %v", err)
	}

	// The total: a full pool is 503 (capacity); a refused login takes no
	// place of its address's, so the next try is refused for the pool
	// again, not for the address.
	s, _ = limitedService(t, Config{MaxLive: 2, MaxPerAddress: 1})
	for _, a := range []string{"192.0.2.1", "198.51.100.1"} {
		if err := from(a); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		err := from("203.0.113.1")
		if !errors.Is(err, errs.Capacity) || !strings.Contains(err.Error(), "total limit") || errs.RetryAfter(err) != time.Minute {
			t.Fatalf("a full pool: %v (retry after %s), want capacity naming the total limit", err, errs.RetryAfter(err))
		}
	}
}
