package main

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The tasks' inputs, each one tar archive (owned by the sandbox user,
// uid 1000) that goes into /workspace/in of a sandbox before its group of
// tasks runs, outside the timing. Those fetched from package registries
// (the wheelhouse, the npm cache, the Go module and the repository's
// sources come from the host's module cache) are made once and kept in
// the cache directory; the ones made from this checkout (the SDKs) are made
// anew for each run.

// input is one archive: its file name and how to make it.
type input struct {
	name   string // file name, in the cache's inputs directory and in /workspace/in
	cached bool   // made once and kept (false: made from the checkout each run)
	make   func(ctx context.Context, dst, scratch string) error
}

// The generated tree: treeFiles files in treeDirs directories.
const (
	treeFiles = 10_000
	treeDirs  = 100
)

var inputs = map[string]input{
	"tree.tar":     {"tree.tar", true, makeTree},
	"repo.tar":     {"repo.tar", true, makeRepo},
	"wheels.tar":   {"wheels.tar", true, makeWheels},
	"npm.tar":      {"npm.tar", true, makeNPM},
	"gomod.tar":    {"gomod.tar", true, makeGoMod},
	"sdk-py.tar":   {"sdk-py.tar", false, makeSDKPython},
	"sdk-ts.tar":   {"sdk-ts.tar", false, makeSDKTypeScript},
	"benchunit.py": {"benchunit.py", false, makeBenchUnit},
}

// prepareInputs makes the inputs named (those cached only when missing) and
// returns their host paths by name.
func prepareInputs(ctx context.Context, cacheDir, runDir string, names []string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range names {
		in, ok := inputs[n]
		if !ok {
			return nil, fmt.Errorf("no input %q", n)
		}
		dir := runDir
		if in.cached {
			dir = filepath.Join(cacheDir, "inputs")
		}
		dst := filepath.Join(dir, in.name)
		out[n] = dst
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		scratch, err := os.MkdirTemp(dir, ".make-")
		if err != nil {
			return nil, err
		}
		start := time.Now()
		fmt.Fprintf(os.Stderr, "making input %s ...\n", dst)
		err = in.make(ctx, dst+".tmp", scratch)
		os.RemoveAll(scratch)
		if err == nil {
			err = os.Rename(dst+".tmp", dst)
		}
		if err != nil {
			os.Remove(dst + ".tmp")
			return nil, fmt.Errorf("making input %s: %w", in.name, err)
		}
		fmt.Fprintf(os.Stderr, "  %s made in %.1fs\n", in.name, time.Since(start).Seconds())
	}
	return out, nil
}

// makeTree writes a tar of treeFiles files in treeDirs directories (tree/dNN/fNNNN.txt),
// sizes spread from 64 B to 32 KiB (about 5 KiB on average, as in a source
// tree), pseudo-random text from a fixed seed.
func makeTree(_ context.Context, dst, _ string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	rng := rand.New(rand.NewSource(31))
	words := strings.Fields("func return package import the a of to in is for on with that this sandbox file tree value error nil int string struct")
	mtime := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hdr := func(name string, mode int64, size int64, typ byte) *tar.Header {
		return &tar.Header{Name: name, Mode: mode, Size: size, Typeflag: typ, Uid: 1000, Gid: 1000, ModTime: mtime, Format: tar.FormatPAX}
	}
	if err := tw.WriteHeader(hdr("tree/", 0o755, 0, tar.TypeDir)); err != nil {
		return err
	}
	for d := 0; d < treeDirs; d++ {
		dir := fmt.Sprintf("tree/d%02d/", d)
		if err := tw.WriteHeader(hdr(dir, 0o755, 0, tar.TypeDir)); err != nil {
			return err
		}
		for i := 0; i < treeFiles/treeDirs; i++ {
			// log-uniform between 64 B and 32 KiB
			size := int(64 * math.Exp2(rng.Float64()*9))
			var b strings.Builder
			for b.Len() < size {
				b.WriteString(words[rng.Intn(len(words))])
				if rng.Intn(12) == 0 {
					b.WriteByte('\n')
				} else {
					b.WriteByte(' ')
				}
			}
			body := b.String()[:size]
			if err := tw.WriteHeader(hdr(fmt.Sprintf("%sf%04d.txt", dir, i), 0o644, int64(size), tar.TypeReg)); err != nil {
				return err
			}
			if _, err := io.WriteString(tw, body); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// repoSources are the trees the git repository is made of: two Go modules
// from the host's module cache (real source files, about 2,200 of them);
// the branch "old" has an older x/sys than "main", so checking it out
// rewrites the files a version bump changed.
var repoSources = struct{ tools, sysOld, sysNew string }{
	"golang.org/x/tools@v0.52.0", "golang.org/x/sys@v0.43.0", "golang.org/x/sys@v0.50.0",
}

// makeRepo builds a bare repository (repo.git: branch main, and old, one
// commit each) from the module cache's sources and archives it.
func makeRepo(ctx context.Context, dst, scratch string) error {
	modcache, err := goEnv(ctx, "GOMODCACHE")
	if err != nil {
		return err
	}
	work := filepath.Join(scratch, "work")
	git := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "user.name=bench", "-c", "user.email=bench@localhost",
			"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	if err := git("init", "-q"); err != nil {
		return err
	}
	for i, sys := range []string{repoSources.sysOld, repoSources.sysNew} {
		os.RemoveAll(filepath.Join(work, "x"))
		for _, mod := range []string{repoSources.tools, sys} {
			src := filepath.Join(modcache, mod)
			if _, err := os.Stat(src); err != nil {
				return fmt.Errorf("module %s not in the module cache (%s): %w", mod, modcache, err)
			}
			name := strings.SplitN(filepath.Base(mod), "@", 2)[0]
			if err := copyTree(src, filepath.Join(work, "x", name)); err != nil {
				return err
			}
		}
		if err := git("add", "-A"); err != nil {
			return err
		}
		if err := git("commit", "-q", "-m", "sources "+sys); err != nil {
			return err
		}
		if i == 0 {
			if err := git("branch", "old"); err != nil {
				return err
			}
		}
	}
	bare := filepath.Join(scratch, "repo.git")
	if out, err := exec.CommandContext(ctx, "git", "clone", "-q", "--bare", work, bare).CombinedOutput(); err != nil {
		return fmt.Errorf("git clone --bare: %w: %s", err, out)
	}
	return tarDir(dst, scratch, "repo.git")
}

// wheelRoots are the packages the wheelhouse is resolved from with their
// dependencies: what the Python SDK's unit tests need (httpx, pytest,
// unasync, setuptools, pyyaml), then widely used pure-Python packages, for
// about 50 wheels in all.
var wheelRoots = []string{
	"httpx", "pytest", "unasync", "setuptools", "pyyaml",
	"requests", "rich", "ipython", "pylint", "flake8", "beautifulsoup4", "html5lib",
	"tabulate", "python-dateutil", "pytz", "tqdm", "click", "virtualenv", "sortedcontainers", "docutils",
}

// makeWheels downloads the wheelhouse once with the host's pip (its own
// configuration names the index) and archives it as wheels/.
func makeWheels(ctx context.Context, dst, scratch string) error {
	dir := filepath.Join(scratch, "wheels")
	args := append([]string{"-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", "3.11", "-d", dir}, wheelRoots...)
	cmd := exec.CommandContext(ctx, "python3", args...)
	cmd.Env = append(os.Environ(), "PIP_FIND_LINKS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pip download: %w: %s", err, out)
	}
	return tarDir(dst, scratch, "wheels")
}

// npmBigPackage is the second npm project: a lock file resolved once from
// the registry for a test runner, a linter and a formatter (several hundred
// packages), kept with the cache.
const npmBigPackage = `{
  "name": "bench-big",
  "version": "1.0.0",
  "private": true,
  "devDependencies": {
    "eslint": "8.57.1",
    "jest": "29.7.0",
    "prettier": "3.3.3"
  }
}
`

// makeNPM resolves the big project's lock file and fills one npm cache with
// every package of it and of the TypeScript SDK's lock file, with the
// host's npm (its configuration names the registry); it archives
// npm-cache/ and big/ (package.json, package-lock.json).
func makeNPM(ctx context.Context, dst, scratch string) error {
	cache := filepath.Join(scratch, "npm-cache")
	big := filepath.Join(scratch, "big")
	sdk := filepath.Join(scratch, "sdk")
	for _, d := range []string{big, sdk} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(big, "package.json"), []byte(npmBigPackage), 0o644); err != nil {
		return err
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		if err := copyFile(filepath.Join("sdk", "typescript", f), filepath.Join(sdk, f)); err != nil {
			return err
		}
	}
	npm := func(dir string, args ...string) error {
		cmd := exec.CommandContext(ctx, "npm", append(args, "--cache", cache, "--no-audit", "--no-fund", "--ignore-scripts")...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("npm %s in %s: %w: %s", strings.Join(args, " "), dir, err, out)
		}
		return nil
	}
	if err := npm(big, "install", "--package-lock-only"); err != nil {
		return err
	}
	for _, d := range []string{big, sdk} {
		if err := npm(d, "ci"); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(filepath.Join(big, "node_modules")); err != nil {
		return err
	}
	return tarDir(dst, scratch, "npm-cache", "big")
}

// goModule is the Go build's module: a YAML library of about a hundred
// files and no dependencies, from the host's module cache (it needs Go 1.18,
// and the template's Debian Go is 1.19).
const goModule = "go.yaml.in/yaml/v4@v4.0.0"

func makeGoMod(ctx context.Context, dst, scratch string) error {
	modcache, err := goEnv(ctx, "GOMODCACHE")
	if err != nil {
		return err
	}
	src := filepath.Join(modcache, goModule)
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("module %s not in the module cache (%s): %w", goModule, modcache, err)
	}
	if err := copyTree(src, filepath.Join(scratch, "gomod")); err != nil {
		return err
	}
	return tarDir(dst, scratch, "gomod")
}

// makeSDKPython archives what the Python SDK's tests read: sdk/python and
// the files of the repository they compare against (the API contract and
// the Go goldens), at the same paths (repo/...).
func makeSDKPython(_ context.Context, dst, scratch string) error {
	for _, p := range []string{"sdk/python", "api/openapi.yaml", "sdk/go/tools/testdata", "sdk/go/testdata"} {
		if err := copyTree(p, filepath.Join(scratch, "repo", p)); err != nil {
			return err
		}
	}
	return tarDir(dst, scratch, "repo")
}

// makeSDKTypeScript archives sdk/typescript without what a build leaves.
func makeSDKTypeScript(_ context.Context, dst, scratch string) error {
	if err := copyTree("sdk/typescript", filepath.Join(scratch, "repo", "sdk", "typescript")); err != nil {
		return err
	}
	for _, d := range []string{"node_modules", "dist", "build-test"} {
		os.RemoveAll(filepath.Join(scratch, "repo", "sdk", "typescript", d))
	}
	return tarDir(dst, scratch, "repo")
}

// benchUnitPlugin is a pytest plugin that keeps the Python SDK's unit tests:
// it deselects every test that needs a Runtime server (whose fixtures
// reach the `server` fixture, which starts `withruntime serve`).
const benchUnitPlugin = `import pytest


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        (drop if "server" in getattr(item, "fixturenames", ()) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
`

func makeBenchUnit(_ context.Context, dst, _ string) error {
	return os.WriteFile(dst, []byte(benchUnitPlugin), 0o644)
}

func goEnv(ctx context.Context, key string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", key).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", key, err)
	}
	v := strings.TrimSpace(string(out))
	if v == "" {
		return "", fmt.Errorf("go env %s is empty", key)
	}
	return v, nil
}

// copyTree copies regular files, directories and symlinks from src to dst,
// files writable by their owner (the module cache's are read-only).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if d.Name() == "node_modules" || d.Name() == "__pycache__" || d.Name() == ".pytest_cache" {
				return filepath.SkipDir
			}
			return os.MkdirAll(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(t, to)
		case d.Type().IsRegular():
			return copyFile(p, to)
		}
		return nil
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, st.Mode().Perm()|0o200)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// tarDir archives the entries names of dir (with their paths from dir),
// every file owned by the sandbox user.
func tarDir(dst, dir string, names ...string) error {
	args := []string{"-C", dir, "--owner=1000", "--group=1000", "--numeric-owner", "-cf", dst}
	out, err := exec.Command("tar", append(args, names...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("tar: %w: %s", err, out)
	}
	return nil
}

// manifest records what the cached inputs hold, written beside them.
func writeManifest(cacheDir string) error {
	m := map[string]any{"repo": repoSources, "wheelRoots": wheelRoots, "npmBig": json.RawMessage(npmBigPackage),
		"goModule": goModule, "treeFiles": treeFiles}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cacheDir, "inputs", "manifest.json"), b, 0o644)
}
