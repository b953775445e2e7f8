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
