package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Device code states (RFC 8628 device login; see package device).
const (
	DevicePending  = "pending"  // waiting for an administrator
	DeviceApproved = "approved" // approved; the next poll gets the key
	DeviceDenied   = "denied"   // refused by an administrator
	DeviceRedeemed = "redeemed" // the key was handed out; the code is spent
)

// ErrDuplicate says a unique value (a user code) is already taken.
var ErrDuplicate = errors.New("duplicate")

// DeviceCode is one device login. Codes are kept only as hashes.
type DeviceCode struct {
	DeviceHash     string
	UserHash       string
	State          string
	ClientName     string // what the CLI said it is (shown to the approver)
	TrialRequested bool
	CreatedAt      time.Time
	ExpiresAt      time.Time
	// IntervalSeconds is the least time between polls; slow_down adds 5.
	IntervalSeconds int64
	LastPollAt      *time.Time
	// Set by the approval:
	KeyName          string
	DailyLimitMicros int64
	TrialSeconds     int64 // > 0: a trial key of that many sandbox-seconds
	DecidedBy        string
	DecidedAt        *time.Time
	KeyID            string // set at redemption
}

const deviceCols = `device_hash, user_hash, state, client_name, trial_requested, created_at, expires_at,
	interval_seconds, last_poll_at, key_name, daily_limit_micros, trial_seconds, decided_by, decided_at, key_id`

// InsertDeviceCode records a new device login; ErrDuplicate when its user
// code's hash is taken.
func (s *Store) InsertDeviceCode(ctx context.Context, d DeviceCode) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO device_codes (`+deviceCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.DeviceHash, d.UserHash, d.State, d.ClientName, boolInt(d.TrialRequested), millis(d.CreatedAt), millis(d.ExpiresAt),
		d.IntervalSeconds, nullMillis(d.LastPollAt), d.KeyName, d.DailyLimitMicros, d.TrialSeconds, d.DecidedBy,
		nullMillis(d.DecidedAt), d.KeyID)
	if err != nil && s.db.d.isUniqueViolation(err) {
		return fmt.Errorf("device code: %w", ErrDuplicate)
	}
	if err != nil {
		return fmt.Errorf("store: insert device code: %w", err)
	}
	return nil
}

// DeviceCodeByUserHash finds a device login by its user code's hash.
func (s *Store) DeviceCodeByUserHash(ctx context.Context, hash string) (DeviceCode, error) {
	return s.oneDeviceCode(ctx, s.db, `SELECT `+deviceCols+` FROM device_codes WHERE user_hash = ?`, hash)
}

// DeviceCodeByDeviceHash finds a device login by its device code's hash.
func (s *Store) DeviceCodeByDeviceHash(ctx context.Context, hash string) (DeviceCode, error) {
	return s.oneDeviceCode(ctx, s.db, `SELECT `+deviceCols+` FROM device_codes WHERE device_hash = ?`, hash)
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *Store) oneDeviceCode(ctx context.Context, q queryer, query string, arg any) (DeviceCode, error) {
	var d DeviceCode
	var trial int
	var created, expires int64
	var lastPoll, decided sql.NullInt64
	err := q.QueryRowContext(ctx, query, arg).Scan(&d.DeviceHash, &d.UserHash, &d.State, &d.ClientName, &trial,
		&created, &expires, &d.IntervalSeconds, &lastPoll, &d.KeyName, &d.DailyLimitMicros, &d.TrialSeconds,
		&d.DecidedBy, &decided, &d.KeyID)
	if errors.Is(err, sql.ErrNoRows) {
		return DeviceCode{}, fmt.Errorf("device code: %w", ErrNotFound)
	}
	if err != nil {
		return DeviceCode{}, fmt.Errorf("store: device code: %w", err)
	}
	d.TrialRequested = trial != 0
	d.CreatedAt, d.ExpiresAt = fromMillis(created), fromMillis(expires)
	d.LastPollAt, d.DecidedAt = timePtr(lastPoll), timePtr(decided)
	return d, nil
}

// CountLiveDeviceCodes counts the device logins not yet expired at now and
// not yet redeemed.
func (s *Store) CountLiveDeviceCodes(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM device_codes WHERE expires_at > ? AND state != ?`,
		millis(now), DeviceRedeemed).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: count device codes: %w", err)
	}
	return n, nil
}

// DeleteDeviceCodesBefore removes the device logins that expired before t.
func (s *Store) DeleteDeviceCodesBefore(ctx context.Context, t time.Time) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM device_codes WHERE expires_at < ?`, millis(t)); err != nil {
		return fmt.Errorf("store: delete device codes: %w", err)
	}
	return nil
}

// PollDeviceCode records a poll at now of the device login whose device
// code hashes to hash and returns it as it was before the poll. slow is
// true when the poll came sooner than its interval after the last one; the
// interval then grows by slowDownStep seconds (RFC 8628 3.5).
func (s *Store) PollDeviceCode(ctx context.Context, hash string, now time.Time, slowDownStep int64) (d DeviceCode, slow bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return DeviceCode{}, false, fmt.Errorf("store: poll device code: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	// FOR UPDATE (PostgreSQL): two polls at once see one after the other,
	// so the second is slow as it would be with SQLite's single writer.
	d, err = s.oneDeviceCode(ctx, tx, `SELECT `+deviceCols+` FROM device_codes WHERE device_hash = ?`+s.db.d.forUpdate(), hash)
	if err != nil {
		return DeviceCode{}, false, err
	}
	interval := d.IntervalSeconds
	if d.LastPollAt != nil && now.Sub(*d.LastPollAt) < time.Duration(d.IntervalSeconds)*time.Second {
		slow = true
		interval += slowDownStep
	}
	if _, err := tx.ExecContext(ctx, `UPDATE device_codes SET last_poll_at = ?, interval_seconds = ? WHERE device_hash = ?`,
		millis(now), interval, hash); err != nil {
		return DeviceCode{}, false, fmt.Errorf("store: poll device code: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return DeviceCode{}, false, fmt.Errorf("store: poll device code: %w", err)
	}
	return d, slow, nil
}

// DecideDeviceCode moves the pending, unexpired device login whose user
// code hashes to d.UserHash to d.State (approved or denied) with the
// approval's fields. ErrNotFound when no such login is pending.
func (s *Store) DecideDeviceCode(ctx context.Context, d DeviceCode, now time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE device_codes SET state = ?, key_name = ?, daily_limit_micros = ?,
		trial_seconds = ?, decided_by = ?, decided_at = ? WHERE user_hash = ? AND state = ? AND expires_at > ?`,
		d.State, d.KeyName, d.DailyLimitMicros, d.TrialSeconds, d.DecidedBy, millis(now), d.UserHash, DevicePending, millis(now))
	if err != nil {
		return fmt.Errorf("store: decide device code: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("pending device code: %w", ErrNotFound)
	}
	return nil
}

// RedeemDeviceCode spends the approved, unexpired device login whose
// device code hashes to hash and records k (with the login's daily limit
// and trial allowance) in one transaction: the key exists if and only if
// the code was spent, and a code is spent once. ErrNotFound when the login
// is not approved and unexpired (already redeemed included).
func (s *Store) RedeemDeviceCode(ctx context.Context, hash string, k Key, now time.Time) (DeviceCode, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return DeviceCode{}, fmt.Errorf("store: redeem device code: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	res, err := tx.ExecContext(ctx, `UPDATE device_codes SET state = ?, key_id = ? WHERE device_hash = ? AND state = ? AND expires_at > ?`,
		DeviceRedeemed, k.ID, hash, DeviceApproved, millis(now))
	if err != nil {
		return DeviceCode{}, fmt.Errorf("store: redeem device code: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return DeviceCode{}, fmt.Errorf("approved device code: %w", ErrNotFound)
	}
	d, err := s.oneDeviceCode(ctx, tx, `SELECT `+deviceCols+` FROM device_codes WHERE device_hash = ?`, hash)
	if err != nil {
		return DeviceCode{}, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO api_keys (`+keyCols+`) VALUES (?, ?, ?, ?, ?, ?)`,
		k.ID, d.KeyName, k.Prefix, k.Hash, millis(k.CreatedAt), nil); err != nil {
		return DeviceCode{}, fmt.Errorf("store: redeem device code: %w", err)
	}
	if d.DailyLimitMicros > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO key_limits (key_id, daily_limit_micros) VALUES (?, ?)`,
			k.ID, d.DailyLimitMicros); err != nil {
			return DeviceCode{}, fmt.Errorf("store: redeem device code: %w", err)
		}
	}
	if d.TrialSeconds > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO key_trials (key_id, allowance_seconds) VALUES (?, ?)`,
			k.ID, d.TrialSeconds); err != nil {
			return DeviceCode{}, fmt.Errorf("store: redeem device code: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return DeviceCode{}, fmt.Errorf("store: redeem device code: %w", err)
	}
	return d, nil
}

// KeyTrial returns a key's trial allowance in sandbox-seconds, or 0 when
// it is not a trial key.
func (s *Store) KeyTrial(ctx context.Context, keyID string) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT allowance_seconds FROM key_trials WHERE key_id = ?`, keyID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: key %s trial: %w", keyID, err)
	}
	return n, nil
}

// KeyWallSeconds is the sandbox time a key has used in total: the wall
// seconds of all its metered intervals.
func (s *Store) KeyWallSeconds(ctx context.Context, keyID string) (float64, error) {
	var n sql.NullFloat64
	err := s.db.QueryRowContext(ctx, `SELECT SUM(wall_seconds) FROM usage_intervals WHERE key_id = ?`, keyID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: key %s usage: %w", keyID, err)
	}
	return n.Float64, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
