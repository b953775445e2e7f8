package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode/utf8"
)

// field is one argument of a tool.
type field struct {
	name string
	// integer fields are whole numbers; others are strings.
	integer bool
	// essential fields must be present (a sentinel-default field may be
	// left out and takes "" or 0).
	essential bool
	// max bounds a string's length in bytes.
	max int
}

// args are decoded, checked arguments: strings and int64s by name, with
// absent fields at their sentinel defaults.
type args struct {
	str map[string]string
	num map[string]int64
}

// decodeArgs checks the model's arguments against fields. The message of
// the error is for the model.
func decodeArgs(raw json.RawMessage, fields []field) (args, error) {
	a := args{str: map[string]string{}, num: map[string]int64{}}
	raw = bytes.TrimSpace(raw)
	// Some models send the arguments JSON-encoded a second time.
	if len(raw) > 0 && raw[0] == '"' {
		var inner string
		if err := json.Unmarshal(raw, &inner); err == nil {
			raw = bytes.TrimSpace([]byte(inner))
		}
	}
	obj := map[string]json.RawMessage{}
	if len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&obj); err != nil {
			return a, fmt.Errorf("the arguments must be one JSON object (%s)", describe(err))
		}
		if dec.More() {
			return a, fmt.Errorf("the arguments must be one JSON object, with nothing after it")
		}
	}
	known := map[string]field{}
	for _, f := range fields {
		known[f.name] = f
	}
	var unknown []string
	for name := range obj {
		if _, ok := known[name]; !ok {
			unknown = append(unknown, fmt.Sprintf("%q", name))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return a, fmt.Errorf("unknown field %s", strings.Join(unknown, ", "))
	}
	for _, f := range fields {
		v, ok := obj[f.name]
		if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			if f.essential {
				return a, fmt.Errorf("missing %q", f.name)
			}
			continue
		}
		if f.integer {
			n, err := wholeNumber(v)
			if err != nil {
				return a, fmt.Errorf("%q %v", f.name, err)
			}
			a.num[f.name] = n
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return a, fmt.Errorf("%q must be a string, not %s", f.name, jsonKind(v))
		}
		if f.max > 0 && len(s) > f.max {
			return a, fmt.Errorf("%q is %d bytes, over the limit of %d", f.name, len(s), f.max)
		}
		if strings.ContainsRune(s, 0) {
			return a, fmt.Errorf("%q contains a NUL character, which is not allowed", f.name)
		}
		if !utf8.ValidString(s) {
			return a, fmt.Errorf("%q is not valid UTF-8", f.name)
		}
		a.str[f.name] = s
	}
	return a, nil
}

func wholeNumber(v json.RawMessage) (int64, error) {
	var n json.Number
	if v = bytes.TrimSpace(v); len(v) == 0 || v[0] == '"' || json.Unmarshal(v, &n) != nil {
		return 0, fmt.Errorf("must be a whole number, not %s", jsonKind(v))
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("must be a whole number, not %s", n)
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("must be a whole number, not %s", n)
	}
	return int64(f), nil
}

func jsonKind(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func describe(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case asErr(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)
	case asErr(err, &te):
		return fmt.Sprintf("got a JSON %s", te.Value)
	}
	return err.Error()
}
