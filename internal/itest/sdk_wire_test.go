package itest

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	withruntime "withruntime.dev/runtime/sdk/go"
)

// The Go SDK copies the API's wire types (it cannot import internal/).
// These tests compare the copies with the server's types field by field —
// JSON name, omitempty and JSON shape, recursively — so they cannot drift.

func TestSDKWireTypesMatchServer(t *testing.T) {
	pairs := []struct{ sdk, server any }{
		{withruntime.CreateSandboxRequest{}, api.CreateSandboxRequest{}},
		{withruntime.SandboxInfo{}, api.Sandbox{}},
		{withruntime.SandboxWithResult{}, api.SandboxWithResult{}},
		{withruntime.SandboxList{}, api.SandboxList{}},
		{withruntime.SetTimeoutRequest{}, api.SetTimeoutRequest{}},
		{withruntime.ResumeRequest{}, api.ResumeRequest{}},
		{withruntime.ExecRequest{}, agentapi.ExecRequest{}},
		{withruntime.Event{}, agentapi.Event{}},
		{withruntime.ExecResult{}, agentapi.ExecResult{}},
		{withruntime.Process{}, agentapi.Process{}},
		{withruntime.FileInfo{}, agentapi.FileInfo{}},
		{withruntime.FileList{}, agentapi.FileList{}},
		{withruntime.MkdirRequest{}, agentapi.MkdirRequest{}},
		{withruntime.RenameRequest{}, agentapi.RenameRequest{}},
		{withruntime.ErrorInfo{}, agentapi.Error{}},
		{withruntime.ErrorBody{}, agentapi.ErrorBody{}},
		{withruntime.NetworkPolicy{}, api.NetworkPolicy{}},
		{withruntime.CreateSecretRequest{}, api.CreateSecretRequest{}},
		{withruntime.SecretInfo{}, api.Secret{}},
		{withruntime.SecretList{}, api.SecretList{}},
		{withruntime.CreateContextRequest{}, agentapi.CreateContextRequest{}},
		{withruntime.CodeContext{}, agentapi.Context{}},
		{withruntime.ContextList{}, agentapi.ContextList{}},
		{withruntime.RunCodeRequest{}, agentapi.RunCodeRequest{}},
		{withruntime.Execution{}, agentapi.Execution{}},
		{withruntime.Result{}, agentapi.Result{}},
		{withruntime.ExecutionError{}, agentapi.ExecutionError{}},
		{withruntime.CodeEvent{}, agentapi.CodeEvent{}},
		{withruntime.CreateKeyRequest{}, api.CreateKeyRequest{}},
		{withruntime.KeyInfo{}, api.Key{}},
		{withruntime.KeyList{}, api.KeyList{}},
	}
	for _, p := range pairs {
		st, vt := reflect.TypeOf(p.sdk), reflect.TypeOf(p.server)
		got, want := sdkJSONShape(st), sdkJSONShape(vt)
		if got != want {
			t.Errorf("SDK type %s does not match the server's %s:\n  sdk:    %s\n  server: %s", st, vt, got, want)
		}
	}
}

// Every field of the create request can be set through the SDK's Options.
func TestSDKOptionsCoverCreateRequest(t *testing.T) {
	opts := reflect.TypeOf(withruntime.Options{})
	req := reflect.TypeOf(api.CreateSandboxRequest{})
	for i := 0; i < req.NumField(); i++ {
		f := req.Field(i)
		if f.Name == "Exec" {
			continue // the first command: Client.CreateAndExec's own argument
		}
		// Types the SDK copies (it cannot import internal/) match by shape.
		if o, ok := opts.FieldByName(f.Name); !ok || o.Type != f.Type && sdkJSONShape(o.Type) != sdkJSONShape(f.Type) {
			t.Errorf("api.CreateSandboxRequest.%s (%s) has no matching withruntime.Options field", f.Name, f.Type)
		}
	}
}

func TestSDKConstantsAndCodesMatchServer(t *testing.T) {
	for _, c := range []struct {
		name      string
		sdk, want any
	}{
		{"Workspace", withruntime.Workspace, agentapi.Workspace},
		{"DefaultExecTimeoutSeconds", withruntime.DefaultExecTimeoutSeconds, agentapi.DefaultExecTimeoutSeconds},
		{"DefaultMaxOutputBytes", withruntime.DefaultMaxOutputBytes, agentapi.DefaultMaxOutputBytes},
		{"MaxMaxOutputBytes", withruntime.MaxMaxOutputBytes, agentapi.MaxMaxOutputBytes},
		{"TimeoutExitCode", withruntime.TimeoutExitCode, agentapi.TimeoutExitCode},
		{"DefaultCodeTimeoutSeconds", withruntime.DefaultCodeTimeoutSeconds, agentapi.DefaultCodeTimeoutSeconds},
		{"DefaultListLimit", withruntime.DefaultListLimit, agentapi.ListDefaultLimit},
		{"MaxListLimit", withruntime.MaxListLimit, agentapi.ListMaxLimit},
	} {
		if c.sdk != c.want {
			t.Errorf("%s: SDK %v, server %v", c.name, c.sdk, c.want)
		}
	}
	sentinels := []error{withruntime.ErrBadRequest, withruntime.ErrUnauthorized, withruntime.ErrForbidden,
		withruntime.ErrNotFound, withruntime.ErrTimeout, withruntime.ErrConflict, withruntime.ErrLeaseEnded,
		withruntime.ErrSandboxStopped, withruntime.ErrTooLarge, withruntime.ErrRateLimited, withruntime.ErrInternal,
		withruntime.ErrUnavailable, withruntime.ErrNoSpace, withruntime.ErrPaused, withruntime.ErrNotImplemented,
		withruntime.ErrRangeNotSatisfiable}
	for _, code := range []string{agentapi.CodeBadRequest, agentapi.CodeUnauthorized, agentapi.CodeForbidden,
		agentapi.CodeNotFound, agentapi.CodeTimeout, agentapi.CodeConflict, agentapi.CodeLeaseEnded,
		agentapi.CodeTooLarge, agentapi.CodeNoSpace, agentapi.CodeRateLimited, agentapi.CodeUnavailable,
		agentapi.CodeInternal, agentapi.CodeNotImplemented, "sandbox_stopped", "sandbox_paused", agentapi.CodeRangeNotSatisfiable} {
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

var timeType = reflect.TypeOf(time.Time{})

// sdkJSONShape describes how encoding/json sees t: object fields sorted by JSON
// name with their omitempty flag and shape; Go type names are left out.
func sdkJSONShape(t reflect.Type) string {
	switch {
	case t == timeType:
		return "time"
	case t.Kind() == reflect.Pointer:
		return "*" + sdkJSONShape(t.Elem())
	}
	switch t.Kind() {
	case reflect.Struct:
		var fields []string
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if name == "" {
				name = f.Name
			}
			omit := ""
			if strings.Contains(opts, "omitempty") {
				omit = ",omitempty"
			}
			fields = append(fields, fmt.Sprintf("%s%s:%s", name, omit, sdkJSONShape(f.Type)))
		}
		sort.Strings(fields)
		return "{" + strings.Join(fields, " ") + "}"
	case reflect.Map:
		return "map[" + sdkJSONShape(t.Key()) + "]" + sdkJSONShape(t.Elem())
	case reflect.Slice, reflect.Array:
		return "[]" + sdkJSONShape(t.Elem())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "int"
	case reflect.Float32, reflect.Float64:
		return "float"
	}
	return t.Kind().String()
}
