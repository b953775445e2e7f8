package wire

import "time"

// Device login (RFC 8628): the CLI asks for a code (POST
// /v1/device/authorize), a person approves it in the dashboard, and the
// CLI polls POST /v1/device/token until it gets a key.

// DeviceAuthorizeRequest is the body of POST /v1/device/authorize (all
// optional).
type DeviceAuthorizeRequest struct {
	// ClientName is shown to the approver, such as "alice@laptop".
	ClientName string `json:"clientName,omitempty"`
	// Trial asks for a trial key.
	Trial bool `json:"trial,omitempty"`
}

// DeviceAuthorization is the answer of POST /v1/device/authorize.
type DeviceAuthorization struct {
	// DeviceCode is the CLI's secret to poll POST /v1/device/token with.
	DeviceCode string `json:"deviceCode"`
	// UserCode is what the user shows the approver: XXXX-XXXX.
	UserCode string `json:"userCode"`
	// VerificationURI is the dashboard page where the code is approved.
	VerificationURI string `json:"verificationUri"`
	// VerificationURIComplete is that page with the code filled in.
	VerificationURIComplete string `json:"verificationUriComplete"`
	// Interval is the least number of seconds between polls.
	Interval int64 `json:"interval"`
	// ExpiresIn is the number of seconds the codes stay valid.
	ExpiresIn int64 `json:"expiresIn"`
}

// DeviceTokenRequest is the body of POST /v1/device/token.
type DeviceTokenRequest struct {
	DeviceCode string `json:"deviceCode"`
}

// DeviceToken is the answer of POST /v1/device/token once approved: the
// new key, handed out once.
type DeviceToken struct {
	// APIKey is the key's secret ("wr_...").
	APIKey  string `json:"apiKey"`
	KeyID   string `json:"keyId"`
	KeyName string `json:"keyName"`
	// DailyLimitMicros is the key's spending limit per UTC day, in
	// micro-dollars (0: none).
	DailyLimitMicros int64 `json:"dailyLimitMicros"`
	// TrialHours is a trial key's allowance of sandbox-hours.
	TrialHours float64 `json:"trialHours,omitempty"`
}

// DeviceRequest is a device login waiting for approval
// (GET /v1/device/requests/{userCode}).
type DeviceRequest struct {
	UserCode       string    `json:"userCode"`
	ClientName     string    `json:"clientName"`
	TrialRequested bool      `json:"trialRequested"`
	ExpiresAt      time.Time `json:"expiresAt"`
	// TrialHours is the allowance a trial approval grants (0: this server
	// grants no trials).
	TrialHours float64 `json:"trialHours"`
}

// DeviceApproveRequest is the body of POST /v1/device/approve.
type DeviceApproveRequest struct {
	UserCode string `json:"userCode"`
	KeyName  string `json:"keyName"`
	// DailyLimitMicros is the new key's spending limit per UTC day, in
	// micro-dollars.
	DailyLimitMicros int64 `json:"dailyLimitMicros"`
	// Trial approves a trial key.
	Trial bool `json:"trial,omitempty"`
}

// DeviceDenyRequest is the body of POST /v1/device/deny.
type DeviceDenyRequest struct {
	UserCode string `json:"userCode"`
}
