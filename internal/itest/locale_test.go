package itest

import (
	"testing"

	"withruntime.dev/runtime/internal/api"
)

// TestLocaleArchive: the sandboxes' locale, C.UTF-8 (their LANG), comes
// from the base template's locale archive, so a program that sets its
// locale (bash, python3) maps that one file where it opened each
// category's (34 opens by bash: an exec of bash -c true took 47-54 ms
// against 42-44, internal/template/recipe.go). Text stays UTF-8: a shell
// counts characters, not bytes, and Python writes UTF-8.
func TestLocaleArchive(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	res := e.sh(sb.ID, `echo "$LANG"
localedef --list-archive
grep -o '/usr/lib/locale/[^ ]*' /proc/$$/maps | sort -u
printf 'é\n' | wc -m
python3 -c 'import sys; print(sys.stdout.encoding, "é")'`)
	want := "C.UTF-8\nC.utf8\n/usr/lib/locale/locale-archive\n2\nutf-8 é\n"
	if res.ExitCode != 0 || res.Stdout != want {
		t.Fatalf("exit %d, stdout %q, want %q (stderr %q)", res.ExitCode, res.Stdout, want, res.Stderr)
	}
}
