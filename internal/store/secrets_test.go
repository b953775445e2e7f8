package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"withruntime.dev/runtime/internal/secretkey"
)

func openWithKey(t *testing.T, dsn string, k *secretkey.Key) *Store {
	t.Helper()
	st, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	st.UseSecretsKeys(secretkey.NewRing(k))
	return st
}

func newKey(t *testing.T) *secretkey.Key {
	t.Helper()
	k, err := secretkey.New()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// onDisk reports which of the database's files (the database, -wal, -shm)
// hold b, byte for byte.
func onDisk(t *testing.T, path string, b string) []string {
	t.Helper()
	var in []string
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		data, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte(b)) {
			in = append(in, filepath.Base(p))
		}
	}
	return in
}

// Secrets are keyed by (owner, name): two owners' secrets of one name are
// two secrets, each seen, read and deleted only through its owner.
func TestSecretOwners(t *testing.T) { eachBackend(t, testSecretOwners) }

func testSecretOwners(t *testing.T, dsn string) {
	ctx := context.Background()
	st := openWithKey(t, dsn, newKey(t))
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, s := range []Secret{
		{Owner: "key_a", Name: "API_KEY", Value: "value-of-a", Hosts: []string{"a.example.com"}},
		{Owner: "key_b", Name: "API_KEY", Value: "value-of-b", Hosts: []string{"b.example.com"}},
		{Owner: "", Name: "API_KEY", Value: "value-of-server", Hosts: []string{"s.example.com"}},
	} {
		if err := st.PutSecret(ctx, s, now); err != nil {
			t.Fatal(err)
		}
	}
	for owner, want := range map[string]string{"key_a": "value-of-a", "key_b": "value-of-b", "": "value-of-server"} {
		sec, err := st.GetSecret(ctx, owner, "API_KEY")
		if err != nil || sec.Value != want || sec.Owner != owner {
			t.Errorf("GetSecret(%q) = %v %q, %v; want %q", owner, sec, sec.Value, err, want)
		}
	}
	if _, err := st.GetSecret(ctx, "key_c", "API_KEY"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another owner's name: %v, want ErrNotFound", err)
	}
	mine, _ := st.ListSecrets(ctx, SecretFilter{Owner: "key_a"})
	if len(mine) != 1 || mine[0].Owner != "key_a" || mine[0].Hosts[0] != "a.example.com" {
		t.Errorf("key_a lists %v", mine)
	}
	all, _ := st.ListSecrets(ctx, SecretFilter{AllOwners: true})
	if len(all) != 3 {
		t.Errorf("all owners: %v", all)
	}
	if err := st.DeleteSecret(ctx, "key_c", "API_KEY"); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete by another owner: %v, want ErrNotFound", err)
	}
	if err := st.DeleteSecret(ctx, "key_a", "API_KEY"); err != nil {
		t.Fatal(err)
	}
	if sec, err := st.GetSecret(ctx, "key_b", "API_KEY"); err != nil || sec.Value != "value-of-b" {
		t.Errorf("key_b's secret after key_a deleted its own: %v", err)
	}
}

// Values are sealed before they reach the database: no file of it holds a
// value, before or after a checkpoint, while the hosts (kept in clear)
// show that the check looks where the data lands. SQLite's files are 0600.
// On PostgreSQL the files are the whole cluster's data directory, WAL
// included.
func TestSecretsAtRest(t *testing.T) { eachBackend(t, testSecretsAtRest) }

func testSecretsAtRest(t *testing.T, dsn string) {
	ctx := context.Background()
	st := openWithKey(t, dsn, newKey(t))
	const value, host = "sk-at-rest-5e4d3c2b1a09", "at-rest-marker.example.com"
	if err := st.PutSecret(ctx, Secret{Name: "API_KEY", Value: value, Hosts: []string{host}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	checkpoint := func() {
		if err := st.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		if st.Postgres() { // Checkpoint leaves it to the server; the test's user may ask
			if _, err := st.db.ExecContext(ctx, `CHECKPOINT`); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st.Postgres() {
		checkpoint() // the WAL holds the row at once; the table file after a checkpoint
	}
	if in := atRest(t, dsn, host); len(in) == 0 {
		t.Fatal("the hosts are in no database file: the check does not look where the data is")
	}
	if in := atRest(t, dsn, value); len(in) > 0 {
		t.Errorf("the value is in clear in %v before a checkpoint", in)
	}
	checkpoint()
	if in := atRest(t, dsn, value); len(in) > 0 {
		t.Errorf("the value is in clear in %v after a checkpoint", in)
	}
	if sec, err := st.GetSecret(ctx, "", "API_KEY"); err != nil || sec.Value != value {
		t.Errorf("GetSecret: %v", err)
	}
	if st.Postgres() {
		return
	}
	for _, p := range []string{dsn, dsn + "-wal", dsn + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", filepath.Base(p), fi.Mode().Perm())
		}
	}
}

// atRest reports which files of the database dsn hold b: SQLite's database,
// -wal and -shm, or every file of the PostgreSQL cluster's data directory.
func atRest(t *testing.T, dsn, b string) []string {
	t.Helper()
	if !IsPostgresURL(dsn) {
		return onDisk(t, dsn, b)
	}
	var in []string
	root := pg.Cluster(t).DataDir()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil // removed meanwhile
		}
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte(b)) {
			rel, _ := filepath.Rel(root, p)
			in = append(in, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// An older version's files readable by others are closed at Open. (SQLite
// only: PostgreSQL's files are its server's.)
func TestOpenRestrictsFiles(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "runtime.db")
	st, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	// Closing removed the -wal and -shm; empty ones are valid for SQLite.
	for _, p := range []string{path + "-wal", path + "-shm"} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %04o after Open, want 0600", filepath.Base(p), fi.Mode().Perm())
		}
	}
}

// A value sealed with another key, or moved to another row, is an error
// that says so; nothing of it is returned.
func TestSecretUnreadable(t *testing.T) { eachBackend(t, testSecretUnreadable) }

func testSecretUnreadable(t *testing.T, dsn string) {
	ctx := context.Background()
	k1, k2 := newKey(t), newKey(t)
	st := openWithKey(t, dsn, k1)
	for _, owner := range []string{"key_a", "key_b"} {
		if err := st.PutSecret(ctx, Secret{Owner: owner, Name: "API_KEY", Value: "value-of-" + owner, Hosts: []string{"a.example.com"}}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	st.UseSecretsKeys(secretkey.NewRing(k2))
	sec, err := st.GetSecret(ctx, "key_a", "API_KEY")
	if !errors.Is(err, ErrUnreadable) || sec.Value != "" || !strings.Contains(err.Error(), k1.ID()) || !strings.Contains(err.Error(), k2.ID()) {
		t.Errorf("with another key: %q, %v; want ErrUnreadable naming both keys", sec.Value, err)
	}
	st.UseSecretsKeys(secretkey.NewRing(k1))
	// Someone with write access to the database copies b's sealed value
	// into a's row.
	if _, err := st.db.ExecContext(ctx, `UPDATE secrets SET value = (SELECT value FROM secrets WHERE owner = 'key_b') WHERE owner = 'key_a'`); err != nil {
		t.Fatal(err)
	}
	sec, err = st.GetSecret(ctx, "key_a", "API_KEY")
	if !errors.Is(err, ErrUnreadable) || sec.Value != "" {
		t.Errorf("a value moved to another row: %q, %v; want ErrUnreadable", sec.Value, err)
	}
	if _, err := st.ResealSecrets(ctx); err != nil {
		t.Fatal(err) // everything is sealed with k1: nothing to do
	}
	st.UseSecretsKeys(secretkey.NewRing(k2))
	if _, err := st.ResealSecrets(ctx); !errors.Is(err, ErrUnreadable) {
		t.Errorf("ResealSecrets without the sealing key: %v, want ErrUnreadable", err)
	}
}

// Clear-text values of a database from before sealing are sealed by
// ResealSecrets, and the rewrite leaves none of them on disk (SQLite: in no
// file; PostgreSQL: in no file of the secrets table, old or new — its WAL
// is the database server's, see Compact).
func TestResealLegacyClearValues(t *testing.T) { eachBackend(t, testResealLegacyClearValues) }

func testResealLegacyClearValues(t *testing.T, dsn string) {
	ctx := context.Background()
	const value = "sk-legacy-clear-7a6b5c4d"
	old := openAtVersion(t, dsn, 3)
	if _, err := old.ExecContext(ctx, `INSERT INTO secrets (name, value, hosts, created_at, updated_at) VALUES ('OLD', ?, '["a.example.com"]', 1, 1)`, value); err != nil {
		t.Fatal(err)
	}
	if _, err := old.ExecContext(ctx, `INSERT INTO sandbox_network (sandbox_id, secrets) VALUES ('sbx_1', '["OLD"]')`); err != nil {
		t.Fatal(err)
	}
	old.Close()

	k := newKey(t)
	st := openWithKey(t, dsn, k)
	var files []string // the secrets table's files, old ones included
	stored := func(t *testing.T, path, b string) []string {
		t.Helper()
		if !st.Postgres() {
			return onDisk(t, path, b)
		}
		if _, err := st.db.ExecContext(ctx, `CHECKPOINT`); err != nil {
			t.Fatal(err)
		}
		files = append(files, tableFile(t, st, "secrets"))
		var in []string
		for _, f := range files {
			if data, _ := os.ReadFile(f); bytes.Contains(data, []byte(b)) {
				in = append(in, f)
			}
		}
		return in
	}
	path := dsn
	if in := stored(t, path, value); len(in) == 0 {
		t.Fatal("the legacy value is not on disk before sealing: the check proves nothing")
	}
	if _, err := st.GetSecret(ctx, "", "OLD"); !errors.Is(err, ErrUnreadable) {
		t.Errorf("a clear value before sealing: %v, want ErrUnreadable (never used unsealed)", err)
	}
	n, err := st.ResealSecrets(ctx)
	if err != nil || n != 1 {
		t.Fatalf("ResealSecrets = %d, %v", n, err)
	}
	if in := stored(t, path, value); len(in) > 0 {
		t.Errorf("after sealing, the clear value is still in %v", in)
	}
	sec, err := st.GetSecret(ctx, "", "OLD")
	if err != nil || sec.Value != value {
		t.Errorf("the sealed legacy secret: %q, %v", sec.Value, err)
	}
	rec, err := st.GetSandboxNetwork(ctx, "sbx_1")
	if err != nil || rec.SecretOwner != "" || len(rec.Secrets) != 1 {
		t.Errorf("a sandbox's secrets from before owners: %+v, %v", rec, err)
	}
	counts, _ := st.SecretsSealedWith(ctx)
	if counts[k.ID()] != 1 || len(counts) != 1 {
		t.Errorf("sealed with: %v", counts)
	}
}

// openAtVersion opens the database dsn without Store and migrates it only
// up to version.
func openAtVersion(t *testing.T, dsn string, version int64) *conn {
	t.Helper()
	driver, dialect, d, dir := "sqlite", goose.DialectSQLite3, dialectSQLite, "migrations"
	src := "file:" + dsn + "?_pragma=journal_mode(WAL)"
	if IsPostgresURL(dsn) {
		driver, dialect, d, dir, src = "pgx", goose.DialectPostgres, dialectPostgres, "migrations_postgres", dsn
	}
	db, err := sql.Open(driver, src)
	if err != nil {
		t.Fatal(err)
	}
	fsys := mustSub(migrations, dir)
	if d == dialectPostgres {
		fsys = mustSub(migrationsPostgres, dir)
	}
	p, err := goose.NewProvider(dialect, db, fsys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(context.Background(), version); err != nil {
		t.Fatal(err)
	}
	return &conn{db: db, d: d}
}

// tableFile returns the file that holds table on the PostgreSQL cluster.
func tableFile(t *testing.T, st *Store, table string) string {
	t.Helper()
	var rel string
	if err := st.db.QueryRowContext(context.Background(), `SELECT pg_relation_filepath(?)`, table).Scan(&rel); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(pg.Cluster(t).DataDir(), rel)
}
