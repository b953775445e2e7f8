package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"withruntime.dev/runtime/internal/template"
)

// templateName is the bench's template: the base template plus Debian's Go
// toolchain (base already has git, nodejs, npm, python3-venv and pip), so
// that every task's tool is inside the sandbox's root. Runtime and bare
// runsc boot it, and the host path runs its binaries (see hostRunner).
const templateName = "bench-workloads"

// templatePackages are the Debian packages the bench's template adds to base.
var templatePackages = []string{"golang", "make"}

// ensureTemplate builds the bench's template in cacheDir/templates unless it
// is there and current (a few minutes the first time: mmdebstrap from the
// host's apt sources), and returns its store and root filesystem.
func ensureTemplate(ctx context.Context, cacheDir string) (*template.Store, string, error) {
	dir := filepath.Join(cacheDir, "templates")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	st, err := (&template.Store{Dir: dir}).WithPackages(templateName, templatePackages...)
	if err != nil {
		return nil, "", err
	}
	if _, err := st.Get(templateName); err != nil {
		fmt.Fprintf(os.Stderr, "building template %s (base + %v) in %s ...\n", templateName, templatePackages, dir)
	}
	if _, err := st.Ensure(ctx, templateName, func(p template.Progress) {
		if !p.Done {
			fmt.Fprintf(os.Stderr, "  [%5.1fs] %s\n", p.Elapsed.Seconds(), p.Step)
		}
	}); err != nil {
		return nil, "", err
	}
	root, err := st.RootFS(templateName)
	return st, root, err
}
