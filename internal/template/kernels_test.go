package template

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFetchKernelsCaches fetches the kernels' files with stand-in pip, npm
// and mvn clients (on PATH, writing the names the real ones write) and checks
// that a second build fetches nothing, and that a client that writes no
// file fails the build with the file's name.
func TestFetchKernelsCaches(t *testing.T) {
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	// Each stand-in writes the file named in the command line's
	// package==version (pip), @scope/name@version (npm) or
	// -Dartifact=group:artifact:version:jar (mvn) into its last argument
	// (mvn: -DoutputDirectory=), as the real clients do, and logs the call.
	script := `#!/bin/sh
echo "$0 $*" >> ` + calls + `
f=
for a; do
	last=$a
	case "$a" in
	-DoutputDirectory=*) last=${a#-DoutputDirectory=};;
	-Dartifact=*) f=$(echo "${a#-Dartifact=}" | awk -F: '{print $2 "-" $3 ".jar"}');;
	esac
done
case "$*" in
*bash_kernel==*) f=` + kernelFiles[0].name + `;;
*filetype==*) f=` + kernelFiles[1].name + `;;
*@deno/*) f=` + kernelFiles[2].name + `;;
esac
[ -n "$BROKEN" ] && exit 0
echo data > "$last/$f"
`
	for _, n := range []string{"pip", "npm", "mvn"} {
		if err := os.WriteFile(filepath.Join(bin, n), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	env := &buildEnv{cache: t.TempDir(), log: io.Discard, step: func(string) func() { return func() {} }}
	dir, err := fetchKernels(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range kernelFiles {
		if b, err := os.ReadFile(filepath.Join(dir, f.name)); err != nil || string(b) != "data\n" {
			t.Errorf("%s: %q %v", f.name, b, err)
		}
	}
	log, _ := os.ReadFile(calls)
	if n := strings.Count(string(log), "\n"); n != len(kernelFiles) {
		t.Fatalf("%d fetches, want %d:\n%s", n, len(kernelFiles), log)
	}
	if _, err := fetchKernels(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	if log2, _ := os.ReadFile(calls); string(log2) != string(log) {
		t.Fatalf("a second build fetched again:\n%s", log2)
	}
	// No leftovers of the fetches' private directories.
	if m, _ := filepath.Glob(filepath.Join(dir, ".fetch-*")); len(m) > 0 {
		t.Fatalf("left behind: %v", m)
	}

	os.Remove(filepath.Join(dir, kernelFiles[2].name))
	t.Setenv("BROKEN", "1")
	_, err = fetchKernels(context.Background(), env)
	if err == nil || !strings.Contains(err.Error(), kernelFiles[2].name) {
		t.Fatalf("a client that wrote nothing: %v", err)
	}
}

// TestCodeInterpreterRecipeHasKernels: the recipe installs the kernels and
// its version changes with them.
func TestCodeInterpreterRecipeHasKernels(t *testing.T) {
	r := builtinRecipes[CodeInterpreter]
	for _, p := range kernelDebPackages {
		if !strings.Contains(strings.Join(r.packages, ","), p) {
			t.Errorf("package %s missing", p)
		}
	}
	for _, f := range kernelFiles {
		if !strings.Contains(r.hook, f.name) {
			t.Errorf("the hook does not install %s", f.name)
		}
	}
	if !strings.Contains(r.hook, javaKernelSource) || !strings.Contains(javaKernelSource, "class JShellKernel") {
		t.Error("the hook does not carry the Java kernel's source")
	}
	old := r.version()
	r.hook = strings.ReplaceAll(r.hook, denoVersion, "0.0.1")
	if r.version() == old {
		t.Error("another deno version is the same recipe version")
	}
	r = builtinRecipes[CodeInterpreter]
	r.hook = strings.ReplaceAll(r.hook, "evalRaw(", "evalRaw2(")
	if r.version() == old {
		t.Error("another Java kernel source is the same recipe version")
	}
}
