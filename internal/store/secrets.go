package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"withruntime.dev/runtime/internal/secretkey"
)

// Secret is a stored secret. Value is never returned by the API. Secrets
// are keyed by (Owner, Name): two tenants may each have one of the same
// name.
type Secret struct {
	// Owner is the id of the tenant key the secret belongs to, or "" for
	// the server's own secrets, which keys without a daily limit share.
	Owner     string
	Name      string
	Value     string
	Hosts     []string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// String hides the value (the record may end up in a log or an error).
func (s Secret) String() string { return "secret " + secretRef(s.Owner, s.Name) + " (value hidden)" }

// GoString hides the value from %#v too.
func (s Secret) GoString() string { return s.String() }

// secretRef names a secret in errors and logs: NAME, or NAME of key_... .
func secretRef(owner, name string) string {
	if owner == "" {
		return name
	}
	return name + " of " + owner
}

// ErrUnreadable says a stored value does not decrypt with the server's
// secrets key (it was sealed with another key, or the database was
// altered). Such a value is never used.
var ErrUnreadable = errors.New("the stored value does not decrypt")

// UseSecretsKeys sets the keys that seal and open secret values. The
// server sets them once at start, before any secret is read or written.
func (s *Store) UseSecretsKeys(r *secretkey.Ring) {
	s.keysMu.Lock()
	defer s.keysMu.Unlock()
	s.keys = r
}

func (s *Store) ring() (*secretkey.Ring, error) {
	s.keysMu.RLock()
	defer s.keysMu.RUnlock()
	if s.keys == nil {
		return nil, errors.New("store: no secrets key configured (UseSecretsKeys)")
	}
	return s.keys, nil
}

// DerivedKeys returns the keys for one purpose derived from the secrets
// keys (secretkey.Key.Derive), the current key's first: sign with the
// first, accept any (a rotation in progress). An error when the store has
// no secrets key.
func (s *Store) DerivedKeys(purpose string) ([][]byte, error) {
	r, err := s.ring()
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, k := range r.All() {
		out = append(out, k.Derive(purpose))
	}
	return out, nil
}

func sealContext(owner, name string) []byte { return []byte(owner + "\x00" + name) }

// PutSecret creates or replaces the secret (sec.Owner, sec.Name). The value
// is sealed with the current secrets key before it reaches the database.
func (s *Store) PutSecret(ctx context.Context, sec Secret, at time.Time) error {
	r, err := s.ring()
	if err != nil {
		return err
	}
	sealed := r.Current().Seal(sealContext(sec.Owner, sec.Name), []byte(sec.Value))
	hosts, _ := json.Marshal(orEmptyList(sec.Hosts))
	_, err = s.db.ExecContext(ctx, `INSERT INTO secrets (owner, name, value, sealed_with, hosts, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(owner, name) DO UPDATE SET value = excluded.value, sealed_with = excluded.sealed_with,
			hosts = excluded.hosts, updated_at = excluded.updated_at`,
		sec.Owner, sec.Name, sealed, r.Current().ID(), string(hosts), millis(at), millis(at))
	if err != nil {
		// The driver's error never holds bound values, but say only the name.
		return fmt.Errorf("store: put secret %s: database error", secretRef(sec.Owner, sec.Name))
	}
	return nil
}

// SecretFilter selects secrets to list.
type SecretFilter struct {
	// AllOwners lists every owner's secrets; otherwise only Owner's ("" is
	// the server's own).
	AllOwners bool
	Owner     string
}

// ListSecrets returns secrets without their values, by owner then name.
func (s *Store) ListSecrets(ctx context.Context, f SecretFilter) ([]Secret, error) {
	q := `SELECT owner, name, hosts, created_at, updated_at FROM secrets`
	var args []any
	if !f.AllOwners {
		q += ` WHERE owner = ?`
		args = append(args, f.Owner)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY owner, name`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list secrets: %w", err)
	}
	defer rows.Close()
	var out []Secret
	for rows.Next() {
		var sec Secret
		var hosts string
		var created, updated int64
		if err := rows.Scan(&sec.Owner, &sec.Name, &hosts, &created, &updated); err != nil {
			return nil, fmt.Errorf("store: list secrets: %w", err)
		}
		_ = json.Unmarshal([]byte(hosts), &sec.Hosts)
		sec.CreatedAt, sec.UpdatedAt = fromMillis(created), fromMillis(updated)
		out = append(out, sec)
	}
	return out, rows.Err()
}

// SecretInfo returns one secret without its value, or ErrNotFound.
func (s *Store) SecretInfo(ctx context.Context, owner, name string) (Secret, error) {
	sec, _, _, err := s.secretRow(ctx, owner, name)
	return sec, err
}

// GetSecret returns one secret with its value, or ErrNotFound. A value that
// does not decrypt is ErrUnreadable (with the key ids involved), never
// returned.
func (s *Store) GetSecret(ctx context.Context, owner, name string) (Secret, error) {
	r, err := s.ring()
	if err != nil {
		return Secret{}, err
	}
	sec, sealed, sealedWith, err := s.secretRow(ctx, owner, name)
	if err != nil {
		return Secret{}, err
	}
	ref := secretRef(owner, name)
	if sealedWith == "" {
		return Secret{}, fmt.Errorf("secret %s: %w: it is still in clear text from an older version and is sealed when the server starts; restart the server", ref, ErrUnreadable)
	}
	k, ok := r.Key(sealedWith)
	if !ok {
		return Secret{}, fmt.Errorf("secret %s: %w: it was sealed with secrets key %s, but this server has key %s; start the server with the key file it was sealed with, or store the secret again", ref, ErrUnreadable, sealedWith, r.Current().ID())
	}
	v, err := k.Open(sealContext(owner, name), sealed)
	if err != nil {
		return Secret{}, fmt.Errorf("secret %s: %w with secrets key %s (%v): the database was altered; store the secret again", ref, ErrUnreadable, sealedWith, err)
	}
	sec.Value = string(v)
	return sec, nil
}

func (s *Store) secretRow(ctx context.Context, owner, name string) (sec Secret, sealed []byte, sealedWith string, err error) {
	var hosts string
	var created, updated int64
	err = s.db.QueryRowContext(ctx, `SELECT owner, name, value, sealed_with, hosts, created_at, updated_at
		FROM secrets WHERE owner = ? AND name = ?`, owner, name).
		Scan(&sec.Owner, &sec.Name, &sealed, &sealedWith, &hosts, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return Secret{}, nil, "", fmt.Errorf("secret %s: %w", secretRef(owner, name), ErrNotFound)
	}
	if err != nil {
		return Secret{}, nil, "", fmt.Errorf("store: secret %s: database error", secretRef(owner, name))
	}
	_ = json.Unmarshal([]byte(hosts), &sec.Hosts)
	sec.CreatedAt, sec.UpdatedAt = fromMillis(created), fromMillis(updated)
	return sec, sealed, sealedWith, nil
}

// DeleteSecret removes the secret (owner, name), or returns ErrNotFound.
func (s *Store) DeleteSecret(ctx context.Context, owner, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM secrets WHERE owner = ? AND name = ?`, owner, name)
	if err != nil {
		return fmt.Errorf("store: delete secret %s: %w", secretRef(owner, name), err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("secret %s: %w", secretRef(owner, name), ErrNotFound)
	}
	return nil
}

// SecretsSealedWith counts the stored secrets by the id of the key that
// sealed them ("" counts values still in clear text).
func (s *Store) SecretsSealedWith(ctx context.Context) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT sealed_with, count(*) FROM secrets GROUP BY sealed_with`)
	if err != nil {
		return nil, fmt.Errorf("store: count secrets: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("store: count secrets: %w", err)
		}
		out[id] = n
	}
	return out, rows.Err()
}

// DeleteSecretsSealedWith deletes the secrets sealed with the keys ids and
// returns their references (NAME, or NAME of key_...), sorted.
func (s *Store) DeleteSecretsSealedWith(ctx context.Context, ids []string) ([]string, error) {
	var gone []string
	for _, id := range ids {
		list, err := s.secretsSealedWith(ctx, id)
		if err != nil {
			return nil, err
		}
		if _, err := s.db.ExecContext(ctx, `DELETE FROM secrets WHERE sealed_with = ?`, id); err != nil {
			return nil, fmt.Errorf("store: delete secrets sealed with %s: %w", id, err)
		}
		gone = append(gone, list...)
	}
	sort.Strings(gone)
	return gone, nil
}

func (s *Store) secretsSealedWith(ctx context.Context, id string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT owner, name FROM secrets WHERE sealed_with = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("store: secrets sealed with %s: %w", id, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var owner, name string
		if err := rows.Scan(&owner, &name); err != nil {
			return nil, fmt.Errorf("store: secrets sealed with %s: %w", id, err)
		}
		out = append(out, secretRef(owner, name))
	}
	return out, rows.Err()
}

// ResealSecrets seals every value that the current secrets key did not
// seal — clear text from before sealing existed, or values of an older key
// of the ring (a rotation) — with the current key, in one transaction (on
// PostgreSQL the rows are locked as they are read, so a PutSecret at the
// same time waits instead of being overwritten). It returns how many it
// sealed. When it sealed any, it then compacts the database (see Compact),
// so that neither the old clear text nor the old sealed values stay behind
// in free pages or WAL frames. A value sealed with a key the ring lacks, or
// that does not open, stops it with ErrUnreadable before anything changes.
func (s *Store) ResealSecrets(ctx context.Context) (int, error) {
	r, err := s.ring()
	if err != nil {
		return 0, err
	}
	cur := r.Current()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: reseal secrets: %w", err)
	}
	defer tx.Rollback()
	type row struct {
		owner, name, sealedWith string
		value                   []byte
	}
	rows, err := tx.QueryContext(ctx, `SELECT owner, name, sealed_with, value FROM secrets WHERE sealed_with != ?`+s.db.d.forUpdate(), cur.ID())
	if err != nil {
		return 0, fmt.Errorf("store: reseal secrets: %w", err)
	}
	var todo []row
	for rows.Next() {
		var rw row
		if err := rows.Scan(&rw.owner, &rw.name, &rw.sealedWith, &rw.value); err != nil {
			rows.Close()
			return 0, fmt.Errorf("store: reseal secrets: %w", err)
		}
		todo = append(todo, rw)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("store: reseal secrets: %w", err)
	}
	if len(todo) == 0 {
		return 0, nil
	}
	for _, rw := range todo {
		ref, plain := secretRef(rw.owner, rw.name), rw.value
		if rw.sealedWith != "" {
			k, ok := r.Key(rw.sealedWith)
			if !ok {
				return 0, fmt.Errorf("secret %s: %w: it was sealed with secrets key %s, which this server does not have (its key is %s)", ref, ErrUnreadable, rw.sealedWith, cur.ID())
			}
			if plain, err = k.Open(sealContext(rw.owner, rw.name), rw.value); err != nil {
				return 0, fmt.Errorf("secret %s: %w with secrets key %s (%v)", ref, ErrUnreadable, rw.sealedWith, err)
			}
		}
		sealed := cur.Seal(sealContext(rw.owner, rw.name), plain)
		if _, err := tx.ExecContext(ctx, `UPDATE secrets SET value = ?, sealed_with = ? WHERE owner = ? AND name = ?`,
			sealed, cur.ID(), rw.owner, rw.name); err != nil {
			return 0, fmt.Errorf("store: reseal secret %s: database error", ref)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store: reseal secrets: %w", err)
	}
	if err := s.Compact(ctx); err != nil {
		return len(todo), err
	}
	return len(todo), nil
}

// Compact rewrites the database so that no free page keeps old content.
// SQLite: VACUUM, then Checkpoint. PostgreSQL: VACUUM FULL of the secrets
// table (a new table file; the old one is deleted); PostgreSQL's own WAL,
// archives and replicas are its administrator's, and hold only sealed values.
func (s *Store) Compact(ctx context.Context) error {
	if s.Postgres() {
		if _, err := s.db.ExecContext(ctx, `VACUUM FULL secrets`); err != nil {
			return fmt.Errorf("store: vacuum secrets: %w", err)
		}
		return nil
	}
	if _, err := s.db.ExecContext(ctx, `VACUUM`); err != nil {
		return fmt.Errorf("store: vacuum: %w", err)
	}
	return s.Checkpoint(ctx)
}

// Checkpoint copies SQLite's WAL into the database file and truncates the
// WAL to zero bytes (PRAGMA wal_checkpoint(TRUNCATE)). It fails if a reader
// kept it from completing. On PostgreSQL it does nothing: checkpoints are
// the database server's (and need privileges Runtime's user need not have).
func (s *Store) Checkpoint(ctx context.Context) error {
	if s.Postgres() {
		return nil
	}
	var busy, logFrames, done int
	if err := s.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &done); err != nil {
		return fmt.Errorf("store: checkpoint: %w", err)
	}
	if busy != 0 {
		return fmt.Errorf("store: checkpoint: the WAL is in use (%d of %d frames copied); try again", done, logFrames)
	}
	return nil
}

// SandboxNetwork is a sandbox's network policy (JSON, as the egress
// manager reads it) and the names of its secrets.
type SandboxNetwork struct {
	Policy  json.RawMessage
	Secrets []string
	// SecretOwner is whose secrets Secrets names (see Secret.Owner), fixed
	// at create.
	SecretOwner string
}

// SetSandboxNetwork records (or replaces) a sandbox's network.
func (s *Store) SetSandboxNetwork(ctx context.Context, id string, n SandboxNetwork) error {
	names, _ := json.Marshal(orEmptyList(n.Secrets))
	pol := n.Policy
	if len(pol) == 0 {
		pol = json.RawMessage(`{}`)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO sandbox_network (sandbox_id, policy, secrets, secret_owner) VALUES (?, ?, ?, ?)
		ON CONFLICT(sandbox_id) DO UPDATE SET policy = excluded.policy, secrets = excluded.secrets, secret_owner = excluded.secret_owner`,
		id, string(pol), string(names), n.SecretOwner)
	if err != nil {
		return fmt.Errorf("store: sandbox %s network: %w", id, err)
	}
	return nil
}

// GetSandboxNetwork returns a sandbox's network, or ErrNotFound when it has
// none recorded.
func (s *Store) GetSandboxNetwork(ctx context.Context, id string) (SandboxNetwork, error) {
	var pol, names string
	var n SandboxNetwork
	err := s.db.QueryRowContext(ctx, `SELECT policy, secrets, secret_owner FROM sandbox_network WHERE sandbox_id = ?`, id).
		Scan(&pol, &names, &n.SecretOwner)
	if errors.Is(err, sql.ErrNoRows) {
		return SandboxNetwork{}, fmt.Errorf("sandbox %s network: %w", id, ErrNotFound)
	}
	if err != nil {
		return SandboxNetwork{}, fmt.Errorf("store: sandbox %s network: %w", id, err)
	}
	n.Policy = json.RawMessage(pol)
	_ = json.Unmarshal([]byte(names), &n.Secrets)
	return n, nil
}

func orEmptyList(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
