package template

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// lockPollInterval is how often a waiting Build/Ensure retries the lock (the
// wait is a poll so that it honours ctx).
const lockPollInterval = 100 * time.Millisecond

// Build builds the template name from its recipe, replacing an existing
// template of that name atomically. It waits for any other build of the same
// name (in any process) to finish first. progress, if not nil, is called as
// steps begin and end, from one goroutine at a time.
//
// Nothing is left behind on failure or cancellation except the build log,
// <Dir>/.build-<name>.log.
func (s *Store) Build(ctx context.Context, name string, progress func(Progress)) (Info, error) {
	tr := newTracker(progress)
	r, err := s.recipe(name)
	if err != nil {
		return Info{}, err
	}
	unlock, err := s.lock(ctx, name, tr)
	if err != nil {
		return Info{}, err
	}
	defer unlock()
	return s.build(ctx, name, r, tr)
}

// Ensure returns the template name, building it first if it does not exist
// or was built from another version of its recipe.
// When several callers (in any process) ensure the same template at once,
// exactly one builds it and the others wait for it.
func (s *Store) Ensure(ctx context.Context, name string, progress func(Progress)) (Info, error) {
	info, err := s.Get(name)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return info, err
	}
	r, rerr := s.recipe(name)
	if err == nil && (rerr != nil || info.Recipe == r.version()) {
		return info, nil // built, and current (or not from a recipe)
	}
	if rerr != nil {
		return Info{}, rerr
	}
	tr := newTracker(progress)
	unlock, err := s.lock(ctx, name, tr)
	if err != nil {
		return Info{}, err
	}
	defer unlock()
	// Someone else may have built it while we waited for the lock.
	info, err = s.Get(name)
	if err == nil && info.Recipe == r.version() {
		return info, nil
	}
	if err != nil && !errors.Is(err, ErrNotFound) {
		return info, err
	}
	return s.build(ctx, name, r, tr)
}

func (s *Store) recipe(name string) (recipe, error) {
	if err := ValidName(name); err != nil {
		return recipe{}, err
	}
	recipes := s.recipes
	if recipes == nil {
		recipes = builtinRecipes
	}
	r, ok := recipes[name]
	if !ok {
		known := make([]string, 0, len(recipes))
		for k := range recipes {
			known = append(known, k)
		}
		sort.Strings(known)
		return recipe{}, fmt.Errorf("%w %q: templates are built from a recipe, and the known recipes are: %s", ErrUnknownRecipe, name, strings.Join(known, ", "))
	}
	return r, nil
}

// tracker turns step begin/end calls into Progress reports.
type tracker struct {
	start time.Time
	fn    func(Progress)
}

func newTracker(fn func(Progress)) *tracker {
	return &tracker{start: time.Now(), fn: fn}
}

// begin reports that step begins and returns the func that reports it done.
func (t *tracker) begin(step string) (done func()) {
	t.emit(step, false)
	return func() { t.emit(step, true) }
}

func (t *tracker) emit(step string, done bool) {
	if t.fn != nil {
		t.fn(Progress{Step: step, Elapsed: time.Since(t.start), Done: done})
	}
}

// lock takes the exclusive per-name build lock, waiting (and honouring ctx)
// while another process or goroutine holds it.
func (s *Store) lock(ctx context.Context, name string, tr *tracker) (unlock func(), err error) {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("template store: %w", err)
	}
	path := filepath.Join(s.Dir, "."+name+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("template %q: lock: %w", name, err)
	}
	fd := int(f.Fd())
	var waitDone func()
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("template %q: lock %s: %w", name, path, err)
		}
		if waitDone == nil {
			waitDone = tr.begin("waiting for another build of " + name)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("template %q: waiting for another build: %w", name, ctx.Err())
		case <-time.After(lockPollInterval):
		}
	}
	if waitDone != nil {
		waitDone()
	}
	return func() {
		_ = unix.Flock(fd, unix.LOCK_UN)
		f.Close()
	}, nil
}

// build runs recipe r into a temporary directory and moves the result into
// place. The caller holds the lock for name.
func (s *Store) build(ctx context.Context, name string, r recipe, tr *tracker) (info Info, err error) {
	defer func() {
		if err != nil {
			if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				err = fmt.Errorf("%w (%v)", ctx.Err(), err)
			}
			err = fmt.Errorf("build template %q: %w", name, err)
		}
	}()
	dir, err := filepath.Abs(s.Dir)
	if err != nil {
		return Info{}, err
	}
	if err := removeStale(dir, name); err != nil {
		return Info{}, err
	}
	if r.check != nil {
		done := tr.begin("checking prerequisites")
		if err := r.check(); err != nil {
			return Info{}, err
		}
		done()
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}

	tmp := filepath.Join(dir, buildPrefix+name+"-"+randomSuffix())
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return Info{}, err
	}
	installed := false
	defer func() {
		if !installed {
			if rerr := removeAll(tmp); rerr != nil && err != nil {
				err = fmt.Errorf("%w; also failed to clean up %s: %v", err, tmp, rerr)
			}
		}
	}()

	logPath := filepath.Join(dir, buildPrefix+name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return Info{}, err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "# withruntime: building template %q at %s\n", name, time.Now().UTC().Format(time.RFC3339))

	rootfs := filepath.Join(tmp, rootfsDir)
	env := &buildEnv{
		rootfs:   rootfs,
		suite:    r.suite,
		packages: r.packages,
		hook:     r.hook,
		log:      logFile,
		logPath:  logPath,
		cache:    filepath.Join(dir, cacheDir),
		step:     tr.begin,
	}
	if err := r.run(ctx, env); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}

	done := tr.begin("finalizing")
	st, err := os.Lstat(rootfs)
	if err != nil || !st.IsDir() {
		return Info{}, fmt.Errorf("recipe produced no rootfs directory (see %s)", logPath)
	}
	size, err := diskUsage(rootfs)
	if err != nil {
		return Info{}, fmt.Errorf("measure rootfs: %w", err)
	}
	info = Info{
		Name:      name,
		CreatedAt: time.Now().UTC().Truncate(time.Millisecond),
		SizeBytes: size,
		Packages:  append([]string{}, r.packages...),
		Suite:     r.suite,
		Recipe:    r.version(),
	}
	if err := writeInfo(filepath.Join(tmp, infoFile), info); err != nil {
		return Info{}, err
	}
	// Make the rootfs durable before it becomes visible under its name, so a
	// power loss cannot leave a complete-looking template with missing data.
	if err := syncFS(tmp); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	if err := install(dir, name, tmp); err != nil {
		return Info{}, err
	}
	installed = true
	done()
	s.recipeStart(&info)
	return info, nil
}

// buildEnv is what a recipe's run func gets.
type buildEnv struct {
	rootfs   string // does not exist yet; run creates it
	suite    string
	packages []string
	hook     string    // the recipe's own customize hook, if any
	log      io.Writer // the build log (<Dir>/.build-<name>.log)
	logPath  string
	step     func(name string) (done func())
	// cache is a directory kept across builds for files a recipe fetches
	// (<Dir>/.cache; it may not exist yet).
	cache string
	// hookEnv is added to the environment of the recipe's hooks.
	hookEnv []string
}

// cacheDir is the templates directory's cache of fetched files (its name
// is no valid template name, so List skips it).
const cacheDir = ".cache"

const (
	buildPrefix = ".build-" // .build-<name>-<suffix>: a build in progress
	oldPrefix   = ".old-"   // .old-<name>-<suffix>: a replaced template being removed
	suffixLen   = 16
)

func randomSuffix() string {
	var b [suffixLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

// removeStale removes the leftovers of builds of name that crashed. The
// caller holds the lock for name, so nothing else uses them. Names may
// contain '-', so the suffix must be exactly ours to tell ".build-a-<x>"
// (template "a") from ".build-a-b-<x>" (template "a-b").
func removeStale(dir, name string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		for _, p := range []string{buildPrefix, oldPrefix} {
			rest, ok := strings.CutPrefix(e.Name(), p+name+"-")
			if !ok || !isSuffix(rest) {
				continue
			}
			if err := removeAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("remove stale build: %w", err)
			}
		}
	}
	return nil
}

func isSuffix(s string) bool {
	if len(s) != suffixLen {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// install moves the finished build tmp to dir/name, atomically replacing an
// existing template of that name.
func install(dir, name, tmp string) error {
	final := filepath.Join(dir, name)
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_NOREPLACE)
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EEXIST) {
		// Swap the two in one step: there is never a moment without a
		// template. tmp then holds the old one.
		err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_EXCHANGE)
		if err == nil {
			if err := removeAll(tmp); err != nil {
				return fmt.Errorf("installed, but could not remove the old template: %w", err)
			}
			return nil
		}
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("install %s: %w", final, err)
	}
	// The filesystem cannot exchange: rename the old one aside first.
	old := filepath.Join(dir, oldPrefix+name+"-"+randomSuffix())
	movedOld := true
	if err := os.Rename(final, old); errors.Is(err, fs.ErrNotExist) {
		movedOld = false
	} else if err != nil {
		return fmt.Errorf("move old template aside: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		if movedOld {
			_ = os.Rename(old, final)
		}
		return fmt.Errorf("install %s: %w", final, err)
	}
	if movedOld {
		if err := removeAll(old); err != nil {
			return fmt.Errorf("installed, but could not remove the old template: %w", err)
		}
	}
	return nil
}

func writeInfo(path string, info Info) error {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncFS(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", path, err)
	}
	return nil
}

// diskUsage returns the allocated size of the tree at root, counting hard
// links once.
func diskUsage(root string) (int64, error) {
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var total int64
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			total += fi.Size()
			return nil
		}
		if st.Nlink > 1 && !fi.IsDir() {
			k := inode{uint64(st.Dev), st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total, err
}

// removeAll removes path like os.RemoveAll, but first detaches anything
// mounted below it (a killed mmdebstrap in root mode may leave /proc, /sys or
// device bind mounts in the rootfs), so it never deletes through a mount into
// the host's files. If a mount cannot be detached it removes nothing.
func removeAll(path string) error {
	mounts, err := mountsUnder(path)
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("refusing to remove %s: cannot unmount %s: %w", path, m, err)
		}
	}
	if len(mounts) > 0 {
		if left, err := mountsUnder(path); err != nil {
			return err
		} else if len(left) > 0 {
			return fmt.Errorf("refusing to remove %s: %s is still mounted", path, left[0])
		}
	}
	return os.RemoveAll(path)
}

// mountsUnder lists the mount points at or below path, deepest first.
func mountsUnder(path string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	path = filepath.Clean(path)
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == path || strings.HasPrefix(mp, path+"/") {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// unescapeMountinfo undoes the octal escapes (\040 etc.) of mountinfo fields.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
