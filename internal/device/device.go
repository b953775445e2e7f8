// Package device is device login, the OAuth 2.0 device authorization grant
// (RFC 8628) adapted to Runtime's API keys: a CLI asks for a device code
// and a short user code (Authorize), shows the user code and a link, and
// polls with the device code (Token); an administrator approves the user
// code in the dashboard (Approve), choosing the new key's name, daily
// spending limit and whether it is a trial; the next poll creates the key
// and hands its secret out, once.
//
// Both codes are random and stored only as SHA-256 hashes (a leaked
// database holds nothing to poll or approve with). A user code is 8
// letters from an alphabet without vowels or look-alikes (20^8, about 2^34),
// written XXXX-XXXX; case and dashes do not matter when it is typed. Only
// keys without a limit may approve, and an approved key always has a daily
// limit, so a device login never makes an administrator.
package device

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	"withruntime.dev/runtime/internal/auth"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// RFC 8628 error codes (section 3.5) that Token answers with.
const (
	CodePending   = "authorization_pending" // not approved yet: poll again after the interval
	CodeSlowDown  = "slow_down"             // polled too soon: the interval grew by 5 s
	CodeExpired   = "expired_token"         // expired, or already used: start again
	CodeDenied    = "access_denied"         // an administrator refused it
	CodeBadDevice = "invalid_grant"         // no such device code
)

// Error is a Token answer other than a key: Code is one of the RFC 8628
// codes above, Msg says what to do.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Defaults.
const (
	DefaultInterval  = 5 * time.Second
	DefaultExpiresIn = 10 * time.Minute
	// slowDownStep is what each slow_down adds to the interval (RFC 8628
	// 3.5: 5 seconds).
	slowDownStep = 5
)

// Config configures a Service.
type Config struct {
	Store *store.Store
	// Interval is the least time between polls (default 5 s).
	Interval time.Duration
	// ExpiresIn is how long a device login may wait (default 10 min).
	ExpiresIn time.Duration
	// TrialHours is the sandbox-hours a key approved as a trial may use in
	// total (0: the server grants no trials).
	TrialHours float64
	// MaxLive caps the device logins waiting at once, from all clients
	// (default DefaultMaxLive); see limit.go.
	MaxLive int
	// MaxPerAddress caps the logins one client address (IPv4 address, IPv6
	// /64) starts within ExpiresIn (default DefaultMaxPerAddress).
	MaxPerAddress int
	// MaxPerNetwork caps the logins one client network (IPv4 /24, IPv6
	// /48) starts within ExpiresIn (default DefaultMaxPerNetwork).
	MaxPerNetwork int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Service issues and redeems device logins. Safe for concurrent use.
type Service struct {
	cfg     Config
	clients *clientLimiter
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.ExpiresIn <= 0 {
		cfg.ExpiresIn = DefaultExpiresIn
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxLive <= 0 {
		cfg.MaxLive = DefaultMaxLive
	}
	if cfg.MaxPerAddress <= 0 {
		cfg.MaxPerAddress = DefaultMaxPerAddress
	}
	if cfg.MaxPerNetwork <= 0 {
		cfg.MaxPerNetwork = DefaultMaxPerNetwork
	}
	return &Service{cfg: cfg, clients: newClientLimiter(cfg.ExpiresIn, cfg.MaxPerAddress, cfg.MaxPerNetwork)}
}

// TrialHours is the allowance of a trial key (0: no trials on this server).
func (s *Service) TrialHours() float64 { return s.cfg.TrialHours }

// Grant is what Authorize hands the CLI.
type Grant struct {
	DeviceCode string
	UserCode   string // XXXX-XXXX
	ExpiresIn  time.Duration
	Interval   time.Duration
}

// AuthorizeParams is what a CLI says about itself.
type AuthorizeParams struct {
	// ClientName is shown to the approver (say, the user and host name):
	// at most 100 characters, printable.
	ClientName string
	// Trial asks for a trial key (`sandbox run --trial`); the approver
	// decides.
	Trial bool
	// Client is the address the request came from, which the per-client
	// limits count by (limit.go); the zero Addr is one client of its own.
	Client netip.Addr
}

// Authorize starts a device login. Errors: errs.Invalid (bad fields),
// errs.RateLimited (the client's address or network started its share of
// logins; errs.RetryAfter says when to try again), errs.Capacity (the
// server holds as many waiting logins as it may).
func (s *Service) Authorize(ctx context.Context, p AuthorizeParams) (Grant, error) {
	if err := checkText("clientName", p.ClientName, 100); err != nil {
		return Grant{}, err
	}
	now := s.cfg.Now().UTC()
	release, err := s.clients.reserve(p.Client, now)
	if err != nil {
		return Grant{}, err
	}
	g, err := s.authorize(ctx, p, now)
	if err != nil {
		release()
	}
	return g, err
}

// authorize makes the codes of a login the client limits admitted, if the
// pool has room.
func (s *Service) authorize(ctx context.Context, p AuthorizeParams, now time.Time) (Grant, error) {
	_ = s.cfg.Store.DeleteDeviceCodesBefore(ctx, now.Add(-24*time.Hour))
	n, err := s.cfg.Store.CountLiveDeviceCodes(ctx, now)
	if err != nil {
		return Grant{}, fmt.Errorf("device login: count the waiting logins: %w", err)
	}
	if n >= s.cfg.MaxLive {
		return Grant{}, errs.Retry(errs.Capacity, min(time.Minute, s.cfg.ExpiresIn),
			"%d device logins are waiting for approval, the most device login's total limit allows on this server at once; "+
				"try again in a minute (each leaves the count when its key is handed out, or %s after it was started)",
			n, shortDuration(s.cfg.ExpiresIn))
	}
	for range 5 {
		g := Grant{DeviceCode: "wrd_" + randomBase32(32), UserCode: newUserCode(), ExpiresIn: s.cfg.ExpiresIn, Interval: s.cfg.Interval}
		err := s.cfg.Store.InsertDeviceCode(ctx, store.DeviceCode{
			DeviceHash: hash(g.DeviceCode), UserHash: hash(normalizeUserCode(g.UserCode)), State: store.DevicePending,
			ClientName: p.ClientName, TrialRequested: p.Trial, CreatedAt: now, ExpiresAt: now.Add(s.cfg.ExpiresIn),
			IntervalSeconds: int64(s.cfg.Interval / time.Second),
		})
		if errors.Is(err, store.ErrDuplicate) {
			continue // a user code in use: draw another
		}
		if err != nil {
			return Grant{}, fmt.Errorf("device login: store the codes: %w", err)
		}
		return g, nil
	}
	return Grant{}, errors.New("device login: no free user code after 5 draws")
}

// Issued is the key a redeemed device login made.
type Issued struct {
	Key              store.Key
	Secret           string
	DailyLimitMicros int64
	TrialHours       float64
}

// Token answers a poll with deviceCode: the new key once it was approved
// (the first such poll only), else an *Error with the RFC 8628 code.
func (s *Service) Token(ctx context.Context, deviceCode string) (Issued, error) {
	if deviceCode == "" {
		return Issued{}, errs.New(errs.Invalid, "deviceCode is required: the one POST /v1/device/authorize answered")
	}
	now := s.cfg.Now().UTC()
	h := hash(deviceCode)
	d, slow, err := s.cfg.Store.PollDeviceCode(ctx, h, now, slowDownStep)
	if errors.Is(err, store.ErrNotFound) {
		return Issued{}, &Error{CodeBadDevice, "unknown device code; start again with `withruntime login`"}
	}
	if err != nil {
		return Issued{}, err
	}
	switch {
	case d.State == store.DeviceRedeemed:
		return Issued{}, &Error{CodeExpired, "this device code was already used to get a key (a device code works once); start again with `withruntime login`"}
	case !now.Before(d.ExpiresAt):
		return Issued{}, &Error{CodeExpired, fmt.Sprintf("this device code expired at %s; start again with `withruntime login`", d.ExpiresAt.Format(time.RFC3339))}
	case d.State == store.DeviceDenied:
		return Issued{}, &Error{CodeDenied, "an administrator refused this login"}
	case slow:
		return Issued{}, &Error{CodeSlowDown, fmt.Sprintf("polled sooner than every %d s; wait %d s between polls from now on", d.IntervalSeconds, d.IntervalSeconds+slowDownStep)}
	case d.State == store.DevicePending:
		return Issued{}, &Error{CodePending, "waiting for an administrator to approve the user code in the dashboard"}
	}
	k, secret, err := auth.Generate(d.KeyName)
	if err != nil {
		return Issued{}, err
	}
	d, err = s.cfg.Store.RedeemDeviceCode(ctx, h, k, now)
	if errors.Is(err, store.ErrNotFound) {
		// Another poll with the same code got there first.
		return Issued{}, &Error{CodeExpired, "this device code was already used to get a key (a device code works once); start again with `withruntime login`"}
	}
	if err != nil {
		return Issued{}, err
	}
	k.Name = d.KeyName
	return Issued{Key: k, Secret: secret, DailyLimitMicros: d.DailyLimitMicros, TrialHours: float64(d.TrialSeconds) / 3600}, nil
}

// Pending is a device login waiting for approval, as the approver sees it.
type Pending struct {
	UserCode       string
	ClientName     string
	TrialRequested bool
	ExpiresAt      time.Time
}

// Lookup returns the pending device login of userCode, or an error that
// says why there is none: errs.NotFound (unknown, or expired) or
// errs.Conflict (already approved, refused or used).
func (s *Service) Lookup(ctx context.Context, userCode string) (Pending, error) {
	d, err := s.pending(ctx, userCode)
	if err != nil {
		return Pending{}, err
	}
	return Pending{UserCode: FormatUserCode(normalizeUserCode(userCode)), ClientName: d.ClientName,
		TrialRequested: d.TrialRequested, ExpiresAt: d.ExpiresAt}, nil
}

func (s *Service) pending(ctx context.Context, userCode string) (store.DeviceCode, error) {
	norm := normalizeUserCode(userCode)
	if len(norm) != userCodeLen {
		return store.DeviceCode{}, errs.New(errs.Invalid, "a user code is 8 letters, like BCDF-GHJK; got %q", userCode)
	}
	d, err := s.cfg.Store.DeviceCodeByUserHash(ctx, hash(norm))
	if errors.Is(err, store.ErrNotFound) {
		return store.DeviceCode{}, errs.New(errs.NotFound, "no device login has the user code %s; check the code the CLI printed", FormatUserCode(norm))
	}
	if err != nil {
		return store.DeviceCode{}, err
	}
	if !s.cfg.Now().Before(d.ExpiresAt) {
		return store.DeviceCode{}, errs.New(errs.NotFound, "the device login %s expired at %s; run `withruntime login` again for a new code",
			FormatUserCode(norm), d.ExpiresAt.Format(time.RFC3339))
	}
	if d.State != store.DevicePending {
		return store.DeviceCode{}, errs.New(errs.Conflict, "the device login %s was already %s", FormatUserCode(norm), d.State)
	}
	return d, nil
}

// Approval is an administrator's choice for a device login.
type Approval struct {
	UserCode string
	// KeyName names the new key (1 to 100 characters).
	KeyName string
	// DailyLimitMicros is the new key's daily spending limit in
	// micro-dollars; it must be positive: a device login never makes a key
	// without a limit (an administrator).
	DailyLimitMicros int64
	// Trial makes it a trial key of the server's TrialHours.
	Trial bool
	// By is the approving key's id.
	By string
}

// Approve approves a pending device login; the CLI's next poll gets the
// key. Errors: errs.Invalid (bad fields, a trial on a server without
// trials), errs.NotFound (unknown or expired code), errs.Conflict (already
// decided).
func (s *Service) Approve(ctx context.Context, a Approval) error {
	if _, _, err := auth.Generate(a.KeyName); err != nil {
		return err
	}
	if err := checkText("keyName", a.KeyName, 100); err != nil {
		return err
	}
	if a.DailyLimitMicros <= 0 {
		return errs.New(errs.Invalid, "dailyLimitMicros must be positive (micro-dollars per UTC day; 1 USD = 1,000,000): a device login makes a tenant key, never one without a limit")
	}
	var trialSeconds int64
	if a.Trial {
		if s.cfg.TrialHours <= 0 {
			return errs.New(errs.Invalid, "this server grants no trials; start it with `withruntime serve --trial-hours N`, or approve without a trial")
		}
		trialSeconds = max(int64(math.Round(s.cfg.TrialHours*3600)), 1)
	}
	return s.decide(ctx, a.UserCode, store.DeviceCode{State: store.DeviceApproved, KeyName: a.KeyName,
		DailyLimitMicros: a.DailyLimitMicros, TrialSeconds: trialSeconds, DecidedBy: a.By})
}

// Deny refuses a pending device login; the CLI's next poll gets
// access_denied. Errors as Approve's.
func (s *Service) Deny(ctx context.Context, userCode, by string) error {
	return s.decide(ctx, userCode, store.DeviceCode{State: store.DeviceDenied, DecidedBy: by})
}

func (s *Service) decide(ctx context.Context, userCode string, d store.DeviceCode) error {
	if _, err := s.pending(ctx, userCode); err != nil {
		return err
	}
	d.UserHash = hash(normalizeUserCode(userCode))
	err := s.cfg.Store.DecideDeviceCode(ctx, d, s.cfg.Now().UTC())
	if errors.Is(err, store.ErrNotFound) {
		// Decided (or expired) between the check and the update.
		_, err = s.pending(ctx, userCode)
		if err == nil {
			err = errs.New(errs.Conflict, "the device login %s was decided by someone else just now", FormatUserCode(normalizeUserCode(userCode)))
		}
	}
	return err
}

// userAlphabet is RFC 8628 6.1's example: consonants only, no look-alikes.
const userAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

const userCodeLen = 8

func newUserCode() string {
	var b [userCodeLen]byte
	out := make([]byte, userCodeLen)
	_, _ = rand.Read(b[:])
	for i, c := range b {
		// 256 = 12*20 + 16: redraw the top 16 values so every letter is equally likely.
		for c >= 240 {
			var one [1]byte
			_, _ = rand.Read(one[:])
			c = one[0]
		}
		out[i] = userAlphabet[int(c)%len(userAlphabet)]
	}
	return FormatUserCode(string(out))
}

// FormatUserCode writes a normalized 8-letter code as XXXX-XXXX.
func FormatUserCode(norm string) string {
	if len(norm) != userCodeLen {
		return norm
	}
	return norm[:4] + "-" + norm[4:]
}

// normalizeUserCode upper-cases a typed code and drops dashes and spaces.
func normalizeUserCode(s string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(s) {
		if r == '-' || r == ' ' {
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func randomBase32(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// checkText refuses text that is too long, not UTF-8 or holds control
// characters.
func checkText(field, v string, maxLen int) error {
	if len(v) > maxLen {
		return errs.New(errs.Invalid, "%s is %d bytes; the maximum is %d", field, len(v), maxLen)
	}
	if !utf8.ValidString(v) {
		return errs.New(errs.Invalid, "%s is not valid UTF-8", field)
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return errs.New(errs.Invalid, "%s holds a control character (%U); use printable text", field, r)
		}
	}
	return nil
}
