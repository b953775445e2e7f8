// Package errs sorts errors into the categories that the API maps to HTTP
// statuses (in one place: internal/api). Code deeper down wraps a category
// with a message that says what was wrong and how to fix it; callers test
// the category with errors.Is, never the text.
package errs

import (
	"errors"
	"fmt"
	"time"
)

// Categories. Each maps to one HTTP status.
var (
	Invalid       = errors.New("bad_request")     // 400
	Unauthorized  = errors.New("unauthorized")    // 401
	Forbidden     = errors.New("forbidden")       // 403
	NotFound      = errors.New("not_found")       // 404
	Conflict      = errors.New("conflict")        // 409: wrong state
	Paused        = errors.New("sandbox_paused")  // 409: the sandbox is paused (or was paused while the request ran)
	LeaseEnded    = errors.New("lease_ended")     // 410: the sandbox's lease ended
	Stopped       = errors.New("sandbox_stopped") // 410: the sandbox was deleted or failed
	TooLarge      = errors.New("too_large")       // 413
	Capacity      = errors.New("capacity")        // 503: no room for another sandbox now
	CostCap       = errors.New("cost_cap")        // 400: the lease could cost more than maxCostMicros
	SpendingLimit = errors.New("spending_limit")  // 429: the key reached its daily spending limit
	RateLimited   = errors.New("rate_limited")    // 429: too many requests of one kind from one client; Retry-After says when to try again
	NoSpace       = errors.New("no_space")        // 507: the host's disk is full
	// NotImplemented says this server cannot do what was asked at all
	// (its driver lacks the capability); the message names it.
	NotImplemented = errors.New("not_implemented") // 501
)

// Quota categories: a key at one of its quotas (sandbox/quota.go).
var (
	Quota     = errors.New("quota_exceeded")      // 429: the key holds as many sandboxes (or paused ones) as its quota allows
	DiskQuota = errors.New("disk_quota_exceeded") // 507: the key's sandboxes and images hold as much host disk as its quota allows
)

// Error is a categorised error with a user-facing message.
type Error struct {
	Kind error
	Msg  string
	// RetryAfter, when positive, is how long the caller should wait before
	// trying again (the answer's Retry-After header).
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Msg }

// Unwrap lets errors.Is find the category.
func (e *Error) Unwrap() error { return e.Kind }

// New returns an error of category kind with a formatted message.
func New(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Retry returns an error of category kind with a formatted message that
// tells the caller to try again after a wait (Retry-After).
func Retry(kind error, after time.Duration, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...), RetryAfter: after}
}

// RetryAfter is the wait an error in err's chain asks for (0: none).
func RetryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}
