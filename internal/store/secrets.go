package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Secret is a stored secret. Value is never returned by the API.
type Secret struct {
	Name      string
	Value     string
	Hosts     []string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// String hides the value (the record may end up in a log or an error).
func (s Secret) String() string { return "secret " + s.Name + " (value hidden)" }

// GoString hides the value from %#v too.
func (s Secret) GoString() string { return s.String() }

// PutSecret creates or replaces a secret.
func (s *Store) PutSecret(ctx context.Context, sec Secret, at time.Time) error {
	hosts, _ := json.Marshal(orEmptyList(sec.Hosts))
	_, err := s.db.ExecContext(ctx, `INSERT INTO secrets (name, value, hosts, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT(name) DO UPDATE SET value = excluded.value, hosts = excluded.hosts, updated_at = excluded.updated_at`,
		sec.Name, sec.Value, string(hosts), millis(at), millis(at))
	if err != nil {
		// The driver's error never holds bound values, but say only the name.
		return fmt.Errorf("store: put secret %s: database error", sec.Name)
	}
	return nil
}

// ListSecrets returns every secret without its value, by name.
func (s *Store) ListSecrets(ctx context.Context) ([]Secret, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, hosts, created_at, updated_at FROM secrets ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: list secrets: %w", err)
	}
	defer rows.Close()
	var out []Secret
	for rows.Next() {
		var sec Secret
		var hosts string
		var created, updated int64
		if err := rows.Scan(&sec.Name, &hosts, &created, &updated); err != nil {
			return nil, fmt.Errorf("store: list secrets: %w", err)
		}
		_ = json.Unmarshal([]byte(hosts), &sec.Hosts)
		sec.CreatedAt, sec.UpdatedAt = fromMillis(created), fromMillis(updated)
		out = append(out, sec)
	}
	return out, rows.Err()
}

// GetSecret returns one secret with its value, or ErrNotFound.
func (s *Store) GetSecret(ctx context.Context, name string) (Secret, error) {
	var sec Secret
	var hosts string
	var created, updated int64
	err := s.db.QueryRowContext(ctx, `SELECT name, value, hosts, created_at, updated_at FROM secrets WHERE name = ?`, name).
		Scan(&sec.Name, &sec.Value, &hosts, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return Secret{}, fmt.Errorf("secret %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return Secret{}, fmt.Errorf("store: secret %s: database error", name)
	}
	_ = json.Unmarshal([]byte(hosts), &sec.Hosts)
	sec.CreatedAt, sec.UpdatedAt = fromMillis(created), fromMillis(updated)
	return sec, nil
}

// DeleteSecret removes a secret, or returns ErrNotFound.
func (s *Store) DeleteSecret(ctx context.Context, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM secrets WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("store: delete secret %s: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("secret %s: %w", name, ErrNotFound)
	}
	return nil
}

// SandboxNetwork is a sandbox's network policy (JSON, as the egress
// manager reads it) and the names of its secrets.
type SandboxNetwork struct {
	Policy  json.RawMessage
	Secrets []string
}

// SetSandboxNetwork records (or replaces) a sandbox's network.
func (s *Store) SetSandboxNetwork(ctx context.Context, id string, n SandboxNetwork) error {
	names, _ := json.Marshal(orEmptyList(n.Secrets))
	pol := n.Policy
	if len(pol) == 0 {
		pol = json.RawMessage(`{}`)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO sandbox_network (sandbox_id, policy, secrets) VALUES (?, ?, ?)
		ON CONFLICT(sandbox_id) DO UPDATE SET policy = excluded.policy, secrets = excluded.secrets`,
		id, string(pol), string(names))
	if err != nil {
		return fmt.Errorf("store: sandbox %s network: %w", id, err)
	}
	return nil
}

// GetSandboxNetwork returns a sandbox's network, or ErrNotFound when it has
// none recorded.
func (s *Store) GetSandboxNetwork(ctx context.Context, id string) (SandboxNetwork, error) {
	var pol, names string
	err := s.db.QueryRowContext(ctx, `SELECT policy, secrets FROM sandbox_network WHERE sandbox_id = ?`, id).Scan(&pol, &names)
	if errors.Is(err, sql.ErrNoRows) {
		return SandboxNetwork{}, fmt.Errorf("sandbox %s network: %w", id, ErrNotFound)
	}
	if err != nil {
		return SandboxNetwork{}, fmt.Errorf("store: sandbox %s network: %w", id, err)
	}
	n := SandboxNetwork{Policy: json.RawMessage(pol)}
	_ = json.Unmarshal([]byte(names), &n.Secrets)
	return n, nil
}

func orEmptyList(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
