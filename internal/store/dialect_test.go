package store

import (
	"context"
	"io/fs"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestRebind(t *testing.T) {
	for in, want := range map[string]string{
		`SELECT a FROM t WHERE b = ? AND c IN (?, ?)`:        `SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)`,
		`SELECT '?', "we?rd" FROM t WHERE x = ? AND y = '?'`: `SELECT '?', "we?rd" FROM t WHERE x = $1 AND y = '?'`,
		`SELECT 'it''s ?' FROM t WHERE x = ?`:                `SELECT 'it''s ?' FROM t WHERE x = $1`,
		`SELECT 1`:                                           `SELECT 1`,
	} {
		if got := dialectPostgres.rebind(in); got != want {
			t.Errorf("rebind(%s) = %s, want %s", in, got, want)
		}
		if got := dialectSQLite.rebind(in); got != in {
			t.Errorf("SQLite rebind(%s) = %s, want it unchanged", in, got)
		}
	}
	args := []any{true, 1, false}
	if got := dialectPostgres.args(args); !slices.Equal(got, []any{1, 1, 0}) || args[0] != true {
		t.Errorf("args = %v (caller's %v)", got, args)
	}
}

// The rule of the package doc: every migration exists for both databases,
// under the same version and name.
func TestMigrationsTwinned(t *testing.T) {
	names := func(f fs.FS) []string {
		var out []string
		entries, err := fs.ReadDir(f, ".")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	lite, pgs := names(mustSub(migrations, "migrations")), names(mustSub(migrationsPostgres, "migrations_postgres"))
	if !slices.Equal(lite, pgs) || len(lite) == 0 {
		t.Errorf("migrations differ:\n  SQLite:     %v\n  PostgreSQL: %v\nwrite each schema change in both directories", lite, pgs)
	}
}

// Polls that arrive at once are seen one after the other: one is on time,
// every other one is slow and grows the interval (on PostgreSQL the row is
// read FOR UPDATE; on SQLite a poll that loses the race for the write lock
// fails instead, and is not counted).
func TestPollDeviceCodeRace(t *testing.T) { eachBackend(t, testPollDeviceCodeRace) }

func testPollDeviceCodeRace(t *testing.T, dsn string) {
	ctx := context.Background()
	st := openStore(t, dsn)
	now := time.UnixMilli(1_700_000_000_000).UTC()
	if err := st.InsertDeviceCode(ctx, DeviceCode{DeviceHash: "d", UserHash: "u", State: DevicePending,
		CreatedAt: now, ExpiresAt: now.Add(time.Hour), IntervalSeconds: 5}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	onTime, slow := 0, 0
	for range 8 {
		wg.Go(func() {
			_, s, err := st.PollDeviceCode(ctx, "d", now, 5)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && isBusy(err):
			case err != nil:
				t.Errorf("poll: %v", err)
			case s:
				slow++
			default:
				onTime++
			}
		})
	}
	wg.Wait()
	d, err := st.DeviceCodeByDeviceHash(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	if onTime != 1 || d.IntervalSeconds != int64(5+5*slow) {
		t.Errorf("%d polls on time, %d slow, interval %d s; want 1 on time and 5 s more per slow poll", onTime, slow, d.IntervalSeconds)
	}
	if st.Postgres() && slow != 7 {
		t.Errorf("PostgreSQL: %d slow polls, want 7", slow)
	}
}
