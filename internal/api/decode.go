package api

// Strict input. Every JSON request body, whether the server handles it or
// forwards it to a sandbox's agent, goes through decodeJSON, which refuses
// what encoding/json would let through:
//   - a body of null, or anything but an object, at the top level;
//   - a member name that is not exactly a documented field (encoding/json
//     matches names case-insensitively, so {"Command": ...} or
//     {"TIMEOUTSECONDS": 5} would work, and {"cpu": 1, "CPU": 8} would keep
//     the last), and a member name given twice in one object;
//   - invalid UTF-8, and data after the object;
//   - a number past its field's documented range (bounds), which is
//     refused with the range named instead of wrapping or saturating.
// The decoder is encoding/json/v2's (its mirror module until Go 1.27), whose
// defaults are case-sensitive names, no duplicate names and valid UTF-8.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"withruntime.dev/runtime/internal/errs"
)

// bound is a numeric field's accepted range, checked by decodeJSON after
// decoding and used to explain a number too large to decode at all.
type bound struct {
	// field is the member's JSON name ("timeoutSeconds").
	field string
	// min and max are the accepted range, inclusive.
	min, max float64
	// zero, when set, says what 0 means ("the default, 300"); 0 is then
	// accepted besides the range.
	zero string
	// unit follows the range in messages ("seconds").
	unit string
	// whole says the field takes integers only.
	whole bool
	// get returns the decoded value and its text.
	get func() (float64, string)
}

func (b bound) rule() string {
	kind := ""
	if b.whole {
		kind = "a whole number "
	}
	s := fmt.Sprintf("%s must be %sfrom %s to %s", b.field, kind, num(b.min), num(b.max))
	if b.unit != "" {
		s += " " + b.unit
	}
	if b.zero != "" {
		s += ", or 0 for " + b.zero
	}
	return s
}

func (b bound) check() error {
	v, text := b.get()
	if v == 0 && b.zero != "" {
		return nil
	}
	if !(v >= b.min && v <= b.max) { // also refuses NaN
		return badRequest("%s; got %s", b.rule(), text)
	}
	return nil
}

// intBound, intsBound and floatBound bind a bound to a field.
func intBound(field string, p *int64, min, max int64, zero, unit string) bound {
	return bound{field: field, min: float64(min), max: float64(max), zero: zero, unit: unit, whole: true,
		get: func() (float64, string) { return float64(*p), strconv.FormatInt(*p, 10) }}
}

func intsBound(field string, p *int, min, max int, zero, unit string) bound {
	return bound{field: field, min: float64(min), max: float64(max), zero: zero, unit: unit, whole: true,
		get: func() (float64, string) { return float64(*p), strconv.Itoa(*p) }}
}

func floatBound(field string, p *float64, min, max float64, zero, unit string) bound {
	return bound{field: field, min: min, max: max, zero: zero, unit: unit,
		get: func() (float64, string) { return *p, num(*p) }}
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// checker is a request with rules beyond its shape and ranges (names,
// NUL and control characters); decodeJSON calls check after decoding.
type checker interface{ check() error }

// decode reads the request body (at most maxJSONBytes) into v strictly (see
// decodeJSON). An empty body is an empty object.
func decode(r *http.Request, v any, bounds ...bound) error {
	data, release, err := readBody(r, maxJSONBytes)
	defer release()
	if err != nil {
		return err
	}
	return decodeJSON(data, v, bounds...)
}

// readBody reads at most limit bytes of the request body, booked for the
// request's key (see budget.go) until release is called (always, also
// after an error).
func readBody(r *http.Request, limit int64) (data []byte, release func(), err error) {
	if r.Body == nil {
		return nil, func() {}, nil
	}
	br := &budgetReader{ctx: r.Context(), r: http.MaxBytesReader(nil, r.Body, limit), key: keyFrom(r.Context()).ID}
	if n := r.ContentLength; n > 0 && n <= limit {
		data, err = br.readAnnounced(n)
	} else {
		data, err = io.ReadAll(br)
	}
	if err != nil {
		br.release()
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, func() {}, errs.New(errs.TooLarge, "request body is over %d bytes; JSON bodies are small — upload files with PUT .../files", limit)
		case errors.Is(err, errBodyBudget):
			return nil, func() {}, errs.New(errs.Capacity, "this key's requests already hold %d MiB of the server's memory (request bodies, exec stdin included, about three times their size while decoded); retry when some have finished, or put large input in a file (PUT .../files streams)", maxHeldBytesPerKey>>20)
		}
		return nil, func() {}, badRequest("reading request body: %v", err)
	}
	return data, br.release, nil
}

// decodeJSON decodes one JSON object from data into v (a pointer to a
// struct), strictly (see the top of this file), then checks bounds and,
// when v is a checker, its other rules. Empty data is an empty object.
func decodeJSON(data []byte, v any, bounds ...bound) error {
	body := bytes.TrimLeft(data, " \t\r\n") // not a string: that would copy a 60 MB body once more
	switch {
	case len(body) == 0:
		// An empty body is an empty object: every field at its zero value.
	case string(bytes.TrimSpace(body)) == "null":
		return badRequest("the request body is null; send a JSON object (`{}` for all defaults)")
	case body[0] != '{':
		return badRequest("the request body must be a JSON object ({...}); got %s", jsonKindOf(body[0]))
	default:
		if err := json.Unmarshal(data, v, json.RejectUnknownMembers(true)); err != nil {
			return badRequest("%s", describeJSONError(err, reflect.TypeOf(v), bounds))
		}
	}
	for _, b := range bounds {
		if err := b.check(); err != nil {
			return err
		}
	}
	if c, ok := v.(checker); ok {
		return c.check()
	}
	return nil
}

func jsonKindOf(c byte) string {
	switch {
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	}
	return "something that is not JSON"
}

// describeJSONError turns a decoding error into a message saying which
// field was wrong and how. t is the type decoded into.
func describeJSONError(err error, t reflect.Type, bounds []bound) string {
	var syn *jsontext.SyntacticError
	var sem *json.SemanticError
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName) && errors.As(err, &syn):
		return fmt.Sprintf("field %q appears twice in %s; send each field once", syn.JSONPointer.LastToken(), where(syn.JSONPointer.Parent()))
	case errors.Is(err, json.ErrUnknownName) && errors.As(err, &sem):
		name := sem.JSONPointer.LastToken()
		known := fieldsAt(t, sem.JSONPointer.Parent())
		for _, k := range known {
			if strings.EqualFold(k, name) {
				return fmt.Sprintf("unknown field %q in %s: field names are case-sensitive; use %q", name, where(sem.JSONPointer.Parent()), k)
			}
		}
		return fmt.Sprintf("unknown field %q in %s; the fields are %s (see api/openapi.yaml)", name, where(sem.JSONPointer.Parent()), strings.Join(quoteAll(known), ", "))
	case errors.As(err, &syn):
		return "malformed JSON body: " + strings.TrimPrefix(syn.Error(), "jsontext: ")
	case errors.As(err, &sem):
		field := sem.JSONPointer.LastToken()
		if sem.JSONKind == '0' && sem.GoType != nil && isNumber(sem.GoType.Kind()) {
			for _, b := range bounds {
				if "/"+b.field == string(sem.JSONPointer) {
					return fmt.Sprintf("%s; got %s", b.rule(), sem.JSONValue)
				}
			}
			return fmt.Sprintf("field %q: %s is not %s", field, sem.JSONValue, describeType(sem.GoType))
		}
		if sem.GoType != nil && sem.JSONKind != 0 {
			if sem.JSONPointer == "" {
				return fmt.Sprintf("the request body must be %s, not a JSON %s", describeType(sem.GoType), sem.JSONKind)
			}
			return fmt.Sprintf("field %q must be %s, not a JSON %s", field, describeType(sem.GoType), kindName(sem.JSONKind))
		}
	}
	return "malformed JSON body: " + strings.TrimPrefix(err.Error(), "json: ")
}

func where(p jsontext.Pointer) string {
	if p == "" {
		return "the request body"
	}
	return fmt.Sprintf("%q", string(p))
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

func isNumber(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "boolean"
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return k.String()
}

// describeType names what a Go type accepts, in JSON words.
func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number in range"
	case reflect.Slice, reflect.Array:
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(describeType(t.Elem()), "a "), "an ") + "s"
	case reflect.Map:
		return "an object whose values are " + strings.TrimPrefix(strings.TrimPrefix(describeType(t.Elem()), "a "), "an ") + "s"
	}
	return "an object"
}

// fieldsAt returns the JSON names of the struct found at p inside t (nil
// when p does not lead to a struct).
func fieldsAt(t reflect.Type, p jsontext.Pointer) []string {
	for tok := range p.Tokens() {
		t = deref(t)
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByJSONName(t, tok)
			if !ok {
				return nil
			}
			t = f.Type
		case reflect.Map, reflect.Slice, reflect.Array:
			t = t.Elem()
		default:
			return nil
		}
	}
	t = deref(t)
	if t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for i := range t.NumField() {
		if name, ok := jsonName(t.Field(i)); ok {
			names = append(names, name)
		}
	}
	return names
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if n, ok := jsonName(t.Field(i)); ok && n == name {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

func jsonName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch tag {
	case "-":
		return "", false
	case "":
		return f.Name, true
	}
	return tag, true
}

// checkName refuses a name holding a control character (NUL, line breaks,
// escapes, DEL, C1 controls). what says whose name it is ("metadata key").
func checkName(what, s string) error {
	for i, r := range s {
		if unicode.IsControl(r) {
			return badRequest("%s %q holds a control character (%U at byte %d); names cannot hold NUL, line breaks or other control characters", what, s, r, i)
		}
	}
	return nil
}

// checkNoNUL refuses a value holding a NUL byte, which no path, argument or
// environment value can carry through exec.
func checkNoNUL(what, s string) error {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return badRequest("%s holds a NUL byte (at byte %d), which it cannot carry; remove it", what, i)
	}
	return nil
}

// checkEnv refuses environment variables that exec cannot pass: names must
// be non-empty, without '=' or control characters; values without NUL.
func checkEnv(what string, env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.Contains(k, "=") {
			return badRequest("%s: %q is not a valid variable name: names are non-empty, without '='", what, k)
		}
		if err := checkName(what+" name", k); err != nil {
			return err
		}
		if err := checkNoNUL(fmt.Sprintf("%s value of %q", what, k), v); err != nil {
			return err
		}
	}
	return nil
}
