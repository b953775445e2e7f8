package itest

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/server"
	"withruntime.dev/runtime/internal/store/pgtest"
)

// withStore keeps the server's records in dsn (serve --store).
func withStore(dsn string) option { return func(c *server.Config) { c.Store = dsn } }

// TestPostgresStore: a server whose store is PostgreSQL (a throwaway
// cluster of Debian's postgresql, on a unix socket) runs the README's main
// job, and the usage ledger — in PostgreSQL, not in a SQLite file — has the
// sandbox's row covering its life.
func TestPostgresStore(t *testing.T) {
	dsn := pgtest.New(t).NewDatabase(t)
	e := newEnv(t, withStore(dsn), withMeterInterval(500*time.Millisecond))
	if !e.srv.Store.Postgres() {
		t.Fatal("the server's store is not PostgreSQL")
	}
	sb := e.create(api.CreateSandboxRequest{Metadata: map[string]string{"task": "pg"}})
	res := e.exec(sb.ID, agentapi.ExecRequest{Argv: []string{"python3", "-c", "print(6*7)"}})
	if res.ExitCode != 0 || res.Stdout != "42\n" {
		t.Fatalf("python3: %+v", res)
	}
	var list api.SandboxList
	e.must(http.StatusOK, "GET", "/v1/sandboxes?metadata.task=pg", nil, &list)
	if len(list.Sandboxes) != 1 || list.Sandboxes[0].ID != sb.ID {
		t.Fatalf("list by metadata: %+v", list)
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
	var got api.Sandbox
	e.must(http.StatusOK, "GET", "/v1/sandboxes/"+sb.ID, nil, &got)
	if got.State != "stopped" || got.EndReason != "deleted" {
		t.Fatalf("after delete: %+v", got)
	}
	sum := e.ledgerSpan(got) // the intervals cover its life exactly once
	if row := e.sandboxRow(sb.ID); row.GiBSeconds <= 0 || sum.WallSeconds <= 0 {
		t.Errorf("usage row of %s: %+v (ledger %+v)", sb.ID, row, sum)
	}
	if rep := e.usage("groupBy=day"); len(rep.Rows) != 1 || rep.Rows[0].Group != got.EndedAt.Add(-time.Millisecond).UTC().Format(time.DateOnly) {
		t.Errorf("usage by day: %+v", rep.Rows)
	}

	// The rows are in PostgreSQL, and no SQLite file was made.
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM usage_intervals WHERE sandbox_id = $1`, sb.ID).Scan(&n); err != nil || n == 0 {
		t.Errorf("usage_intervals rows of %s in PostgreSQL: %d, %v", sb.ID, n, err)
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, "runtime.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the data directory has a SQLite database: %v", err)
	}
}
