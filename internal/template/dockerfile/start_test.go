package dockerfile

import (
	"errors"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/template"
)

// StartOf: FROM's start, CMD replacing its command (and its ready check),
// the request's fields on top.
func TestStartOf(t *testing.T) {
	parse := func(src string) *File {
		t.Helper()
		f, err := Parse(strings.NewReader(src))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	kernel := &template.Start{Kernel: true}
	served := &template.Start{Command: "serve", ReadyCommand: "check", ReadyTimeoutSeconds: 9}
	for _, c := range []struct {
		name      string
		df        string
		from, req *template.Start
		want      *template.Start
	}{
		{"nothing", "FROM base\n", nil, nil, nil},
		{"CMD alone", "FROM base\nCMD python3 -m http.server 8000\n", nil, nil, &template.Start{Command: "python3 -m http.server 8000"}},
		{"CMD and a ready check", "FROM base\nCMD srv\n", nil, &template.Start{ReadyCommand: "curl -sf localhost"}, &template.Start{Command: "srv", ReadyCommand: "curl -sf localhost"}},
		{"FROM a warm kernel", "FROM code-interpreter\nRUN true\n", kernel, nil, kernel},
		{"FROM a kernel, with CMD", "FROM code-interpreter\nCMD srv\n", kernel, nil, &template.Start{Kernel: true, Command: "srv"}},
		{"CMD replaces FROM's command and check", "FROM web\nCMD other\n", served, nil, &template.Start{Command: "other"}},
		{"FROM's start kept", "FROM web\n", served, nil, served},
		{"the request's command wins over CMD", "FROM base\nCMD one\n", nil, &template.Start{Command: "two"}, &template.Start{Command: "two"}},
	} {
		got, err := StartOf(parse(c.df), c.from, c.req)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	if _, err := StartOf(parse("FROM base\n"), nil, &template.Start{ReadyTimeoutSeconds: 5}); !errors.Is(err, errs.Invalid) {
		t.Errorf("a timeout without a check: %v", err)
	}
}
