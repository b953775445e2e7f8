package server

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/secretkey"
	"withruntime.dev/runtime/internal/store"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(dir, "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func mustValue(t *testing.T, st *store.Store, owner, name, want string) {
	t.Helper()
	sec, err := st.GetSecret(context.Background(), owner, name)
	if err != nil || sec.Value != want {
		t.Errorf("secret %s of %q: %q, %v; want %q", name, owner, sec.Value, err, want)
	}
}

// The first start makes the key file (0600); the next ones use it.
func TestSecretsKeyCreated(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := secretsKeyOptions{path: filepath.Join(dir, SecretsKeyFile)}
	st := openStore(t, dir)
	if err := openSecretsKey(ctx, st, opts, quiet); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(opts.path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want mode 0600", fi, err)
	}
	k, _ := secretkey.Load(opts.path)
	if err := st.PutSecret(ctx, store.Secret{Owner: "key_a", Name: "API_KEY", Value: "v1", Hosts: []string{"a.example.com"}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = openStore(t, dir)
	if err := openSecretsKey(ctx, st, opts, quiet); err != nil {
		t.Fatal(err)
	}
	if k2, _ := secretkey.Load(opts.path); k2.ID() != k.ID() {
		t.Error("a second start replaced the key")
	}
	mustValue(t, st, "key_a", "API_KEY", "v1")
}

// A missing or wrong key file does not become a new key and lost secrets:
// the server refuses to start, saying why and what to do, unless told to
// discard what it cannot read.
func TestSecretsKeyMissing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := secretsKeyOptions{path: filepath.Join(dir, SecretsKeyFile)}
	st := openStore(t, dir)
	if err := openSecretsKey(ctx, st, opts, quiet); err != nil {
		t.Fatal(err)
	}
	_ = st.PutSecret(ctx, store.Secret{Name: "API_KEY", Value: "v1", Hosts: []string{"a.example.com"}}, time.Now())
	old, _ := secretkey.Load(opts.path)
	st.Close()
	if err := os.Remove(opts.path); err != nil {
		t.Fatal(err)
	}
	st = openStore(t, dir)
	err := openSecretsKey(ctx, st, opts, quiet)
	if err == nil || !strings.Contains(err.Error(), "is missing") || !strings.Contains(err.Error(), old.ID()) ||
		!strings.Contains(err.Error(), "--discard-unreadable-secrets") {
		t.Fatalf("start without the key file: %v; want a refusal naming the key and the way out", err)
	}
	if _, err := os.Stat(opts.path); !os.IsNotExist(err) {
		t.Error("a refused start wrote a new key file")
	}
	// Another key file: refused too.
	other, _ := secretkey.New()
	_ = secretkey.Write(opts.path, other)
	if err := openSecretsKey(ctx, st, opts, quiet); err == nil || !strings.Contains(err.Error(), other.ID()) {
		t.Fatalf("start with another key: %v; want a refusal", err)
	}
	opts.discard = true
	if err := openSecretsKey(ctx, st, opts, quiet); err != nil {
		t.Fatal(err)
	}
	if list, _ := st.ListSecrets(ctx, store.SecretFilter{AllOwners: true}); len(list) != 0 {
		t.Errorf("after discarding: %v", list)
	}
}

// Rotation re-seals every value with a new key and replaces the key file;
// the old key opens nothing in the database any more.
func TestSecretsKeyRotation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := secretsKeyOptions{path: filepath.Join(dir, SecretsKeyFile)}
	st := openStore(t, dir)
	if err := openSecretsKey(ctx, st, opts, quiet); err != nil {
		t.Fatal(err)
	}
	for _, owner := range []string{"", "key_a", "key_b"} {
		_ = st.PutSecret(ctx, store.Secret{Owner: owner, Name: "API_KEY", Value: "v-" + owner, Hosts: []string{"a.example.com"}}, time.Now())
	}
	old, _ := secretkey.Load(opts.path)
	st.Close()

	st = openStore(t, dir)
	opts.rotate = true
	if err := openSecretsKey(ctx, st, opts, quiet); err != nil {
		t.Fatal(err)
	}
	cur, err := secretkey.Load(opts.path)
	if err != nil || cur.ID() == old.ID() {
		t.Fatalf("key after rotation: %v, %v; want a new one", cur, err)
	}
	if _, err := os.Stat(opts.path + ".next"); !os.IsNotExist(err) {
		t.Error("the rotation left its .next file")
	}
	for _, owner := range []string{"", "key_a", "key_b"} {
		mustValue(t, st, owner, "API_KEY", "v-"+owner)
	}
	if counts, _ := st.SecretsSealedWith(ctx); counts[cur.ID()] != 3 || len(counts) != 1 {
		t.Errorf("sealed with after rotation: %v, want all 3 with %s", counts, cur.ID())
	}
	st.UseSecretsKeys(secretkey.NewRing(old))
	if _, err := st.GetSecret(ctx, "key_a", "API_KEY"); err == nil {
		t.Error("the old key still opens a value")
	}
	st.Close()
	// The next start, without --rotate-secrets-key, keeps the new key.
	st = openStore(t, dir)
	opts.rotate = false
	if err := openSecretsKey(ctx, st, opts, quiet); err != nil {
		t.Fatal(err)
	}
	mustValue(t, st, "key_b", "API_KEY", "v-key_b")
}

// A rotation cut short at any point is finished by the next start, with
// every value readable: after the new key file was written, and after the
// values were re-sealed but before the key file was replaced.
func TestSecretsKeyRotationResumes(t *testing.T) {
	for _, resealed := range []bool{false, true} {
		ctx := context.Background()
		dir := t.TempDir()
		opts := secretsKeyOptions{path: filepath.Join(dir, SecretsKeyFile)}
		st := openStore(t, dir)
		if err := openSecretsKey(ctx, st, opts, quiet); err != nil {
			t.Fatal(err)
		}
		_ = st.PutSecret(ctx, store.Secret{Owner: "key_a", Name: "API_KEY", Value: "v1", Hosts: []string{"a.example.com"}}, time.Now())
		old, _ := secretkey.Load(opts.path)
		next, _ := secretkey.New()
		if err := secretkey.Write(opts.path+".next", next); err != nil {
			t.Fatal(err)
		}
		if resealed {
			st.UseSecretsKeys(secretkey.NewRing(next, old))
			if n, err := st.ResealSecrets(ctx); n != 1 || err != nil {
				t.Fatalf("reseal: %d %v", n, err)
			}
		}
		st.Close()

		st = openStore(t, dir)
		if err := openSecretsKey(ctx, st, opts, quiet); err != nil {
			t.Fatalf("resealed=%v: %v", resealed, err)
		}
		if k, _ := secretkey.Load(opts.path); k.ID() != next.ID() {
			t.Errorf("resealed=%v: key file holds %v, want the rotation's %v", resealed, k, next)
		}
		if _, err := os.Stat(opts.path + ".next"); !os.IsNotExist(err) {
			t.Errorf("resealed=%v: .next left", resealed)
		}
		mustValue(t, st, "key_a", "API_KEY", "v1")
	}
}

// The data directory loses group and other permissions; a shared
// directory is refused, not changed.
func TestRestrictDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o755)
	if err := restrictDataDir(dir); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("data directory mode %04o, want 0700", fi.Mode().Perm())
	}
	shared := filepath.Join(t.TempDir(), "shared")
	_ = os.Mkdir(shared, 0o777)
	_ = os.Chmod(shared, 0o777|os.ModeSticky)
	if err := restrictDataDir(shared); err == nil || !strings.Contains(err.Error(), "shared") {
		t.Errorf("a sticky shared directory: %v, want a refusal", err)
	}
	if fi, _ := os.Stat(shared); fi.Mode().Perm() != 0o777 {
		t.Errorf("the shared directory was changed to %04o", fi.Mode().Perm())
	}
}

// A --store URL of another database is refused, saying what works, never
// showing its password.
func TestStoreOtherURLRefused(t *testing.T) {
	_, err := openConfiguredStore(context.Background(), Config{Store: "mysql://u:pw-7c6b@h/db", DataDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "mysql:// is not a database") || !strings.Contains(err.Error(), "postgres://") || strings.Contains(err.Error(), "pw-7c6b") {
		t.Fatalf("openConfiguredStore(mysql://...) = %v", err)
	}
}
