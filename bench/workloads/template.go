package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

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

// bareEnvs are the bench's bare runsc paths (see openRunners).
var bareEnvs = []string{"bare", "bare-rt", "bare-erofs", "bare-erofs-def"}

// ensureErofs makes an EROFS image of the template's root filesystem
// beside it (<template>/rootfs.erofs, read-only) unless one newer than its
// template.json is there, and returns its path: the root of the
// bare-erofs paths. Runtime's templates have none (measured: no gain on
// this host; bench/README.md, workloads).
func ensureErofs(ctx context.Context, rootfs string) (string, error) {
	dir := filepath.Dir(rootfs)
	image := filepath.Join(dir, "rootfs.erofs")
	info, err := os.Stat(filepath.Join(dir, "template.json"))
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(image); err == nil && st.ModTime().After(info.ModTime()) {
		return image, nil
	}
	mkfs, err := exec.LookPath("mkfs.erofs")
	if err != nil {
		return "", fmt.Errorf("the bare-erofs paths need mkfs.erofs (Debian's erofs-utils): %w", err)
	}
	start := time.Now()
	tmp := image + ".tmp"
	// What gVisor's EROFS reads (pinned runsc, pkg/erofs): no extended
	// attributes (-x -1), no data inlined in inodes (-E noinline_data:
	// without it binaries fail to load, "bad address"), no compression
	// (the default).
	cmd := exec.CommandContext(ctx, mkfs, "-x", "-1", "-E", "noinline_data", tmp, rootfs)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr // its stdout is a line per file
	if err := cmd.Run(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("mkfs.erofs: %w: %s", err, tailStr(stderr.String(), 1000))
	}
	if err := os.Chmod(tmp, 0o444); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, image); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "made %s in %.1fs\n", image, time.Since(start).Seconds())
	return image, nil
}
