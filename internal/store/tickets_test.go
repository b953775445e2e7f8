package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// Terminal tickets on both databases: one taken returns what was minted and
// is gone; the per-session bound holds and expired tickets leave room; of
// many concurrent takes of one ticket exactly one wins.
func TestTerminalTickets(t *testing.T) { eachBackend(t, testTerminalTickets) }

func testTerminalTickets(t *testing.T, dsn string) {
	ctx := context.Background()
	st := openStore(t, dsn)
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	tk := TerminalTicket{Hash: "h1", SessionHash: "s1", SandboxID: "sbx_1", Pid: 42, ExpiresAt: t0.Add(30 * time.Second)}
	if err := st.InsertTerminalTicket(ctx, tk, t0, 2); err != nil {
		t.Fatal(err)
	}
	got, err := st.TakeTerminalTicket(ctx, "h1")
	if err != nil || got != tk {
		t.Fatalf("take: %+v %v, want %+v", got, err, tk)
	}
	if _, err := st.TakeTerminalTicket(ctx, "h1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a ticket taken twice: %v, want ErrNotFound", err)
	}
	if _, err := st.TakeTerminalTicket(ctx, "never"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a ticket never minted: %v, want ErrNotFound", err)
	}

	// The bound: two live tickets per session here; another session is not
	// counted; an expired ticket is swept at the next insert.
	for _, h := range []string{"a", "b"} {
		if err := st.InsertTerminalTicket(ctx, TerminalTicket{Hash: h, SessionHash: "s1", SandboxID: "sbx_1", Pid: 1, ExpiresAt: t0.Add(time.Second)}, t0, 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.InsertTerminalTicket(ctx, TerminalTicket{Hash: "c", SessionHash: "s1", SandboxID: "sbx_1", Pid: 1, ExpiresAt: t0.Add(time.Second)}, t0, 2); !errors.Is(err, ErrTooMany) {
		t.Errorf("a third live ticket: %v, want ErrTooMany", err)
	}
	if err := st.InsertTerminalTicket(ctx, TerminalTicket{Hash: "d", SessionHash: "s2", SandboxID: "sbx_1", Pid: 1, ExpiresAt: t0.Add(time.Second)}, t0, 2); err != nil {
		t.Errorf("another session's ticket: %v", err)
	}
	later := t0.Add(2 * time.Second)
	if err := st.InsertTerminalTicket(ctx, TerminalTicket{Hash: "e", SessionHash: "s1", SandboxID: "sbx_1", Pid: 1, ExpiresAt: later.Add(time.Second)}, later, 2); err != nil {
		t.Errorf("a ticket once the others expired: %v", err)
	}
	if _, err := st.TakeTerminalTicket(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("an expired ticket was not swept: %v", err)
	}

	// One winner among concurrent takes.
	if err := st.InsertTerminalTicket(ctx, TerminalTicket{Hash: "race", SessionHash: "s3", SandboxID: "sbx_1", Pid: 1, ExpiresAt: later.Add(time.Minute)}, later, 2); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := st.TakeTerminalTicket(ctx, "race")
			if err == nil {
				mu.Lock()
				won++
				mu.Unlock()
			} else if !errors.Is(err, ErrNotFound) {
				t.Errorf("concurrent take: %v", err)
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Errorf("%d concurrent takes of one ticket succeeded, want 1", won)
	}
}
