package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"withruntime.dev/runtime/internal/secretkey"
	"withruntime.dev/runtime/internal/store"
)

// What the server keeps at rest: a data directory only root can enter, a
// database only root can read (store.Open makes its files 0600), and secret
// values in it sealed with a key that is not in it.

// SecretsKeyFile is the default file, under the data directory, of the key
// that seals secret values in the database (see package secretkey). The
// server creates it (0600) on first start.
const SecretsKeyFile = "secrets.key"

// SecretsKeyEnv names a key file elsewhere (used when Config.SecretsKeyFile
// is empty), for instance on a volume that is not backed up with the
// database.
const SecretsKeyEnv = "WITHRUNTIME_SECRETS_KEY_FILE"

// secretsKeyPath is the key file to use: the configured one, then
// WITHRUNTIME_SECRETS_KEY_FILE, then DATA_DIR/secrets.key.
func secretsKeyPath(cfg Config) string {
	if cfg.SecretsKeyFile != "" {
		return cfg.SecretsKeyFile
	}
	if p := os.Getenv(SecretsKeyEnv); p != "" {
		return p
	}
	return filepath.Join(cfg.DataDir, SecretsKeyFile)
}

// restrictDataDir takes group and other permissions off the data
// directory (it holds the database, keys and every sandbox's files). A
// shared directory (sticky bit, as /tmp) or / is refused rather than
// changed.
func restrictDataDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	perm := fi.Mode().Perm()
	if perm&0o077 == 0 {
		return nil
	}
	abs, _ := filepath.Abs(dir)
	if fi.Mode()&os.ModeSticky != 0 || abs == "/" {
		return fmt.Errorf("data directory %s is shared (mode %s); give the server a directory of its own (--data-dir or WITHRUNTIME_DATA_DIR)", dir, fi.Mode())
	}
	if err := os.Chmod(dir, perm&0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	return nil
}

// secretsKeyOptions are the start-up choices about the secrets key.
type secretsKeyOptions struct {
	// path is the key file.
	path string
	// rotate makes a new key and re-seals every value with it.
	rotate bool
	// discard deletes values sealed with a key the server does not have,
	// instead of refusing to start.
	discard bool
}

// openSecretsKey gives st the keys that seal and open secret values, once,
// at start (under the data directory's lock, before Recover binds running
// sandboxes' secrets):
//
//  1. It loads the key file, or makes a new key when the file is missing.
//  2. It refuses to start (unless opts.discard) when the database holds
//     values sealed with a key it does not have: a missing or wrong key file
//     must not turn into a new key and lost secrets unnoticed.
//  3. It finishes a rotation a crash interrupted (PATH.next exists), or
//     starts one when opts.rotate: the new key is written to PATH.next
//     first, every value is re-sealed with it in one transaction, then
//     PATH.next replaces PATH. At any crash point the files on disk open
//     every value, and the next start finishes the job.
//  4. It seals values still in clear text (from a version before sealing)
//     and then rewrites the database and empties its WAL, so that no clear
//     value or old sealed value stays on disk.
func openSecretsKey(ctx context.Context, st *store.Store, opts secretsKeyOptions, log *slog.Logger) error {
	cur, err := secretkey.Load(opts.path)
	created := errors.Is(err, os.ErrNotExist)
	if created {
		cur, err = secretkey.New()
	}
	if err != nil {
		return err
	}
	nextPath := opts.path + ".next"
	next, err := secretkey.Load(nextPath)
	resuming := err == nil
	switch {
	case resuming:
		log.Warn("finishing a secrets key rotation that did not complete", "keyFile", opts.path, "from", cur.ID(), "to", next.ID())
	case !errors.Is(err, os.ErrNotExist):
		return err
	case opts.rotate:
		if next, err = secretkey.New(); err != nil {
			return err
		}
	default:
		next = nil
	}
	ring := secretkey.NewRing(cur)
	if next != nil {
		ring = secretkey.NewRing(next, cur)
	}
	if err := checkSealedWith(ctx, st, ring, opts, created, log); err != nil {
		return err
	}
	if created {
		if err := secretkey.Write(opts.path, cur); err != nil {
			return err
		}
		log.Info("created the secrets key", "keyFile", opts.path, "key", cur.ID())
	}
	if next != nil && !resuming {
		if err := secretkey.Write(nextPath, next); err != nil {
			return err
		}
	}
	st.UseSecretsKeys(ring)
	n, err := st.ResealSecrets(ctx)
	if err != nil {
		return fmt.Errorf("sealing secrets: %w", err)
	}
	if next == nil {
		if n > 0 {
			log.Info("sealed secret values kept in clear text by an older version", "count", n, "key", cur.ID())
		}
		return nil
	}
	// A rotation: the values are all sealed with next; old ciphertexts go.
	if err := st.Compact(ctx); err != nil {
		return err
	}
	if err := os.Rename(nextPath, opts.path); err != nil {
		return fmt.Errorf("secrets key rotation: %w", err)
	}
	if err := secretkey.SyncDir(filepath.Dir(opts.path)); err != nil {
		return err
	}
	st.UseSecretsKeys(secretkey.NewRing(next))
	log.Warn("rotated the secrets key; back up the new key file (backups of the database from before need the old key)",
		"keyFile", opts.path, "from", cur.ID(), "to", next.ID(), "resealed", n)
	return nil
}

// checkSealedWith refuses values sealed with a key that ring lacks, or
// deletes them when opts.discard.
func checkSealedWith(ctx context.Context, st *store.Store, ring *secretkey.Ring, opts secretsKeyOptions, created bool, log *slog.Logger) error {
	counts, err := st.SecretsSealedWith(ctx)
	if err != nil {
		return err
	}
	var unknown []string
	total := 0
	for id, n := range counts {
		if _, ok := ring.Key(id); id != "" && !ok {
			unknown = append(unknown, id)
			total += n
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	if opts.discard {
		gone, err := st.DeleteSecretsSealedWith(ctx, unknown)
		if err != nil {
			return err
		}
		log.Warn("deleted secrets sealed with a key this server does not have (--discard-unreadable-secrets)",
			"secrets", strings.Join(gone, ", "), "sealedWith", strings.Join(unknown, ", "))
		return nil
	}
	have := fmt.Sprintf("its key file %s holds key %s", opts.path, ring.Current().ID())
	if created {
		have = fmt.Sprintf("its key file %s is missing", opts.path)
	}
	return fmt.Errorf("%d secrets in the database are sealed with secrets key %s, which this server does not have (%s): "+
		"start it with the key file they were sealed with (serve --secrets-key-file or %s); "+
		"if that key is lost for good, so are those values: start once with --discard-unreadable-secrets to delete them",
		total, strings.Join(unknown, ", "), have, SecretsKeyEnv)
}
