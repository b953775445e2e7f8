package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Key is an API key. Only the hash of its secret is stored.
type Key struct {
	ID   string
	Name string
	// Prefix is the first characters of the secret, shown so a user can tell
	// keys apart.
	Prefix    string
	Hash      string
	CreatedAt time.Time
	RevokedAt *time.Time
}

const keyCols = `id, name, prefix, hash, created_at, revoked_at`

// InsertKey records a new key.
//
// dailyLimitMicros > 0 also sets the key's daily spending limit, in the same
// transaction: a key is never created without the limit it was asked with.
// InsertKeyWithLimits also sets quotas.
func (s *Store) InsertKey(ctx context.Context, k Key, dailyLimitMicros int64) error {
	return s.InsertKeyWithLimits(ctx, k, KeyLimits{DailyLimitMicros: dailyLimitMicros})
}

// KeyByHash finds the key whose secret hashes to hash, revoked or not.
func (s *Store) KeyByHash(ctx context.Context, hash string) (Key, error) {
	return s.oneKey(ctx, `SELECT `+keyCols+` FROM api_keys WHERE hash = ?`, hash)
}

// GetKey returns one key by id.
func (s *Store) GetKey(ctx context.Context, id string) (Key, error) {
	return s.oneKey(ctx, `SELECT `+keyCols+` FROM api_keys WHERE id = ?`, id)
}

func (s *Store) oneKey(ctx context.Context, q string, arg any) (Key, error) {
	k, err := scanKey(s.db.QueryRowContext(ctx, q, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return Key{}, fmt.Errorf("key: %w", ErrNotFound)
	}
	return k, err
}

// ListKeys returns every key, oldest first.
func (s *Store) ListKeys(ctx context.Context) ([]Key, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+keyCols+` FROM api_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store: list keys: %w", err)
	}
	defer rows.Close()
	var out []Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// RevokeKey marks a key revoked; it stops authenticating at once.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, millis(at), id)
	if err != nil {
		return fmt.Errorf("store: revoke key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("key %s (or it is already revoked): %w", id, ErrNotFound)
	}
	return nil
}

func scanKey(r scanner) (Key, error) {
	var k Key
	var created int64
	var revoked sql.NullInt64
	if err := r.Scan(&k.ID, &k.Name, &k.Prefix, &k.Hash, &created, &revoked); err != nil {
		return Key{}, err
	}
	k.CreatedAt, k.RevokedAt = fromMillis(created), timePtr(revoked)
	return k, nil
}
