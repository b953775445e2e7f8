package agent

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"withruntime.dev/runtime/sdk/go/wire"
)

func TestLanguageOf(t *testing.T) {
	for name, want := range map[string]string{
		"": "python", "Python": "python", "python3": "python", "js": "javascript", "JavaScript": "javascript",
		"ts": "typescript", "typescript": "typescript", "r": "r", "R": "r", "bash": "bash",
		"java": "java", "Java": "java",
	} {
		l, err := languageOf(name)
		if err != nil || l.name != want {
			t.Errorf("languageOf(%q) = %v, %v; want %s", name, l, err, want)
		}
	}
	for _, name := range []string{"cobol", "kotlin"} {
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
	for _, id := range []string{"default-kotlin", "default-", "ctx_1", "default-python"} {
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

// TestJavaEnvCode runs the Java kernel's env code in JShell (the JDK's
// jshell, local execution as in the kernel): set, seen by the cell,
// restored (a property that was unset is unset again), with values that
// try to break out of the literal, \u escapes among them.
func TestJavaEnvCode(t *testing.T) {
	jshell, err := exec.LookPath("jshell")
	if err != nil {
		t.Skip("no jshell")
	}
	env := map[string]string{"WR_A": "x\"); System.out.println(\"pwned\"); (\"\\u0022\\\\u0022\n\r\t\x00é", "WR_B": "new", "": "skipped"}
	script := "System.setProperty(\"WR_B\", \"old\");\n" + javaSetEnv(env, true) + "\n" +
		"System.out.println(\"OUT \" + System.getProperty(\"WR_A\").equals(" + javaString(env["WR_A"]) + ") + \" \" + System.getProperty(\"WR_A\").length());\n" +
		"System.out.println(\"OUT \" + System.getProperty(\"WR_B\"));\n" + javaRestoreEnv(sortedKeys(env)) + "\n" +
		"System.out.println(\"OUT [\" + System.getProperty(\"WR_A\", \"unset\") + \"] [\" + System.getProperty(\"WR_B\") + \"] \" + System.getProperties().containsKey(\"withruntime.env\"));\n/exit\n"
	f := filepath.Join(t.TempDir(), "env.jsh")
	if err := os.WriteFile(f, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(jshell, "-q", "--execution", "local", f).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var got strings.Builder
	for _, l := range strings.SplitAfter(string(out), "\n") {
		if strings.HasPrefix(l, "OUT ") {
			got.WriteString(l[4:])
		}
	}
	want := fmt.Sprintf("true %d\nnew\n[unset] [old] false\n", len([]rune(env["WR_A"])))
	if got.String() != want {
		t.Fatalf("got %q, want %q\nscript:\n%s", out, want, script)
	}
}
