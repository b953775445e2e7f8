package agent

import (
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"withruntime.dev/runtime/sdk/go/wire"
)

func TestLanguageOf(t *testing.T) {
	for name, want := range map[string]string{
		"": "python", "Python": "python", "python3": "python", "js": "javascript", "JavaScript": "javascript",
		"ts": "typescript", "typescript": "typescript", "r": "r", "R": "r", "bash": "bash",
	} {
		l, err := languageOf(name)
		if err != nil || l.name != want {
			t.Errorf("languageOf(%q) = %v, %v; want %s", name, l, err, want)
		}
	}
	for _, name := range []string{"java", "cobol", "Java"} {
		_, err := languageOf(name)
		var ae *apiError
		if !errors.As(err, &ae) || ae.status != http.StatusBadRequest || !strings.Contains(ae.msg, `"`+name+`"`) {
			t.Errorf("languageOf(%q): %v, want a 400 naming it", name, err)
		}
	}
}

func TestDefaultContextIDs(t *testing.T) {
	for _, l := range languages {
		id := defaultContextID(l)
		got, ok := defaultContextLanguage(id)
		if !ok || got != l {
			t.Errorf("%s: default context %q maps back to %v", l.name, id, got)
		}
	}
	if defaultContextID(languages[wire.LanguagePython]) != "default" || defaultContextID(languages["bash"]) != "default-bash" {
		t.Error("python's default context is not \"default\", or bash's not \"default-bash\"")
	}
	for _, id := range []string{"default-java", "default-", "ctx_1", "default-python"} {
		if _, ok := defaultContextLanguage(id); ok {
			t.Errorf("%q taken for a default context", id)
		}
	}
}

// TestBashEnvCode runs the Bash kernel's env code in bash: set, seen by a
// child, restored (a variable that was unset is unset again), with values
// that try to break out of the quoting.
func TestBashEnvCode(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	env := map[string]string{"WR_A": "x'; echo pwned; '$(id)`id`\n\"\\", "WR_B": "new", "bad name": "skipped"}
	script := "export WR_B=old; " + bashSetEnv(env, true) + "\nprintenv WR_A; printenv WR_B; " +
		bashRestoreEnv(sortedKeys(env)) + "\necho \"[${WR_A-unset}] [$WR_B]\""
	out, err := exec.Command(bash, "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := env["WR_A"] + "\nnew\n[unset] [old]\n"
	if string(out) != want {
		t.Fatalf("got %q, want %q", out, want)
	}
}
