package e2b

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The query of GET /sandboxes and /v2/sandboxes, read strictly: a filter
// that cannot be read is a 400 that says why, never a filter that matches
// everything (url.Values silently drops a pair it cannot decode).

// listStates are the states a list may ask for.
var listStates = []string{"running", "paused"}

// parseListQuery decodes a list's raw query. A pair that is not
// URL-encoded is an error.
func parseListQuery(raw string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, badQuery("the query is not URL-encoded: %v", err)
	}
	return q, nil
}

// queryStates is the state filter: every state=... value, each one state
// or several joined by commas (the SDKs send "running,paused"); none
// given: both.
func queryStates(q url.Values) ([]string, error) {
	vals, ok := q["state"]
	if !ok {
		return listStates, nil
	}
	var states []string
	for _, v := range vals {
		for st := range strings.SplitSeq(v, ",") {
			st = strings.TrimSpace(st)
			if !slices.Contains(listStates, st) {
				return nil, badQuery("state must be running, paused, or both (comma-separated or repeated); got %q", v)
			}
			states = append(states, st)
		}
	}
	return states, nil
}

// metaFilter is one metadata condition: the key has the value, or, with
// anyValue, the key is there at all.
type metaFilter struct {
	key, value string
	anyValue   bool
}

// queryMetadata is the metadata filter. Its value is itself a URL-encoded
// query, key=value pairs joined by & (E2B's SDKs send
// urlencode({"k": "v", ...})). A key without =value matches sandboxes that
// have the key, whatever its value (E2B's own API refuses such a key with
// a 400; the SDKs never send one). An empty metadata= is no filter. A pair
// that does not decode, an empty key, a pair with two =, or a key given
// twice is a 400.
func queryMetadata(q url.Values) ([]metaFilter, error) {
	var out []metaFilter
	seen := map[string]bool{}
	for _, v := range q["metadata"] {
		for pair := range strings.SplitSeq(v, "&") {
			if pair == "" {
				continue
			}
			rawKey, rawValue, hasValue := strings.Cut(pair, "=")
			if strings.Contains(rawValue, "=") {
				return nil, badQuery("metadata must be URL-encoded key=value pairs joined by &; %q has two =, encode the = of a value as %%3D", pair)
			}
			key, err := url.QueryUnescape(rawKey)
			if err == nil && key == "" {
				err = fmt.Errorf("the key is empty")
			}
			if err != nil {
				return nil, badQuery("metadata must be URL-encoded key=value pairs joined by &; in %q: %v", pair, err)
			}
			value, err := url.QueryUnescape(rawValue)
			if err != nil {
				return nil, badQuery("metadata must be URL-encoded key=value pairs joined by &; in %q: %v", pair, err)
			}
			if seen[key] {
				return nil, badQuery("metadata names the key %q twice", key)
			}
			seen[key] = true
			out = append(out, metaFilter{key: key, value: value, anyValue: !hasValue})
		}
	}
	return out, nil
}

// metaMatch reports whether metadata have meets every condition of want.
func metaMatch(have map[string]string, want []metaFilter) bool {
	for _, f := range want {
		v, ok := have[f.key]
		if !ok || (!f.anyValue && v != f.value) {
			return false
		}
	}
	return true
}

// queryLimit is /v2/sandboxes' page size: a whole number from 1 to 100,
// default 100.
func queryLimit(q url.Values) (int, error) {
	vals, ok := q["limit"]
	if !ok {
		return 100, nil
	}
	if len(vals) > 1 {
		return 0, badQuery("limit is given %d times; give it once", len(vals))
	}
	n, err := strconv.Atoi(vals[0])
	if err != nil || n < 1 || n > 100 {
		return 0, badQuery("limit must be a whole number from 1 to 100; got %q", vals[0])
	}
	return n, nil
}

func badQuery(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: "bad_request", Message: fmt.Sprintf(format, args...)}
}
