package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/errs"
)

// CodeMethodNotAllowed is the error code of a 405: the path exists but not
// with this method.
const CodeMethodNotAllowed = "method_not_allowed"

// CodeQuotaExceeded is the error code of a 429 for a key at one of its
// count quotas (sandboxes, paused sandboxes); the message names it.
const CodeQuotaExceeded = "quota_exceeded"

// CodeDiskQuota is the error code of a 507 for a key at its disk quota.
const CodeDiskQuota = "disk_quota_exceeded"

// CodeNotImplemented is the error code of a 501: the server's driver
// cannot do what was asked (volumes or snapshots under Kubernetes); the
// message names the missing capability.
const CodeNotImplemented = "not_implemented"

// httpError is an answer decided by the API layer itself (a 405), with its
// status and code.
type httpError struct {
	status int
	code   string
	msg    string
}

func (e *httpError) Error() string { return e.msg }

// statusOf maps an error's category to its HTTP status and code. This is
// the one place where categories become statuses.
func statusOf(err error) (int, string) {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he.status, he.code
	case errors.Is(err, errs.Invalid):
		return http.StatusBadRequest, agentapi.CodeBadRequest
	case errors.Is(err, errs.Unauthorized):
		return http.StatusUnauthorized, agentapi.CodeUnauthorized
	case errors.Is(err, errs.Forbidden):
		return http.StatusForbidden, agentapi.CodeForbidden
	case errors.Is(err, errs.NotFound):
		return http.StatusNotFound, agentapi.CodeNotFound
	case errors.Is(err, errs.Paused):
		return http.StatusConflict, "sandbox_paused"
	case errors.Is(err, errs.Conflict):
		return http.StatusConflict, agentapi.CodeConflict
	case errors.Is(err, errs.LeaseEnded):
		return http.StatusGone, agentapi.CodeLeaseEnded
	case errors.Is(err, errs.Stopped):
		return http.StatusGone, "sandbox_stopped"
	case errors.Is(err, errs.TooLarge):
		return http.StatusRequestEntityTooLarge, agentapi.CodeTooLarge
	case errors.Is(err, errs.CostCap):
		return http.StatusBadRequest, "cost_cap"
	case errors.Is(err, errs.SpendingLimit):
		return http.StatusTooManyRequests, "spending_limit"
	case errors.Is(err, errs.RateLimited):
		return http.StatusTooManyRequests, agentapi.CodeRateLimited
	case errors.Is(err, errs.Quota):
		return http.StatusTooManyRequests, CodeQuotaExceeded
	case errors.Is(err, errs.DiskQuota):
		return http.StatusInsufficientStorage, CodeDiskQuota
	case errors.Is(err, errs.NoSpace):
		return http.StatusInsufficientStorage, agentapi.CodeNoSpace
	case errors.Is(err, errs.Capacity):
		return http.StatusServiceUnavailable, agentapi.CodeUnavailable
	case errors.Is(err, errs.NotImplemented):
		return http.StatusNotImplemented, CodeNotImplemented
	}
	return http.StatusInternalServerError, agentapi.CodeInternal
}

func isInternal(err error) bool {
	status, _ := statusOf(err)
	// 507 is a disk quota or the host's reserve, the caller's limit and
	// said to it: logged as errors, one tenant at its quota would fill the
	// server's error log.
	return status >= 500 && status != http.StatusInsufficientStorage && status != http.StatusNotImplemented
}

func writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := statusOf(err)
	if d := errs.RetryAfter(err); d > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
	}
	msg := err.Error()
	if status == http.StatusInternalServerError {
		msg = "internal error: " + msg + " (the server log has details)"
	}
	writeJSON(w, status, agentapi.ErrorBody{Error: agentapi.Error{Code: code, Message: msg}})
}

func badRequest(format string, args ...any) error { return errs.New(errs.Invalid, format, args...) }

func notFound(format string, args ...any) error { return errs.New(errs.NotFound, format, args...) }
