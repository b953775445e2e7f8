package template

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fakeRecipe returns a recipe that writes a tiny rootfs containing marker
// and counts its runs.
func fakeRecipe(runs *atomic.Int32, marker string, delay time.Duration) recipe {
	return recipe{
		suite:    "fake",
		packages: []string{"a", "b"},
		run: func(ctx context.Context, env *buildEnv) error {
			runs.Add(1)
			done := env.step("writing files")
			if err := os.MkdirAll(filepath.Join(env.rootfs, "etc"), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(env.rootfs, "etc", "marker"), []byte(marker), 0o644); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(delay):
			}
			done()
			return nil
		},
	}
}

func fakeStore(t *testing.T, recipes map[string]recipe) *Store {
	t.Helper()
	return &Store{Dir: filepath.Join(t.TempDir(), "templates"), recipes: recipes}
}

// writeTemplate lays out a template by hand.
func writeTemplate(t *testing.T, dir, name string, info *Info) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name, "rootfs", "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if info == nil {
		return
	}
	b, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name, "template.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// dotEntries lists the hidden entries of dir except lock files and logs.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") && !strings.HasSuffix(n, ".lock") && !strings.HasSuffix(n, ".log") {
			out = append(out, n)
		}
	}
	return out
}

func readMarker(t *testing.T, s *Store, name string) string {
	t.Helper()
	root, err := s.RootFS(name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "etc", "marker"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestValidName(t *testing.T) {
	for _, n := range []string{"base", "a", "0", "python-3.12", "my_tpl", "a.b-c_d", strings.Repeat("a", 63)} {
		if err := ValidName(n); err != nil {
			t.Errorf("ValidName(%q) = %v, want nil", n, err)
		}
	}
	for _, n := range []string{"", ".", "..", ".hidden", "-a", "_a", "Base", "a/b", "a b", "a\x00", strings.Repeat("a", 64), "ä", "../etc"} {
		if err := ValidName(n); err == nil {
			t.Errorf("ValidName(%q) = nil, want an error", n)
		}
	}
}

func TestGetAndList(t *testing.T) {
	dir := t.TempDir()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	writeTemplate(t, dir, "zeta", &Info{Name: "zeta", CreatedAt: created, SizeBytes: 42, Packages: []string{"p"}, Suite: "bookworm"})
	writeTemplate(t, dir, "alpha", &Info{Name: "renamed-since", CreatedAt: created, Suite: "bookworm"})
	writeTemplate(t, dir, "incomplete", nil) // rootfs but no template.json
	if err := os.MkdirAll(filepath.Join(dir, "norootfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "norootfs", "template.json"), []byte(`{"name":"norootfs"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	writeTemplate(t, dir, "corrupt", nil)
	if err := os.WriteFile(filepath.Join(dir, "corrupt", "template.json"), []byte(`{`), 0o644); err != nil {
		t.Fatal(err)
	}
	writeTemplate(t, dir, ".build-alpha-0123456789abcdef", &Info{Name: "alpha"})
	writeTemplate(t, dir, "Invalid", &Info{Name: "Invalid"})
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	t.Chdir(dir)
	s := &Store{Dir: "."}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range list {
		names = append(names, i.Name)
	}
	if !slices.Equal(names, []string{"alpha", "zeta"}) {
		t.Fatalf("List names = %v, want [alpha zeta]", names)
	}
	got, err := s.Get("zeta")
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.Equal(created) || got.SizeBytes != 42 || got.Suite != "bookworm" || !slices.Equal(got.Packages, []string{"p"}) {
		t.Errorf("Get(zeta) = %+v", got)
	}
	if got, _ := s.Get("alpha"); got.Name != "alpha" {
		t.Errorf("Get(alpha).Name = %q, want the directory name", got.Name)
	}
	for _, n := range []string{"missing", "incomplete", "norootfs", "corrupt"} {
		if _, err := s.Get(n); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", n, err)
		}
	}
	if _, err := s.Get("../x"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Get(../x) = %v, want a name error", err)
	}

	root, err := s.RootFS("zeta")
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(root) || root != filepath.Join(dir, "zeta", "rootfs") {
		t.Errorf("RootFS = %q, want %q", root, filepath.Join(dir, "zeta", "rootfs"))
	}
	if _, err := s.RootFS("incomplete"); !errors.Is(err, ErrNotFound) {
		t.Errorf("RootFS(incomplete) = %v, want ErrNotFound", err)
	}

	empty := &Store{Dir: filepath.Join(dir, "does-not-exist")}
	if l, err := empty.List(); err != nil || len(l) != 0 || l == nil {
		t.Errorf("List on a missing dir = %v, %v; want an empty list", l, err)
	}
}

func TestNotFoundWording(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	_, err := s.Get("base")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	msg := err.Error()
	for _, want := range []string{"template not found", `"base"`, "run `withruntime template build base`"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
}

func TestUnknownRecipe(t *testing.T) {
	s := &Store{Dir: filepath.Join(t.TempDir(), "t")}
	for _, f := range []func(context.Context, string, func(Progress)) (Info, error){s.Build, s.Ensure} {
		_, err := f(context.Background(), "nope", nil)
		if !errors.Is(err, ErrUnknownRecipe) {
			t.Fatalf("err = %v, want ErrUnknownRecipe", err)
		}
		if !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "base") {
			t.Errorf("error %q should name the template and the known recipes", err)
		}
	}
	if _, err := os.Stat(s.Dir); err == nil {
		t.Errorf("an unknown recipe should not create the store directory")
	}
	if _, err := s.Build(context.Background(), "Bad/Name", nil); err == nil || errors.Is(err, ErrUnknownRecipe) {
		t.Errorf("Build(Bad/Name) = %v, want a name error", err)
	}
}

func TestBuildAndReplace(t *testing.T) {
	var runs atomic.Int32
	recipes := map[string]recipe{"fake": fakeRecipe(&runs, "v1", 0)}
	s := fakeStore(t, recipes)

	var events []Progress
	info, err := s.Build(context.Background(), "fake", func(p Progress) { events = append(events, p) })
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "fake" || info.Suite != "fake" || !slices.Equal(info.Packages, []string{"a", "b"}) || info.SizeBytes <= 0 || time.Since(info.CreatedAt) > time.Minute {
		t.Errorf("Info = %+v", info)
	}
	got, err := s.Get("fake")
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.Equal(info.CreatedAt) || got.SizeBytes != info.SizeBytes {
		t.Errorf("Get = %+v, Build returned %+v", got, info)
	}
	if m := readMarker(t, s, "fake"); m != "v1" {
		t.Errorf("marker = %q", m)
	}

	// Every step begins and then ends, in order, with non-decreasing Elapsed.
	var steps []string
	open := map[string]bool{}
	var last time.Duration
	for _, e := range events {
		if e.Elapsed < last {
			t.Errorf("Elapsed went backwards at %+v", e)
		}
		last = e.Elapsed
		if e.Done {
			if !open[e.Step] {
				t.Errorf("step %q done without beginning", e.Step)
			}
			delete(open, e.Step)
			steps = append(steps, e.Step)
		} else {
			open[e.Step] = true
		}
	}
	if len(open) != 0 {
		t.Errorf("steps never done: %v", open)
	}
	if !slices.Equal(steps, []string{"writing files", "finalizing"}) {
		t.Errorf("steps = %v", steps)
	}

	// Build again: the template is replaced, the old one removed.
	oldRoot, _ := s.RootFS("fake")
	if err := os.WriteFile(filepath.Join(oldRoot, "old-only"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	recipes["fake"] = fakeRecipe(&runs, "v2", 0)
	info2, err := s.Build(context.Background(), "fake", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := readMarker(t, s, "fake"); m != "v2" {
		t.Errorf("after rebuild marker = %q, want v2", m)
	}
	if _, err := os.Stat(filepath.Join(oldRoot, "old-only")); !os.IsNotExist(err) {
		t.Errorf("the old rootfs survived the rebuild: %v", err)
	}
	if info2.CreatedAt.Before(info.CreatedAt) {
		t.Errorf("CreatedAt went backwards")
	}
	if l := leftovers(t, s.Dir); len(l) != 0 {
		t.Errorf("leftovers after builds: %v", l)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, ".build-fake.log")); err != nil {
		t.Errorf("no build log: %v", err)
	}

	// Ensure does not rebuild an existing template.
	if _, err := s.Ensure(context.Background(), "fake", nil); err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("recipe ran %d times, want 2", n)
	}
}

func TestInstallFallbackReplaces(t *testing.T) {
	// install's non-exchange path, used on filesystems without
	// RENAME_EXCHANGE, exercised through a direct call.
	dir := t.TempDir()
	writeTemplate(t, dir, "x", &Info{Name: "x"})
	tmp := filepath.Join(dir, ".build-x-0123456789abcdef")
	writeTemplate(t, dir, ".build-x-0123456789abcdef", &Info{Name: "x", Suite: "new"})
	if err := install(dir, "x", tmp); err != nil {
		t.Fatal(err)
	}
	s := &Store{Dir: dir}
	if info, err := s.Get("x"); err != nil || info.Suite != "new" {
		t.Fatalf("Get = %+v, %v; want the new template", info, err)
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("leftovers: %v", l)
	}
}

func TestFailedBuildLeavesOldTemplate(t *testing.T) {
	var runs atomic.Int32
	recipes := map[string]recipe{"fake": fakeRecipe(&runs, "good", 0)}
	s := fakeStore(t, recipes)
	if _, err := s.Build(context.Background(), "fake", nil); err != nil {
		t.Fatal(err)
	}
	recipes["fake"] = recipe{suite: "fake", run: func(ctx context.Context, env *buildEnv) error {
		if err := os.MkdirAll(filepath.Join(env.rootfs, "etc"), 0o755); err != nil {
			return err
		}
		os.WriteFile(filepath.Join(env.rootfs, "etc", "marker"), []byte("half"), 0o644)
		return errors.New("boom")
	}}
	_, err := s.Build(context.Background(), "fake", nil)
	if err == nil || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), `"fake"`) {
		t.Fatalf("err = %v, want the recipe's error", err)
	}
	if m := readMarker(t, s, "fake"); m != "good" {
		t.Errorf("marker = %q: a failed build touched the existing template", m)
	}
	if l := leftovers(t, s.Dir); len(l) != 0 {
		t.Errorf("leftovers after a failed build: %v", l)
	}

	// Without an existing template, a failure leaves none.
	_, err = s.Build(context.Background(), "other", nil)
	if !errors.Is(err, ErrUnknownRecipe) {
		t.Fatal(err)
	}
	recipes["other"] = recipes["fake"]
	if _, err := s.Ensure(context.Background(), "other", nil); err == nil {
		t.Fatal("want an error")
	}
	if _, err := s.Get("other"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after failed build = %v, want ErrNotFound", err)
	}
	if l := leftovers(t, s.Dir); len(l) != 0 {
		t.Errorf("leftovers after a failed build: %v", l)
	}
}

func TestCancelledBuildLeavesNothing(t *testing.T) {
	var runs atomic.Int32
	s := fakeStore(t, map[string]recipe{"fake": fakeRecipe(&runs, "x", time.Hour)})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Ensure(ctx, "fake", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("cancellation took %v", time.Since(start))
	}
	if _, err := s.Get("fake"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get = %v, want ErrNotFound", err)
	}
	if l := leftovers(t, s.Dir); len(l) != 0 {
		t.Errorf("leftovers after a cancelled build: %v", l)
	}
}

func TestStaleBuildsRemoved(t *testing.T) {
	var runs atomic.Int32
	s := fakeStore(t, map[string]recipe{"fake": fakeRecipe(&runs, "x", 0)})
	stale := []string{".build-fake-0123456789abcdef", ".old-fake-fedcba9876543210"}
	keep := []string{".build-fake-x-0123456789abcdef", ".build-fake-notmine", ".old-fake-b-fedcba9876543210"}
	for _, n := range append(slices.Clone(stale), keep...) {
		writeTemplate(t, s.Dir, n, &Info{})
	}
	if _, err := s.Build(context.Background(), "fake", nil); err != nil {
		t.Fatal(err)
	}
	l := leftovers(t, s.Dir)
	slices.Sort(l)
	want := slices.Clone(keep)
	slices.Sort(want)
	if !slices.Equal(l, want) {
		t.Errorf("left %v, want %v", l, want)
	}
}

func TestConcurrentEnsure(t *testing.T) {
	var runs atomic.Int32
	s := fakeStore(t, map[string]recipe{"fake": fakeRecipe(&runs, "x", 300*time.Millisecond)})
	const n = 8
	infos := make([]Info, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// Each caller its own Store value, as separate processes would be.
			st := &Store{Dir: s.Dir, recipes: s.recipes}
			infos[i], errs[i] = st.Ensure(context.Background(), "fake", nil)
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Ensure %d: %v", i, errs[i])
		}
		if !infos[i].CreatedAt.Equal(infos[0].CreatedAt) {
			t.Errorf("Ensure %d returned a different build: %+v vs %+v", i, infos[i], infos[0])
		}
	}
	if got := runs.Load(); got != 1 {
		t.Errorf("recipe ran %d times, want 1", got)
	}
}

func TestLockWaitHonoursContext(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	s := fakeStore(t, map[string]recipe{"fake": {suite: "fake", run: func(ctx context.Context, env *buildEnv) error {
		close(started)
		<-release
		return os.MkdirAll(env.rootfs, 0o755)
	}}})
	errc := make(chan error, 1)
	go func() {
		_, err := s.Build(context.Background(), "fake", nil)
		errc <- err
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var waited bool
	_, err := s.Ensure(ctx, "fake", func(p Progress) {
		if strings.HasPrefix(p.Step, "waiting for another build") {
			waited = true
		}
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Ensure while locked = %v, want DeadlineExceeded", err)
	}
	if !waited {
		t.Errorf("no waiting progress reported")
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentEnsureProcesses runs Ensure in several processes at once
// (re-executing this test binary) and checks that exactly one builds.
func TestConcurrentEnsureProcesses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "templates")
	count := filepath.Join(t.TempDir(), "builds")
	const n = 4
	cmds := make([]*exec.Cmd, n)
	outs := make([]strings.Builder, n)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperEnsureProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TEMPLATE_HELPER_DIR="+dir, "TEMPLATE_HELPER_COUNT="+count)
		cmd.Stdout = &outs[i]
		cmd.Stderr = &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper %d: %v\n%s", i, err, outs[i].String())
		}
	}
	b, err := os.ReadFile(count)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(b), "\n"); got != 1 {
		t.Errorf("%d builds ran, want 1:\n%s", got, b)
	}
}

func TestHelperEnsureProcess(t *testing.T) {
	dir := os.Getenv("TEMPLATE_HELPER_DIR")
	if dir == "" {
		t.Skip("helper for TestConcurrentEnsureProcesses")
	}
	count := os.Getenv("TEMPLATE_HELPER_COUNT")
	s := &Store{Dir: dir, recipes: map[string]recipe{"fake": {suite: "fake", run: func(ctx context.Context, env *buildEnv) error {
		f, err := os.OpenFile(count, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintf(f, "%d\n", os.Getpid())
		f.Close()
		time.Sleep(500 * time.Millisecond)
		return os.MkdirAll(env.rootfs, 0o755)
	}}}}
	if _, err := s.Ensure(context.Background(), "fake", nil); err != nil {
		t.Fatal(err)
	}
}

func TestOutputParser(t *testing.T) {
	var events []string
	env := &buildEnv{log: &strings.Builder{}, step: func(name string) func() {
		events = append(events, "begin "+name)
		return func() { events = append(events, "done "+name) }
	}}
	o := &outputParser{env: env}
	out := "I: automatically chosen mode: root\n" +
		"I: downloading packages with apt...\n" +
		"some apt chatter\r\n" +
		"I: running --customize-hook in shell: sh -c 'set -eu\n" +
		"echo '" + stepMarker + stepConfigure + "'\n" +
		"'\n" +
		stepMarker + stepConfigure + "\n" +
		stepMarker + "done\n" +
		"I: cleaning package lists and apt cache...\n" +
		"I: success in 70.1 seconds"
	// Feed it in awkward pieces.
	for i := 0; i < len(out); i += 7 {
		o.Write([]byte(out[i:min(i+7, len(out))]))
	}
	o.flush()
	o.endSub()
	want := []string{
		"begin mmdebstrap: automatically chosen mode: root",
		"done mmdebstrap: automatically chosen mode: root",
		"begin mmdebstrap: downloading packages with apt",
		"done mmdebstrap: downloading packages with apt",
		"begin configuring user and workspace",
		"done configuring user and workspace",
		"begin mmdebstrap: cleaning package lists and apt cache",
		"done mmdebstrap: cleaning package lists and apt cache",
	}
	if !slices.Equal(events, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
	}
	if got := env.log.(*strings.Builder).String(); got != out {
		t.Errorf("log does not hold the full output")
	}
	if tail := o.tail(); !strings.HasSuffix(tail, "I: success in 70.1 seconds") || !strings.Contains(tail, "some apt chatter") {
		t.Errorf("tail = %q", tail)
	}
}

func TestMmdebstrapMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	s := &Store{Dir: filepath.Join(t.TempDir(), "templates")}
	_, err := s.Ensure(context.Background(), "base", nil)
	if err == nil || !strings.Contains(err.Error(), "apt-get install mmdebstrap") {
		t.Fatalf("err = %v, want a hint to install mmdebstrap", err)
	}
	if l := leftovers(t, s.Dir); len(l) != 0 {
		t.Errorf("leftovers: %v", l)
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	if got := unescapeMountinfo(`/a\040b\011c\134d`); got != "/a b\tc\\d" {
		t.Errorf("got %q", got)
	}
	if got := unescapeMountinfo(`/x\04`); got != `/x\04` {
		t.Errorf("got %q", got)
	}
}

// TestBuildBase builds the real base template with mmdebstrap (about a
// minute and a half and ~400 MB). It runs only with
// WITHRUNTIME_TEST_TEMPLATE_BUILD=1, as root.
func TestBuildBase(t *testing.T) {
	if os.Getenv("WITHRUNTIME_TEST_TEMPLATE_BUILD") != "1" {
		t.Skip("set WITHRUNTIME_TEST_TEMPLATE_BUILD=1 to build the base template with mmdebstrap")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	dir := filepath.Join(t.TempDir(), "templates")
	s := &Store{Dir: dir}

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// Cancel once mmdebstrap is well under way (installing packages
		// into the chroot, with /proc etc. mounted).
		_, err := s.Build(ctx, "base", func(p Progress) {
			if !p.Done && strings.Contains(p.Step, "installing") && strings.HasPrefix(p.Step, subStepPrefix) {
				go func() { time.Sleep(2 * time.Second); cancel() }()
			}
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want Canceled", err)
		}
		if l := leftovers(t, dir); len(l) != 0 {
			t.Errorf("leftovers: %v", l)
		}
		if m, _ := mountsUnder(dir); len(m) != 0 {
			t.Errorf("mounts left: %v", m)
		}
	})

	var events []Progress
	start := time.Now()
	info, err := s.Ensure(context.Background(), "base", func(p Progress) {
		events = append(events, p)
		t.Logf("%6.1fs %-5v %s", p.Elapsed.Seconds(), p.Done, p.Step)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built in %v: %+v", time.Since(start), info)
	if info.Suite != "bookworm" || info.SizeBytes < 100<<20 || !slices.Contains(info.Packages, "python3") {
		t.Errorf("Info = %+v", info)
	}
	var steps []string
	for _, e := range events {
		if e.Done {
			steps = append(steps, e.Step)
		}
	}
	for _, want := range []string{"checking prerequisites", mmdebstrapStep, stepConfigure, cleanupStep, mountPointsStep, "finalizing"} {
		if !slices.Contains(steps, want) {
			t.Errorf("step %q not reported done; done steps: %v", want, steps)
		}
	}

	root, err := s.RootFS("base")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"usr/bin/python3", "usr/bin/node", "usr/bin/git", "usr/bin/curl", "usr/bin/ps", "usr/bin/ip", "usr/share/zoneinfo/UTC", "etc/ssl/certs/ca-certificates.crt", "bin/bash"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("missing %s: %v", p, err)
		}
	}
	passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if !strings.Contains(string(passwd), "user:x:1000:1000::/home/user:/bin/bash") {
		t.Errorf("no user 1000 in /etc/passwd:\n%s", passwd)
	}
	owned := func(p string, uid uint32, mode os.FileMode) {
		t.Helper()
		st, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Error(err)
			return
		}
		sys := st.Sys().(*syscall.Stat_t)
		if !st.IsDir() || sys.Uid != uid || sys.Gid != uid || (mode != 0 && st.Mode().Perm() != mode) {
			t.Errorf("%s: dir=%v uid=%d gid=%d mode=%v", p, st.IsDir(), sys.Uid, sys.Gid, st.Mode().Perm())
		}
	}
	owned("workspace", 1000, 0)
	owned("home/user", 1000, 0)
	owned("run/withruntime", 0, 0o755)
	owned("opt/withruntime", 0, 0o755)
	if ents, _ := os.ReadDir(filepath.Join(root, "run/withruntime")); len(ents) != 0 {
		t.Errorf("/run/withruntime is not empty")
	}
	for _, args := range [][]string{
		{"/usr/bin/python3", "-c", "import venv, ssl; print('ok')"},
		{"/usr/bin/node", "-e", "console.log('ok')"},
		{"/usr/bin/setpriv", "--reuid=1000", "--regid=1000", "--init-groups", "/bin/sh", "-c", "cd /workspace && touch f && rm f && echo ok"},
	} {
		out, err := exec.Command("chroot", append([]string{root}, args...)...).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Errorf("chroot %v: %v\n%s", args, err, out)
		}
	}
	lists, _ := filepath.Glob(filepath.Join(root, "var/lib/apt/lists/*_Packages*"))
	debs, _ := filepath.Glob(filepath.Join(root, "var/cache/apt/archives/*.deb"))
	if len(lists)+len(debs) != 0 {
		t.Errorf("apt lists or caches left: %v %v", lists, debs)
	}
	if m, _ := mountsUnder(dir); len(m) != 0 {
		t.Errorf("mounts left: %v", m)
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("leftovers: %v", l)
	}
}

// TestPrivateTemplate: a template made OwnedBy a key is found by GetFor and
// CheckUse for that key only; for another key they answer exactly as for a
// missing template, and shared templates are every key's.
func TestPrivateTemplate(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	fill := func(ctx context.Context, rootfs string, step func(string) func()) (*Origin, error) {
		return &Origin{Image: "test"}, os.WriteFile(filepath.Join(rootfs, "f"), []byte("x"), 0o644)
	}
	if _, err := s.Create(context.Background(), "mine", fill, nil, OwnedBy("key_a")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(context.Background(), "shared", fill, nil); err != nil {
		t.Fatal(err)
	}
	info, err := s.GetFor("mine", "key_a")
	if err != nil || info.Owner != "key_a" || !info.UsableBy("key_a") || info.UsableBy("key_b") {
		t.Fatalf("GetFor by its owner: %+v %v", info, err)
	}
	_, missing := s.GetFor("nothing", "key_b")
	_, other := s.GetFor("mine", "key_b")
	if !errors.Is(other, ErrNotFound) || strings.ReplaceAll(other.Error(), "mine", "nothing") != missing.Error() {
		t.Errorf("another key's template: %v; want the missing template's error (%v)", other, missing)
	}
	if err := s.CheckUse("mine", "key_b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("CheckUse by another key: %v", err)
	}
	for _, k := range []string{"key_a", "key_b", ""} {
		if err := s.CheckUse("shared", k); err != nil {
			t.Errorf("CheckUse of a shared template by %q: %v", k, err)
		}
	}
}
