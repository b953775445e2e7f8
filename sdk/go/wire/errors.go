package wire

// Error is the body of every error answer and the error of an error event:
// {"error": {"code", "message"}}.
type Error struct {
	// Error says what went wrong.
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is what went wrong: a code and a message.
type ErrorDetail struct {
	// Code is a stable machine-readable category, each with one HTTP
	// status: "bad_request" 400, "unauthorized" 401, "forbidden" 403,
	// "not_found" 404, "method_not_allowed" 405, "timeout" 408, "conflict"
	// 409, "sandbox_paused" 409, "lease_ended" 410, "sandbox_stopped" 410,
	// "too_large" 413, "range_not_satisfiable" 416, "rate_limited" 429,
	// "internal" 500, "not_implemented" 501, "unavailable" 503, "no_space"
	// 507, "cost_cap" 400, "spending_limit" 429, "quota_exceeded" 429,
	// "disk_quota_exceeded" 507, "agent_channel_refused" 502,
	// "agent_timeout" 504, "bad_answer" 502, and from POST
	// /v1/device/token the RFC 8628 codes, all 400:
	// "authorization_pending", "slow_down", "expired_token",
	// "access_denied", "invalid_grant".
	Code string `json:"code"`
	// Message says what was wrong and how to fix it.
	Message string `json:"message"`
}

// codeStatus is the one HTTP status of each error code (ErrorDetail.Code).
var codeStatus = map[string]int{
	"bad_request": 400, "cost_cap": 400, "authorization_pending": 400, "slow_down": 400,
	"expired_token": 400, "access_denied": 400, "invalid_grant": 400,
	"unauthorized": 401, "forbidden": 403, "not_found": 404, "method_not_allowed": 405,
	"timeout": 408, "conflict": 409, "sandbox_paused": 409, "lease_ended": 410, "sandbox_stopped": 410,
	"too_large": 413, "range_not_satisfiable": 416,
	"rate_limited": 429, "spending_limit": 429, "quota_exceeded": 429,
	"internal": 500, "not_implemented": 501, "agent_channel_refused": 502, "bad_answer": 502,
	"unavailable": 503, "agent_timeout": 504, "no_space": 507, "disk_quota_exceeded": 507,
}

// CodeStatus is the HTTP status that error code (ErrorDetail.Code) is
// answered with, for an error met where no status came with it (a fork's
// failed sandbox, an error event of a stream); 500 for a code it does not
// know.
func CodeStatus(code string) int {
	if s, ok := codeStatus[code]; ok {
		return s
	}
	return 500
}
