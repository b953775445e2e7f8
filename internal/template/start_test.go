package template

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/errs"
)

// Start.Check: what a start may be, with a message for each refusal.
func TestStartCheck(t *testing.T) {
	for _, ok := range []*Start{nil, {}, {Command: "python3 -m http.server"}, {Kernel: true},
		{Command: "x", ReadyCommand: "y", ReadyTimeoutSeconds: 600}} {
		if err := ok.Check(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for st, want := range map[*Start]string{
		{Command: strings.Repeat("x", maxStartCommand+1)}: "over 16384 bytes",
		{ReadyCommand: "a\x00b"}:                          "NUL",
		{Command: "  "}:                                   "only blanks",
		{ReadyCommand: "x", ReadyTimeoutSeconds: 601}:     "between 1 and 600",
		{ReadyCommand: "x", ReadyTimeoutSeconds: -1}:      "between 1 and 600",
		{Command: "x", ReadyTimeoutSeconds: 5}:            "there is none",
	} {
		if err := st.Check(); !errors.Is(err, errs.Invalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want errs.Invalid saying %q", st, err, want)
		}
	}
	if n, err := (&Start{}).Normal(); n != nil || err != nil {
		t.Errorf("an empty start normalises to %+v, %v; want nil", n, err)
	}
	if d := (&Start{ReadyCommand: "x"}).ReadyTimeout(); d != DefaultReadyTimeout {
		t.Errorf("default ready timeout %v", d)
	}
}

// A recipe's template has its recipe's start (code-interpreter: its
// kernel), whatever its template.json says; a made template keeps its own.
func TestStartOfTemplates(t *testing.T) {
	dir := t.TempDir()
	s := &Store{Dir: dir}
	for _, name := range []string{"base", CodeInterpreter} {
		if err := os.MkdirAll(filepath.Join(dir, name, rootfsDir), 0o755); err != nil {
			t.Fatal(err)
		}
		// An old build's record claiming a start: the recipe's wins.
		if err := writeInfo(filepath.Join(dir, name, infoFile), Info{Name: name, Start: &Start{Command: "stale"}}); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := s.StartOf("base"); err != nil || st != nil {
		t.Errorf("base's start: %+v %v, want none", st, err)
	}
	if st, err := s.StartOf(CodeInterpreter); err != nil || st == nil || !st.Kernel || st.Command != "" {
		t.Errorf("code-interpreter's start: %+v %v, want the kernel", st, err)
	}
	fill := func(ctx context.Context, rootfs string, step func(string) func()) (*Origin, error) {
		return &Origin{Image: "test", Shell: "/bin/sh"}, nil
	}
	want := &Start{Command: "python3 -m http.server 8000", ReadyCommand: "curl -sf localhost:8000"}
	if _, err := s.Create(context.Background(), "web", fill, nil, WithStart(want)); err != nil {
		t.Fatal(err)
	}
	if st, err := s.StartOf("web"); err != nil || st == nil || *st != *want {
		t.Errorf("a made template's start: %+v %v", st, err)
	}
	if _, err := s.Create(context.Background(), "plain", fill, nil, WithStart(&Start{})); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.StartOf("plain"); st != nil {
		t.Errorf("an empty start was kept: %+v", st)
	}
}
