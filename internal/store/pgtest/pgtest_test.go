package pgtest

import (
	"database/sql"
	"errors"
	"os"
	"strings"
	"testing"
)

// Without the binaries a test cannot have a cluster: Start fails and says
// how to install them (a test using it fails rather than skips).
func TestMissingBinaries(t *testing.T) {
	old := binGlob
	binGlob = "/nonexistent/postgresql/*/bin/postgres"
	defer func() { binGlob = old }()
	c, err := Start()
	if err == nil {
		c.Stop()
		t.Fatal("Start worked without binaries")
	}
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "scripts/install.sh") {
		t.Errorf("Start: %v", err)
	}
}

// A cluster answers on its socket only, gives each test its own database,
// and leaves nothing behind.
func TestCluster(t *testing.T) {
	c, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	dir := c.SocketDir()
	t.Run("database", func(t *testing.T) {
		db, err := sql.Open("pgx", c.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var listen string
		if err := db.QueryRow(`SHOW listen_addresses`).Scan(&listen); err != nil || listen != "" {
			t.Errorf("listen_addresses = %q, %v; want none (no TCP)", listen, err)
		}
	})
	c.Stop()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the cluster's directory is left: %v", err)
	}
}
