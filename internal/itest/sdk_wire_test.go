package itest

import (
	"errors"
	"reflect"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	withruntime "withruntime.dev/runtime/sdk/go"
)

// The Go SDK and the server share their wire types (package sdk/go/wire,
// held to api/openapi.yaml by internal/api's TestWireMatchesSpec). What
// the SDK still keeps of its own is checked here: its Options, and its
// sentinel errors for the server's codes.

// Every field of the create request can be set through the SDK's Options.
func TestSDKOptionsCoverCreateRequest(t *testing.T) {
	opts := reflect.TypeOf(withruntime.Options{})
	req := reflect.TypeOf(api.CreateSandboxRequest{})
	for i := 0; i < req.NumField(); i++ {
		f := req.Field(i)
		if f.Name == "Exec" {
			continue // the first command: Client.CreateAndExec's own argument
		}
		if o, ok := opts.FieldByName(f.Name); !ok || o.Type != f.Type {
			t.Errorf("api.CreateSandboxRequest.%s (%s) has no matching withruntime.Options field", f.Name, f.Type)
		}
	}
}

// Every error code the server sends matches exactly one SDK sentinel.
func TestSDKErrorCodesMatchServer(t *testing.T) {
	sentinels := []error{withruntime.ErrBadRequest, withruntime.ErrUnauthorized, withruntime.ErrForbidden,
		withruntime.ErrNotFound, withruntime.ErrTimeout, withruntime.ErrConflict, withruntime.ErrLeaseEnded,
		withruntime.ErrSandboxStopped, withruntime.ErrTooLarge, withruntime.ErrRateLimited, withruntime.ErrInternal,
		withruntime.ErrUnavailable, withruntime.ErrNoSpace, withruntime.ErrPaused, withruntime.ErrNotImplemented,
		withruntime.ErrRangeNotSatisfiable, withruntime.ErrCostCap, withruntime.ErrSpendingLimit, withruntime.ErrQuota}
	for _, code := range []string{agentapi.CodeBadRequest, agentapi.CodeUnauthorized, agentapi.CodeForbidden,
		agentapi.CodeNotFound, agentapi.CodeTimeout, agentapi.CodeConflict, agentapi.CodeLeaseEnded,
		agentapi.CodeTooLarge, agentapi.CodeNoSpace, agentapi.CodeRateLimited, agentapi.CodeUnavailable,
		agentapi.CodeInternal, agentapi.CodeNotImplemented, "sandbox_stopped", "sandbox_paused", agentapi.CodeRangeNotSatisfiable,
		"cost_cap", "spending_limit", "quota_exceeded", "disk_quota_exceeded", "agent_timeout"} {
		matches := 0
		for _, s := range sentinels {
			if errors.Is(&withruntime.APIError{Code: code}, s) {
				matches++
			}
		}
		if matches != 1 {
			t.Errorf("error code %q matches %d SDK sentinels, want 1", code, matches)
		}
	}
}
