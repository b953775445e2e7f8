package e2b

import (
	"errors"
	"net/http"

	"connectrpc.com/connect"
)

// How the data plane answers Runtime's errors: each status (and code) of
// Runtime's API becomes the Connect code, or on the plain-HTTP routes
// (/files) the status, that the e2b SDKs (Python e2b 2.63.0, JS e2b
// 2.51.0) turn into the exception envd's own answer would give:
//
//	Runtime                             Connect (RPC)          HTTP (/files)  SDK exception
//	400 bad_request, cost_cap           invalid_argument       400            InvalidArgument
//	401 unauthorized                    unauthenticated        401            Authentication
//	403 forbidden                       permission_denied      403            Sandbox
//	404 not_found                       not_found              404            NotFound (FileNotFound)
//	405 method_not_allowed, 501         unimplemented          405, 501       Sandbox
//	408 timeout                         deadline_exceeded      408            Timeout (RPC), Sandbox
//	409 sandbox_paused, 410             unavailable, "not found" 502          SandboxNotRunning
//	409 conflict                        failed_precondition    409            Sandbox
//	413 too_large                       invalid_argument       413            InvalidArgument (RPC), Sandbox
//	416 range_not_satisfiable           out_of_range           416            Sandbox
//	429 spending_limit, rate_limited    resource_exhausted     429            RateLimit
//	503 unavailable (no capacity)       resource_exhausted     429            RateLimit
//	502 (agent gone, bad answer)        unavailable            502            SandboxUnreachable
//	507 no_space                        internal, "not enough  507            Sandbox (RPC), NotEnoughSpace
//	                                    disk space"
//	500 internal, anything else         internal               500            Sandbox
//
// Choices where E2B gives no lead: envd never answers resource_exhausted,
// which the SDKs raise as RateLimitException ("try again later"); E2B's
// own rate and sandbox limits are HTTP 429. So only Runtime's limits that
// clear with time (a spending limit, capacity) use it. A request too large
// (413) must be made smaller, as an invalid argument. A full disk is 507
// on /files, the status envd gives and the SDKs raise NotEnoughSpace for;
// over RPC envd answers a full disk as internal, and so does the facade,
// saying "not enough disk space" as envd does.

// rpcError maps an error of the in-process API to a Connect error whose code
// the SDKs turn into their own exceptions (see the table above).
func rpcError(err error) error {
	ae := asAPIError(err)
	code, msg := rpcCode(ae)
	return connect.NewError(code, errors.New(msg))
}

// rpcCode is the Connect code and message an API error is answered with.
func rpcCode(ae *apiError) (connect.Code, string) {
	msg := ae.Message
	switch {
	case ae.Code == "sandbox_paused":
		return connect.CodeUnavailable, "the sandbox was not found running: " + msg
	case ae.Status == http.StatusGone:
		return connect.CodeUnavailable, "the sandbox was not found: " + msg
	case ae.Status == http.StatusBadRequest, ae.Status == http.StatusRequestEntityTooLarge:
		return connect.CodeInvalidArgument, msg
	case ae.Status == http.StatusUnauthorized:
		return connect.CodeUnauthenticated, msg
	case ae.Status == http.StatusForbidden:
		return connect.CodePermissionDenied, msg
	case ae.Status == http.StatusNotFound:
		return connect.CodeNotFound, msg
	case ae.Status == http.StatusMethodNotAllowed, ae.Status == http.StatusNotImplemented:
		return connect.CodeUnimplemented, msg
	case ae.Status == http.StatusRequestTimeout:
		return connect.CodeDeadlineExceeded, msg
	case ae.Status == http.StatusConflict:
		return connect.CodeFailedPrecondition, msg
	case ae.Status == http.StatusRequestedRangeNotSatisfiable:
		return connect.CodeOutOfRange, msg
	case ae.Status == http.StatusTooManyRequests, ae.Status == http.StatusServiceUnavailable:
		return connect.CodeResourceExhausted, msg
	case ae.Status == http.StatusBadGateway:
		return connect.CodeUnavailable, msg
	case ae.Status == http.StatusInsufficientStorage:
		return connect.CodeInternal, "not enough disk space available: " + msg
	}
	return connect.CodeInternal, msg
}

// envdStatus is the status a plain-HTTP envd route answers an API error
// with (see the table above), and the message.
func envdStatus(ae *apiError) (int, string) {
	switch {
	case ae.Code == "sandbox_paused":
		return http.StatusBadGateway, "the sandbox was not found running: " + ae.Message
	case ae.Status == http.StatusGone:
		return http.StatusBadGateway, "the sandbox was not found: " + ae.Message
	case ae.Status == http.StatusServiceUnavailable:
		return http.StatusTooManyRequests, ae.Message
	}
	return ae.Status, ae.Message
}

// writeEnvdError answers a plain-HTTP envd route's error in E2B's shape
// ({"code", "message"}) with the status of envdStatus; a 416 keeps its
// Content-Range (bytes */SIZE).
func (s *Server) writeEnvdError(w http.ResponseWriter, r *http.Request, err error) {
	ae := asAPIError(err)
	if ae.Status >= 500 && ae.Status != http.StatusInsufficientStorage && ae.Status != http.StatusServiceUnavailable {
		s.cfg.Log.Error("e2b request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if cr := ae.Header.Get("Content-Range"); ae.Status == http.StatusRequestedRangeNotSatisfiable && cr != "" {
		w.Header().Set("Content-Range", cr)
	}
	status, msg := envdStatus(ae)
	writeError(w, status, "%s", msg)
}
