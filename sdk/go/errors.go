package withruntime

import (
	"errors"
	"fmt"

	"withruntime.dev/runtime/sdk/go/wire"
)

// Sentinel errors, one per error code of the API. Test for them with
// errors.Is: every error answer from the server is an *APIError, which
// matches the sentinel of its code.
//
//	if errors.Is(err, withruntime.ErrNotFound) { ... }
var (
	// ErrBadRequest (400 bad_request): the request was invalid; the message
	// says what to fix.
	ErrBadRequest = errors.New("withruntime: bad request")
	// ErrUnauthorized (401 unauthorized): the API key is missing, wrong or
	// revoked.
	ErrUnauthorized = errors.New("withruntime: unauthorized")
	// ErrForbidden (403 forbidden): the key may not do this.
	ErrForbidden = errors.New("withruntime: forbidden")
	// ErrNotFound (404 not_found): no such sandbox, file or directory.
	ErrNotFound = errors.New("withruntime: not found")
	// ErrTimeout (408 timeout): the server gave up waiting; also 504
	// agent_timeout: the sandbox's agent did not answer within the
	// server's bound (see the API's Heartbeats). A client-side bound on a
	// silent server is a *TimeoutError instead.
	ErrTimeout = errors.New("withruntime: timeout")
	// ErrConflict (409 conflict): the sandbox or file is in the wrong state
	// (still starting, already exists, not empty).
	ErrConflict = errors.New("withruntime: conflict")
	// ErrPaused (409 sandbox_paused): the sandbox is paused (Resume it, or
	// create it with Options.AutoResume), or was paused while the request
	// ran (the command it ran was killed).
	ErrPaused = errors.New("withruntime: sandbox paused")
	// ErrLeaseEnded (410 lease_ended): the sandbox's lease ended and the
	// server destroyed it. Create a new sandbox; extend leases with
	// SetTimeout before they end.
	ErrLeaseEnded = errors.New("withruntime: sandbox lease ended")
	// ErrSandboxStopped (410 sandbox_stopped): the sandbox was destroyed
	// (by Close or another client) or failed.
	ErrSandboxStopped = errors.New("withruntime: sandbox stopped")
	// ErrTooLarge (413 too_large): an upload or request body is over the
	// server's cap.
	ErrTooLarge = errors.New("withruntime: too large")
	// ErrRangeNotSatisfiable (416 range_not_satisfiable): a ranged
	// download (Files.OpenRange) starts past the end of the file.
	ErrRangeNotSatisfiable = errors.New("withruntime: range not satisfiable")
	// ErrRateLimited (429 rate_limited): slow down and retry.
	ErrRateLimited = errors.New("withruntime: rate limited")
	// ErrInternal (500 internal): the server failed; its log has details.
	ErrInternal = errors.New("withruntime: internal server error")
	// ErrUnavailable (503 unavailable): no capacity for another sandbox now.
	ErrUnavailable = errors.New("withruntime: unavailable")
	// ErrNoSpace (507 no_space): the sandbox's disk is full.
	ErrNoSpace = errors.New("withruntime: no space left in sandbox")
	// ErrNotImplemented (501 not_implemented): the sandbox's template has
	// no kernels for RunCode (create it with
	// Options{Template: CodeInterpreterTemplate}), or the server's driver
	// keeps no volumes (Kubernetes).
	ErrNotImplemented = errors.New("withruntime: not implemented by this sandbox")
	// ErrCostCap (400 cost_cap): the sandbox's first lease could cost more
	// than Options.MaxCostMicros; the message gives the worst case.
	ErrCostCap = errors.New("withruntime: over the cost cap")
	// ErrSpendingLimit (429 spending_limit): the key reached its daily
	// spending limit; creates resume at midnight UTC.
	ErrSpendingLimit = errors.New("withruntime: daily spending limit reached")
	// ErrQuota (429 quota_exceeded, 507 disk_quota_exceeded): the key
	// holds as many sandboxes, paused sandboxes or MiB of host disk as its
	// quota allows; the message names the quota, its value and the use.
	// Delete (or resume) sandboxes, or ask for a key with a larger quota.
	ErrQuota = errors.New("withruntime: key quota reached")

	// ErrNotConfigured is returned by NewClient (and so by Create, Connect
	// and List) when no server is configured; its message says how to
	// configure one.
	ErrNotConfigured = errors.New("withruntime: no Runtime server configured")
)

// codes maps each API error code to its sentinel (its HTTP status is
// wire.CodeStatus's).
var codes = map[string]error{
	"bad_request":           ErrBadRequest,
	"unauthorized":          ErrUnauthorized,
	"forbidden":             ErrForbidden,
	"not_found":             ErrNotFound,
	"timeout":               ErrTimeout,
	"agent_timeout":         ErrTimeout,
	"conflict":              ErrConflict,
	"sandbox_paused":        ErrPaused,
	"lease_ended":           ErrLeaseEnded,
	"sandbox_stopped":       ErrSandboxStopped,
	"too_large":             ErrTooLarge,
	"range_not_satisfiable": ErrRangeNotSatisfiable,
	"rate_limited":          ErrRateLimited,
	"internal":              ErrInternal,
	"not_implemented":       ErrNotImplemented,
	"unavailable":           ErrUnavailable,
	"no_space":              ErrNoSpace,
	"cost_cap":              ErrCostCap,
	"spending_limit":        ErrSpendingLimit,
	"quota_exceeded":        ErrQuota,
	"disk_quota_exceeded":   ErrQuota,
}

// byStatus is the sentinel for an answer whose code is unknown to this
// version of the SDK (a newer server) or that carried no error body.
var byStatus = map[int]error{
	400: ErrBadRequest, 401: ErrUnauthorized, 403: ErrForbidden, 404: ErrNotFound,
	408: ErrTimeout, 504: ErrTimeout, 409: ErrConflict, 410: ErrSandboxStopped, 413: ErrTooLarge, 416: ErrRangeNotSatisfiable,
	429: ErrRateLimited, 500: ErrInternal, 501: ErrNotImplemented, 503: ErrUnavailable, 507: ErrNoSpace,
}

// APIError is an error answer from the server (or an error event that
// ended an exec stream).
type APIError struct {
	// Status is the HTTP status (for an error event, the status its code
	// maps to).
	Status int
	// Code is the stable error code, such as "not_found" or "lease_ended".
	Code string
	// Message is the server's explanation, which says how to fix it.
	Message string
}

// Error returns "withruntime: CODE (STATUS): MESSAGE".
func (e *APIError) Error() string {
	return fmt.Sprintf("withruntime: %s (%d): %s", e.Code, e.Status, e.Message)
}

// Is makes errors.Is(err, ErrNotFound) and the like true for an APIError
// of that code (or, for a code this SDK does not know, of that status).
func (e *APIError) Is(target error) bool {
	if err, ok := codes[e.Code]; ok {
		return err == target
	}
	return byStatus[e.Status] == target
}

// statusOfCode is the HTTP status an error code maps to (500 if unknown).
func statusOfCode(code string) int { return wire.CodeStatus(code) }
