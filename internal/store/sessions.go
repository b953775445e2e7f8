package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Session is a dashboard session: the hash of its token and the key it
// acts as.
type Session struct {
	TokenHash string
	KeyID     string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// InsertSession records a session and removes the expired ones.
func (s *Store) InsertSession(ctx context.Context, se Session) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM dashboard_sessions WHERE expires_at <= ?`, millis(se.CreatedAt)); err != nil {
		return fmt.Errorf("store: sessions: %w", err)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO dashboard_sessions (token_hash, key_id, created_at, expires_at) VALUES (?, ?, ?, ?)`,
		se.TokenHash, se.KeyID, millis(se.CreatedAt), millis(se.ExpiresAt))
	if err != nil {
		return fmt.Errorf("store: insert session: %w", err)
	}
	return nil
}

// SessionByHash returns the session whose token hashes to hash, if it has
// not expired at now; ErrNotFound otherwise.
func (s *Store) SessionByHash(ctx context.Context, hash string, now time.Time) (Session, error) {
	var se Session
	var created, expires int64
	err := s.db.QueryRowContext(ctx, `SELECT token_hash, key_id, created_at, expires_at FROM dashboard_sessions
		WHERE token_hash = ? AND expires_at > ?`, hash, millis(now)).Scan(&se.TokenHash, &se.KeyID, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("session: %w", ErrNotFound)
	}
	if err != nil {
		return Session{}, fmt.Errorf("store: session: %w", err)
	}
	se.CreatedAt, se.ExpiresAt = fromMillis(created), fromMillis(expires)
	return se, nil
}

// DeleteSession ends a session (sign-out).
func (s *Store) DeleteSession(ctx context.Context, hash string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM dashboard_sessions WHERE token_hash = ?`, hash); err != nil {
		return fmt.Errorf("store: delete session: %w", err)
	}
	return nil
}
