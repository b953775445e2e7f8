package store

import (
	"os"
	"path/filepath"
	"testing"

	"withruntime.dev/runtime/internal/store/pgtest"
)

// pg is this package's PostgreSQL cluster, started by the first test that
// needs it; every test gets a fresh database on it.
var pg pgtest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	pg.Stop()
	os.Exit(code)
}

// eachBackend runs f as a subtest against each database: "sqlite" with
// the path of a new file, "postgres" with the URL of a new database.
func eachBackend(t *testing.T, f func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { f(t, filepath.Join(t.TempDir(), "runtime.db")) })
	t.Run("postgres", func(t *testing.T) { f(t, pg.Database(t)) })
}
