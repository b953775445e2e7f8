// Package store keeps Runtime's durable state — sandboxes, API keys,
// usage, secrets — in SQLite (pure-Go driver, WAL mode; the default, one
// file in the data directory) or in PostgreSQL (pgx; for several API
// replicas sharing one state). Open chooses by its argument: a postgres://
// or postgresql:// URL is PostgreSQL, anything else a SQLite file path.
//
// There is one Store type and one set of queries, written with `?`
// placeholders in SQL both databases speak; dialect.go holds the few
// differences (placeholder rebinding, JSON and date functions, row locks,
// constraint errors). Schema changes are goose migrations embedded in the
// binary and applied on Open, written twice side by side: migrations/ for
// SQLite and migrations_postgres/ for PostgreSQL, with the same version
// numbers and the same meaning. A schema change adds a file to both.
//
// Times are stored as Unix milliseconds (UTC). The SQLite files (the
// database, its -wal and -shm) are readable by their owner only (0600);
// secret values are sealed (see UseSecretsKeys) before they reach either
// database.
//
// Concurrency: SQLite allows one writer at a time, which made every
// read-then-write safe for free. PostgreSQL runs writers concurrently
// (READ COMMITTED), so each method that decides on what it read either does
// it in one conditional UPDATE (the row lock makes a second writer re-check
// the WHERE clause against the committed row and match nothing: RecordUsage,
// MarkResumed, DecideDeviceCode, RedeemDeviceCode) or reads with SELECT ...
// FOR UPDATE inside its transaction (PollDeviceCode, ResealSecrets), or
// starts with an UPDATE of the row that guards the work (CompactUsage's
// watermark: a second compaction waits for the first).
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"withruntime.dev/runtime/internal/secretkey"
)

//go:embed migrations/*.sql
var migrations embed.FS

//go:embed migrations_postgres/*.sql
var migrationsPostgres embed.FS

// ErrNotFound says no record has that id.
var ErrNotFound = errors.New("not found")

// Store is the record of sandboxes and keys, in SQLite or PostgreSQL. Safe
// for concurrent use (and, on PostgreSQL, by several servers at once).
type Store struct {
	db *conn

	keysMu sync.RWMutex
	keys   *secretkey.Ring
}

// dbFileMode is the mode of the database files: the owner's only.
const dbFileMode = 0o600

// IsPostgresURL reports whether dsn names a PostgreSQL database (a
// postgres:// or postgresql:// URL) rather than a SQLite file.
func IsPostgresURL(dsn string) bool {
	l := strings.ToLower(dsn)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// Redact returns dsn fit for logs and errors: a URL (postgres://...) with
// its password, in the user part or a password= parameter, replaced by
// "xxxxx" (a URL that does not parse becomes SCHEME://(unparsable URL)); a
// SQLite path as it is.
func Redact(dsn string) string {
	scheme, _, isURL := strings.Cut(dsn, "://")
	if !isURL {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return scheme + "://(unparsable URL)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// Open opens the store named by dsn and migrates it to the newest schema.
//
// A postgres:// or postgresql:// URL opens that PostgreSQL database (any
// libpq URL parameter works: sslmode, connect_timeout, host=/socket/dir...).
// A URL that does not parse, a server that cannot be reached within 15 s
// (or the URL's connect_timeout), or failed authentication is an error
// that says which, with the password never shown.
//
// Anything else is the path of a SQLite database, created if needed. The
// database file and its -wal and -shm are made 0600 (SQLite creates the
// -wal and -shm with the database file's mode), so files an older version
// left readable by others are closed too.
func Open(ctx context.Context, dsn string) (*Store, error) {
	if IsPostgresURL(dsn) {
		return openPostgres(ctx, dsn)
	}
	return openSQLite(ctx, dsn)
}

func openSQLite(ctx context.Context, path string) (*Store, error) {
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
	return &Store{db: &conn{db: db, d: dialectSQLite}}, nil
}

// pgConnectTimeout bounds the first connection when the URL sets no
// connect_timeout of its own.
const pgConnectTimeout = 15 * time.Second

const pgURLHelp = "write it as postgres://USER:PASSWORD@HOST:5432/DATABASE?sslmode=require (or sslmode=disable on a trusted network)"

func openPostgres(ctx context.Context, dsn string) (*Store, error) {
	safe := Redact(dsn)
	if _, err := url.Parse(dsn); err != nil {
		// url's error quotes the URL, password included: say only what kind.
		return nil, fmt.Errorf("store: the PostgreSQL URL %s does not parse as a URL; %s (characters such as @ : / in the password must be percent-encoded)", safe, pgURLHelp)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: the PostgreSQL URL %s is not valid (%v); %s", safe, err, pgURLHelp)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = pgConnectTimeout
	}
	where := fmt.Sprintf("database %q on %s:%d as user %q", cfg.Database, cfg.Host, cfg.Port, cfg.User)
	if strings.HasPrefix(cfg.Host, "/") {
		where = fmt.Sprintf("database %q on the unix socket in %s as user %q", cfg.Database, cfg.Host, cfg.User)
	}
	db := stdlib.OpenDB(*cfg)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: cannot connect to PostgreSQL (%s, from %s): %w; check that the server runs and accepts connections there and that the URL's host, port, user, password, database and sslmode are right", where, safe, err)
	}
	// Several servers may start at once against one database: a session
	// advisory lock lets one of them migrate at a time.
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, mustSub(migrationsPostgres, "migrations_postgres"),
		goose.WithAllowOutofOrder(true), goose.WithSessionLocker(locker))
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: migrate PostgreSQL %s: %w", where, err)
	}
	return &Store{db: &conn{db: db, d: dialectPostgres}}, nil
}

// Postgres reports whether the store is in PostgreSQL (false: SQLite).
func (s *Store) Postgres() bool { return s.db.d == dialectPostgres }

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
