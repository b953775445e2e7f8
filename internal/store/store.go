// Package store keeps Runtime's durable state — sandboxes, API keys,
// usage, secrets — in SQLite (pure-Go driver, WAL mode). Schema changes are
// goose migrations embedded in the binary and applied on Open. Times are
// stored as Unix milliseconds (UTC). The database files (the database, its
// -wal and -shm) are readable by their owner only (0600), and secret values
// are sealed (see UseSecretsKeys) before they reach them.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"withruntime.dev/runtime/internal/secretkey"
)

//go:embed migrations/*.sql
var migrations embed.FS

// ErrNotFound says no record has that id.
var ErrNotFound = errors.New("not found")

// Store is the SQLite-backed record of sandboxes and keys. Safe for
// concurrent use.
type Store struct {
	db *sql.DB

	keysMu sync.RWMutex
	keys   *secretkey.Ring
}

// dbFileMode is the mode of the database files: the owner's only.
const dbFileMode = 0o600

// Open opens (creating if needed) the database at path and migrates it to
// the newest schema. The database file and its -wal and -shm are made
// 0600 (SQLite creates the -wal and -shm with the database file's mode), so
// files an older version left readable by others are closed too.
func Open(ctx context.Context, path string) (*Store, error) {
	if err := restrictFiles(path); err != nil {
		return nil, err
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// Out of order: migrations are numbered per feature branch, so a
	// database may already hold a higher number than one merged later
	// (00006 before 00005); goose then applies the missing one.
	provider, err := goose.NewProvider(goose.DialectSQLite3, db, mustSub(migrations, "migrations"),
		goose.WithAllowOutofOrder(true))
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: migrate %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// restrictFiles creates the database file 0600 if it is missing and takes
// group and other permissions off it and its -wal and -shm.
func restrictFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, dbFileMode)
	if err != nil {
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		if fi.Mode().Perm()&^dbFileMode != 0 {
			if err := os.Chmod(p, fi.Mode().Perm()&dbFileMode); err != nil {
				return fmt.Errorf("store: %w", err)
			}
		}
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func millis(t time.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func nullMillis(t *time.Time) any {
	if t == nil {
		return nil
	}
	return millis(*t)
}

func timePtr(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromMillis(n.Int64)
	return &t
}
