package e2b

import (
	"net/http"
	"strings"
	"testing"
)

// TestListQuery: a malformed metadata, state or limit is a 400 with the
// reason; a key alone matches sandboxes that have it.
func TestListQuery(t *testing.T) {
	have := map[string]string{"workspace": "w1", "user": "a b"}
	for _, c := range []struct {
		raw   string
		match bool   // for a query that parses
		bad   string // part of the 400's message
	}{
		{raw: "", match: true},
		{raw: "metadata=", match: true},
		{raw: "metadata=workspace%3Dw1", match: true},
		{raw: "metadata=workspace%3Dw2", match: false},
		{raw: "metadata=workspace", match: true},
		{raw: "metadata=nokey", match: false},
		{raw: "metadata=this-is-not-key-value", match: false},
		{raw: "metadata=user%3Da%2Bb%26workspace", match: true},
		{raw: "metadata=user%3Da%252Bb", match: false}, // a+b, not "a b"
		{raw: "metadata=%zz", bad: "not URL-encoded"},
		{raw: "metadata=a%25zz%3D1", bad: "invalid URL escape"},
		{raw: "metadata=%3Dv", bad: "the key is empty"},
		{raw: "metadata=a%3D1%3D2", bad: "two ="},
		{raw: "metadata=a%3D1%26a%3D2", bad: "twice"},
		{raw: "state=running", match: true},
		{raw: "state=running,paused", match: true},
		{raw: "state=running&state=paused", match: true},
		{raw: "state=runing", bad: "state must be running, paused"},
		{raw: "state=", bad: "state must be"},
		{raw: "limit=5", match: true},
		{raw: "limit=0", bad: "limit must be a whole number from 1 to 100"},
		{raw: "limit=abc", bad: "limit must be"},
		{raw: "limit=1&limit=2", bad: "once"},
	} {
		q, err := parseListQuery(c.raw)
		var meta []metaFilter
		if err == nil {
			_, err = queryStates(q)
		}
		if err == nil {
			meta, err = queryMetadata(q)
		}
		if err == nil {
			_, err = queryLimit(q)
		}
		if c.bad != "" {
			ae, ok := err.(*apiError)
			if !ok || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, c.bad) {
				t.Errorf("%q: err %v, want a 400 saying %q", c.raw, err, c.bad)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.raw, err)
			continue
		}
		if got := metaMatch(have, meta); got != c.match {
			t.Errorf("%q: match %v, want %v", c.raw, got, c.match)
		}
	}
}
