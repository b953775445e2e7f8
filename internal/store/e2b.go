package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// E2BToken is a data-plane access token of the E2B-compatible API: the
// SHA-256 of the token (hex), the sandbox it opens and the E2B template
// name the sandbox was created with.
type E2BToken struct {
	Hash      string
	SandboxID string
	Template  string
	CreatedAt time.Time
	// Nonce is what the token was derived from with the server's secrets
	// key (for E2B's signed file URLs); "" for a token minted at random.
	Nonce string
}

// MaxE2BTokens is how many tokens one sandbox keeps; minting one more
// drops the oldest.
const MaxE2BTokens = 64

// InsertE2BToken records a token, drops the sandbox's oldest past
// MaxE2BTokens, and removes the tokens of stopped sandboxes.
func (s *Store) InsertE2BToken(ctx context.Context, t E2BToken) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: e2b token: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO e2b_tokens (token_hash, sandbox_id, template, created_at, nonce) VALUES (?, ?, ?, ?, ?)`,
		t.Hash, t.SandboxID, t.Template, millis(t.CreatedAt), t.Nonce); err != nil {
		return fmt.Errorf("store: insert e2b token: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM e2b_tokens WHERE sandbox_id = ? AND token_hash NOT IN
		(SELECT token_hash FROM e2b_tokens WHERE sandbox_id = ? ORDER BY created_at DESC, token_hash LIMIT ?)`,
		t.SandboxID, t.SandboxID, MaxE2BTokens); err != nil {
		return fmt.Errorf("store: e2b tokens: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM e2b_tokens WHERE sandbox_id IN (SELECT id FROM sandboxes WHERE state = ?)`,
		StateStopped); err != nil {
		return fmt.Errorf("store: e2b tokens: %w", err)
	}
	return tx.Commit()
}

// E2BTokenByHash returns the token whose SHA-256 is hash, or ErrNotFound.
func (s *Store) E2BTokenByHash(ctx context.Context, hash string) (E2BToken, error) {
	var t E2BToken
	var created int64
	err := s.db.QueryRowContext(ctx, `SELECT token_hash, sandbox_id, template, created_at, nonce FROM e2b_tokens WHERE token_hash = ?`,
		hash).Scan(&t.Hash, &t.SandboxID, &t.Template, &created, &t.Nonce)
	if errors.Is(err, sql.ErrNoRows) {
		return E2BToken{}, fmt.Errorf("e2b token: %w", ErrNotFound)
	}
	if err != nil {
		return E2BToken{}, fmt.Errorf("store: e2b token: %w", err)
	}
	t.CreatedAt = fromMillis(created)
	return t, nil
}

// E2BTokenNonces returns the nonces of sandbox id's derived tokens (those
// with one), newest first.
func (s *Store) E2BTokenNonces(ctx context.Context, id string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT nonce FROM e2b_tokens WHERE sandbox_id = ? AND nonce <> '' ORDER BY created_at DESC, token_hash`, id)
	if err != nil {
		return nil, fmt.Errorf("store: e2b token nonces: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// E2BTemplates returns the E2B template name of each sandbox that has
// one (those made through the E2B-compatible API).
func (s *Store) E2BTemplates(ctx context.Context) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT sandbox_id, template FROM e2b_tokens`)
	if err != nil {
		return nil, fmt.Errorf("store: e2b templates: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, tpl string
		if err := rows.Scan(&id, &tpl); err != nil {
			return nil, err
		}
		out[id] = tpl
	}
	return out, rows.Err()
}

// SetE2BTraffic records whether sandbox id's ports are public in the E2B
// domain mode (reachable without its traffic access token), and forgets
// the choice of stopped sandboxes.
func (s *Store) SetE2BTraffic(ctx context.Context, id string, public bool) error {
	return s.e2bTraffic(ctx, `INSERT INTO e2b_traffic (sandbox_id, public_traffic) VALUES (?, ?)
		ON CONFLICT (sandbox_id) DO UPDATE SET public_traffic = excluded.public_traffic`, id, public)
}

// InitE2BTraffic records public for sandbox id unless a choice is already
// recorded (a connect to a sandbox made through Runtime's own API).
func (s *Store) InitE2BTraffic(ctx context.Context, id string, public bool) error {
	return s.e2bTraffic(ctx, `INSERT INTO e2b_traffic (sandbox_id, public_traffic) VALUES (?, ?)
		ON CONFLICT (sandbox_id) DO NOTHING`, id, public)
}

func (s *Store) e2bTraffic(ctx context.Context, query, id string, public bool) error {
	if _, err := s.db.ExecContext(ctx, query, id, public); err != nil {
		return fmt.Errorf("store: e2b traffic: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM e2b_traffic WHERE sandbox_id IN (SELECT id FROM sandboxes WHERE state = ?)`,
		StateStopped); err != nil {
		return fmt.Errorf("store: e2b traffic: %w", err)
	}
	return nil
}

// SetE2BMaskHost records sandbox id's mask_request_host (its
// e2b_traffic row must exist: SetE2BTraffic or InitE2BTraffic first).
func (s *Store) SetE2BMaskHost(ctx context.Context, id, mask string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE e2b_traffic SET mask_host = ? WHERE sandbox_id = ?`, mask, id); err != nil {
		return fmt.Errorf("store: e2b mask host: %w", err)
	}
	return nil
}

// E2BMaskHost returns sandbox id's mask_request_host ("" for none).
func (s *Store) E2BMaskHost(ctx context.Context, id string) (string, error) {
	var mask string
	err := s.db.QueryRowContext(ctx, `SELECT mask_host FROM e2b_traffic WHERE sandbox_id = ?`, id).Scan(&mask)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: e2b mask host: %w", err)
	}
	return mask, nil
}

// E2BPublicTraffic reports whether sandbox id's ports are public in the
// E2B domain mode; false when nothing is recorded.
func (s *Store) E2BPublicTraffic(ctx context.Context, id string) (bool, error) {
	var public bool
	err := s.db.QueryRowContext(ctx, `SELECT public_traffic FROM e2b_traffic WHERE sandbox_id = ?`, id).Scan(&public)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: e2b traffic: %w", err)
	}
	return public, nil
}
