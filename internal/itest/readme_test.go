package itest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeBlock is a shell block of README.md marked to be run by
// TestREADMESnippets: the line `<!-- readme-test: NAME -->` just before it.
var readmeBlock = regexp.MustCompile("(?s)<!-- readme-test: ([a-z0-9-]+) -->\n```sh\n(.*?)\n```")

// TestREADMESnippets runs README's SDK install recipes exactly as written,
// each in a new directory outside the clone, against a real server: each
// must print 42. A recipe that stops working for a new user fails here.
func TestREADMESnippets(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	for _, m := range readmeBlock.FindAllStringSubmatch(string(readme), -1) {
		blocks[m[1]] = m[2]
	}
	for _, want := range []string{"go", "python", "typescript"} {
		if blocks[want] == "" {
			t.Fatalf("README.md has no block marked readme-test: %s (found %d)", want, len(blocks))
		}
	}
	e := newEnv(t)
	t.Cleanup(func() { // what the TypeScript recipe leaves in the clone
		tgz, _ := filepath.Glob(filepath.Join(root, "sdk/typescript/withruntime-*.tgz"))
		for _, f := range tgz {
			os.Remove(f)
		}
	})
	for name, script := range blocks {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "RUNTIME="+root, "WITHRUNTIME_URL="+e.http.URL, "WITHRUNTIME_API_KEY="+e.key)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			t0 := time.Now()
			out, err := cmd.Output()
			t.Logf("%s: %v", name, time.Since(t0).Round(time.Second))
			if err != nil || string(out) != "42\n" {
				t.Fatalf("README's %s recipe: %v, stdout %q\nstderr:\n%s", name, err, out, tail(stderr.String(), 4000))
			}
		})
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
