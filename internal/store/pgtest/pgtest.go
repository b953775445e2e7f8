// Package pgtest starts throwaway PostgreSQL clusters for tests: initdb
// into a temporary directory and `postgres` listening only on a unix socket
// there (an empty listen_addresses: no TCP), with fsync off. As root, both run as
// the `postgres` OS user (through runuser; PostgreSQL refuses root). The
// server binaries are Debian's postgresql package, found under
// /usr/lib/postgresql/*/bin; without them a test fails and says to run
// scripts/install.sh.
//
// A test package starts one cluster and gives each test a fresh database:
//
//	var pg pgtest.Shared
//
//	func TestMain(m *testing.M) { code := m.Run(); pg.Stop(); os.Exit(code) }
//
//	func TestX(t *testing.T) { dsn := pg.Database(t) ... }
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// ErrNotInstalled says PostgreSQL's server binaries are missing.
var ErrNotInstalled = errors.New("PostgreSQL's server binaries are not installed (no /usr/lib/postgresql/*/bin/postgres); run scripts/install.sh as root, which installs Debian's postgresql package")

// Cluster is one running throwaway PostgreSQL server.
type Cluster struct {
	dir  string // socket directory; data/ and log inside
	bin  string
	cmd  *exec.Cmd
	done chan struct{}
	log  string

	mu    sync.Mutex
	admin *sql.DB // connected to the "postgres" database, to create others
}

// Start initialises and starts a cluster in a new temporary directory and
// waits (up to 60 s) until it accepts connections. Stop it with Stop.
func Start() (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	// A short path: a unix socket's path is limited to 107 bytes.
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, bin: bin, done: make(chan struct{}), log: filepath.Join(dir, "postgres.log")}
	if err := c.start(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// New starts a cluster for one test and stops it when the test ends.
func New(t testing.TB) *Cluster {
	t.Helper()
	c, err := Start()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

// binGlob finds the server binaries (Debian's layout).
var binGlob = "/usr/lib/postgresql/*/bin/postgres"

func binDir() (string, error) {
	found, _ := filepath.Glob(binGlob)
	if len(found) == 0 {
		return "", ErrNotInstalled
	}
	// The newest major version.
	sort.Slice(found, func(i, j int) bool { return version(found[i]) > version(found[j]) })
	bin := filepath.Dir(found[0])
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		return "", fmt.Errorf("%s has postgres but no initdb: %w", bin, ErrNotInstalled)
	}
	return bin, nil
}

func version(postgresPath string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(postgresPath))))
	return n
}

// command runs a PostgreSQL program as the postgres user when we are root.
func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	prog := filepath.Join(c.bin, name)
	if os.Geteuid() != 0 {
		return exec.Command(prog, args...)
	}
	return exec.Command("runuser", append([]string{"-u", "postgres", "--", prog}, args...)...)
}

func (c *Cluster) start() error {
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("the postgres OS user is missing (%v): %w", err, ErrNotInstalled)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(c.dir, uid, gid); err != nil {
			return err
		}
	}
	data := filepath.Join(c.dir, "data")
	initdb := c.command("initdb", "-D", data, "--auth=trust", "--username=postgres", "--encoding=UTF8",
		"--locale=C", "--no-sync", "--no-instructions")
	initdb.Dir = c.dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	logf, err := os.Create(c.log)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := c.command("postgres", "-D", data, "-k", c.dir,
		"-c", "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200")
	cmd.Dir, cmd.Stdout, cmd.Stderr = c.dir, logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	c.cmd = cmd
	go func() { cmd.Wait(); close(c.done) }() //nolint:errcheck // the log says why

	db, err := sql.Open("pgx", c.URL("postgres"))
	if err != nil {
		return err
	}
	c.admin = db
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("postgres exited at start: %s", c.tail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within 60 s (%v): %s", err, c.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) tail() string {
	b, _ := os.ReadFile(c.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(bytes.TrimSpace(b))
}

// URL is the postgres:// URL of database db on the cluster (user postgres,
// over the unix socket, no password).
func (c *Cluster) URL(db string) string {
	return "postgres://postgres@/" + url.PathEscape(db) + "?host=" + url.QueryEscape(c.dir) + "&sslmode=disable"
}

// DataDir is the cluster's data directory (its files, for tests that look
// at what reached the disk).
func (c *Cluster) DataDir() string { return filepath.Join(c.dir, "data") }

// SocketDir is the directory of the cluster's unix socket.
func (c *Cluster) SocketDir() string { return c.dir }

// NewDatabase creates an empty database and returns its URL; it is
// dropped when the test ends.
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	if _, err := c.admin.Exec(`CREATE DATABASE ` + name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		if _, err := c.admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return c.URL(name)
}

// Stop stops the server (immediate shutdown: nothing in it is kept) and
// removes its directory.
func (c *Cluster) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.admin != nil {
		c.admin.Close()
		c.admin = nil
	}
	if c.cmd != nil {
		stop := c.command("pg_ctl", "stop", "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "-w", "-t", "30")
		stop.Dir = c.dir
		stop.Run() //nolint:errcheck // the kill below is the fallback
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			c.cmd.Process.Kill() //nolint:errcheck
			<-c.done
		}
		c.cmd = nil
	}
	os.RemoveAll(c.dir)
}

// Shared is a cluster started on first use and shared by a test package's
// tests (each gets its own database); the package's TestMain calls Stop.
type Shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Cluster returns the shared cluster, starting it on first use; a test
// that cannot have it fails.
func (s *Shared) Cluster(t testing.TB) *Cluster {
	t.Helper()
	s.once.Do(func() { s.c, s.err = Start() })
	if s.err != nil {
		t.Fatalf("pgtest: %v", s.err)
	}
	return s.c
}

// Database returns the URL of a fresh database on the shared cluster.
func (s *Shared) Database(t testing.TB) string {
	t.Helper()
	return s.Cluster(t).NewDatabase(t)
}

// Stop stops the shared cluster if it was started.
func (s *Shared) Stop() {
	if s.c != nil {
		s.c.Stop()
	}
}
