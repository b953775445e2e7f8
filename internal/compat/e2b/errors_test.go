package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"withruntime.dev/runtime/internal/agentapi"
)

// Every status and code of Runtime's API becomes the Connect code and the
// /files status the e2b SDKs raise the right exception for (errors.go).
func TestErrorMapping(t *testing.T) {
	for _, c := range []struct {
		status int
		code   string
		rpc    connect.Code
		http   int
		says   string
	}{
		{400, "bad_request", connect.CodeInvalidArgument, 400, ""},
		{400, "cost_cap", connect.CodeInvalidArgument, 400, ""},
		{401, "unauthorized", connect.CodeUnauthenticated, 401, ""},
		{403, "forbidden", connect.CodePermissionDenied, 403, ""},
		{404, "not_found", connect.CodeNotFound, 404, ""},
		{405, "method_not_allowed", connect.CodeUnimplemented, 405, ""},
		{408, "timeout", connect.CodeDeadlineExceeded, 408, ""},
		{409, "conflict", connect.CodeFailedPrecondition, 409, ""},
		{409, "sandbox_paused", connect.CodeUnavailable, 502, "was not found running"},
		{410, "lease_ended", connect.CodeUnavailable, 502, "was not found"},
		{410, "sandbox_stopped", connect.CodeUnavailable, 502, "was not found"},
		{413, "too_large", connect.CodeInvalidArgument, 413, ""},
		{416, "range_not_satisfiable", connect.CodeOutOfRange, 416, ""},
		{429, "spending_limit", connect.CodeResourceExhausted, 429, ""},
		{429, "rate_limited", connect.CodeResourceExhausted, 429, ""},
		{500, "internal", connect.CodeInternal, 500, ""},
		{501, "not_implemented", connect.CodeUnimplemented, 501, ""},
		{502, "agent_channel_refused", connect.CodeUnavailable, 502, ""},
		{502, "bad_answer", connect.CodeUnavailable, 502, ""},
		{503, "unavailable", connect.CodeResourceExhausted, 429, ""},
		{507, "no_space", connect.CodeInternal, 507, ""},
	} {
		ae := &apiError{Status: c.status, Code: c.code, Message: "why"}
		code, msg := rpcCode(ae)
		status, hmsg := envdStatus(ae)
		if code != c.rpc || status != c.http || !strings.Contains(msg, "why") || !strings.Contains(hmsg, "why") ||
			!strings.Contains(msg, c.says) || !strings.Contains(hmsg, c.says) {
			t.Errorf("%d %s: %v %q and %d %q, want %v and %d saying %q", c.status, c.code, code, msg, status, hmsg, c.rpc, c.http, c.says)
		}
	}
	// A full disk over RPC says so, as envd does.
	if _, msg := rpcCode(&apiError{Status: 507, Code: "no_space", Message: "x"}); !strings.Contains(msg, "not enough disk space") {
		t.Errorf("507: %q", msg)
	}
}

// pagedAPI serves GET .../files/list from entries, pages of size entries,
// the cursor being the index to start at (or what bad says).
func pagedAPI(t *testing.T, entries int, size int, bad string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if !strings.HasSuffix(r.URL.Path, "/files/list") || q.Get("limit") != strconv.Itoa(agentapi.ListMaxLimit) || q.Get("depth") != "2" {
			t.Errorf("unexpected request %s", r.URL)
		}
		start := 0
		if c := q.Get("cursor"); c != "" {
			p, err := agentapi.ParseListCursor(c)
			if err != nil {
				t.Errorf("cursor %q: %v", c, err)
			}
			start, _ = strconv.Atoi(strings.TrimPrefix(p, "/d/f"))
			start++
		}
		var page agentapi.FileList
		for i := start; i < entries && len(page.Entries) < size; i++ {
			p := fmt.Sprintf("/d/f%06d", i)
			page.Entries = append(page.Entries, agentapi.FileInfo{Name: p[3:], Path: p, Type: "file", Mode: "0644"})
		}
		if n := len(page.Entries); n > 0 && start+n < entries {
			page.Truncated, page.Next = true, agentapi.ListCursor(page.Entries[n-1].Path)
			switch bad {
			case "same":
				page.Next = agentapi.ListCursor("/d/f000000")
			case "garbage":
				page.Next = "%%%"
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(page)
	})
}

// ListDir follows Runtime's pages to the end; a listing past its cap and
// pages that do not move forward are errors, never a loop.
func TestListDirPages(t *testing.T) {
	ctx := context.Background()
	tgt := target{id: "sbx_x", as: who{token: "wr_x"}, user: "user"}
	list := func(h http.Handler) ([]string, error) {
		f := &filesystemService{s: New(Config{API: h})}
		var got []string
		err := f.list(ctx, tgt, "/d", 2, &held{}, func(e agentapi.FileInfo) { got = append(got, e.Name) })
		return got, err
	}
	got, err := list(pagedAPI(t, 25, 10, ""))
	if err != nil || len(got) != 25 || got[0] != "f000000" || got[24] != "f000024" {
		t.Fatalf("25 entries in pages of 10: %d, %v", len(got), err)
	}
	for _, n := range []int{0, 10} {
		if got, err := list(pagedAPI(t, n, 10, "")); err != nil || len(got) != n {
			t.Errorf("%d entries: %d, %v", n, len(got), err)
		}
	}
	for _, bad := range []string{"same", "garbage"} {
		_, err := list(pagedAPI(t, 40, 10, bad))
		var ae *apiError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadGateway {
			t.Errorf("next %s: %v", bad, err)
		}
	}
	defer func(n int) { maxListDirEntries = n }(maxListDirEntries)
	maxListDirEntries = 15
	_, err = list(pagedAPI(t, 25, 10, ""))
	if code, msg := rpcCode(asAPIError(err)); code != connect.CodeInvalidArgument || !strings.Contains(msg, "more than 15 entries") {
		t.Errorf("over the cap: %v %q", code, msg)
	}
}
