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

// TerminalTicket is a dashboard terminal ticket: a short-lived, single-use
// permission for one session to open the terminal WebSocket of one process
// (SandboxID, Pid). Only the ticket's hash is stored.
type TerminalTicket struct {
	// Hash is the SHA-256 of the ticket (hex).
	Hash string
	// SessionHash is the hash of the session's token it was minted for.
	SessionHash string
	SandboxID   string
	Pid         int
	ExpiresAt   time.Time
}

// ErrTooMany says a bound on live records was reached.
var ErrTooMany = errors.New("too many")

// InsertTerminalTicket records t after removing the tickets expired at now,
// unless t's session already holds max live tickets (ErrTooMany).
func (s *Store) InsertTerminalTicket(ctx context.Context, t TerminalTicket, now time.Time, max int) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM dashboard_tickets WHERE expires_at <= ?`, millis(now)); err != nil {
		return fmt.Errorf("store: tickets: %w", err)
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO dashboard_tickets (ticket_hash, session_hash, sandbox_id, pid, expires_at)
		SELECT CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT) WHERE (SELECT COUNT(*) FROM dashboard_tickets WHERE session_hash = ?) < ?`,
		t.Hash, t.SessionHash, t.SandboxID, t.Pid, millis(t.ExpiresAt), t.SessionHash, max)
	if err != nil {
		return fmt.Errorf("store: insert ticket: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: insert ticket: %w", err)
	} else if n == 0 {
		return fmt.Errorf("this session holds %d unused terminal tickets: %w", max, ErrTooMany)
	}
	return nil
}

// TakeTerminalTicket removes the ticket whose hash is hash and returns it,
// expired or not (the caller checks); ErrNotFound when there is none (never
// minted, or already taken: a ticket is taken once, whichever server of
// those sharing the store asks first).
func (s *Store) TakeTerminalTicket(ctx context.Context, hash string) (TerminalTicket, error) {
	t := TerminalTicket{Hash: hash}
	var expires int64
	err := s.db.QueryRowContext(ctx, `DELETE FROM dashboard_tickets WHERE ticket_hash = ?
		RETURNING session_hash, sandbox_id, pid, expires_at`, hash).Scan(&t.SessionHash, &t.SandboxID, &t.Pid, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return TerminalTicket{}, fmt.Errorf("ticket: %w", ErrNotFound)
	}
	if err != nil {
		return TerminalTicket{}, fmt.Errorf("store: take ticket: %w", err)
	}
	t.ExpiresAt = fromMillis(expires)
	return t, nil
}
