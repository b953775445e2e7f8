package template

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// recipe says how to build one template.
type recipe struct {
	suite    string
	packages []string
	// hook is shell run after customizeHook, in the same way ($1 is the
	// rootfs); "": none.
	hook string
	// check verifies prerequisites before anything is written; nil: none.
	check func() error
	// run creates env.rootfs (which does not exist yet) and fills it.
	run func(ctx context.Context, env *buildEnv) error
	// start makes the template warm (start.go); nil: not warm. It is not
	// part of version: it changes no file of the root filesystem.
	start *Start
}

// version identifies what r builds: a template built from another version
// of its recipe (an older withruntime's) is rebuilt by Ensure.
func (r recipe) version() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n", r.suite, strings.Join(r.packages, ","), customizeHook, strings.Join(mountPoints, ","))
	if r.hook != "" {
		fmt.Fprintf(h, "%s\n", r.hook)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// basePackages are the base template's packages; every other recipe
// starts from them. python-is-python3 gives the `python` command E2B's
// templates have (programs and models type it); vim is the editor a
// terminal user (sandbox shell) reaches for.
var basePackages = []string{
	"python3", "python-is-python3", "python3-pip", "python3-venv", "nodejs", "npm", "curl", "git",
	"ca-certificates", "procps", "tzdata", "coreutils", "iproute2", "sudo", "vim",
}

// CodeInterpreter names the template whose sandboxes run Jupyter kernels
// (POST /v1/sandboxes/{id}/code).
const CodeInterpreter = "code-interpreter"

// builtinRecipes are the templates `withruntime template build` knows.
var builtinRecipes = map[string]recipe{
	"base": {
		suite:    "bookworm",
		packages: basePackages,
		check:    checkMmdebstrap,
		run:      runMmdebstrap,
	},
	// Debian's own Jupyter stack (bookworm: ipykernel 6.17, jupyter_client
	// 7.4, IPython 8.5, numpy 1.24, pandas 1.5, matplotlib 3.6): recent
	// enough for the inline backend and rich display, signed by Debian,
	// and built without the package index (which a build host may not
	// reach). Users who want newer ones pip-install them in the sandbox.
	CodeInterpreter: {
		suite: "bookworm",
		packages: slices.Concat(basePackages, []string{
			"python3-ipykernel", "python3-jupyter-client", "python3-matplotlib-inline",
			"python3-numpy", "python3-pandas", "python3-matplotlib", "python3-pil",
			"fonts-dejavu-core"}, kernelDebPackages),
		hook:  codeInterpreterHook + kernelsHook,
		check: checkMmdebstrap,
		run:   runCodeInterpreter,
		// Its sandboxes start from a snapshot taken with the default
		// context's kernel up and the usual imports done.
		start: &Start{Kernel: true},
	},
}

// codeInterpreterHook warms what a kernel's first chart would otherwise
// build at run time, as the sandbox user: matplotlib's font cache (about
// 2 s under gVisor) in /home/user/.cache/matplotlib.
const codeInterpreterHook = `set -eu
echo '` + stepMarker + stepWarmKernel + `'
chroot --userspec=` + sandboxUID + `:` + sandboxUID + ` "$1" env HOME=/home/user MPLBACKEND=agg python3 -c 'import matplotlib.pyplot as plt, pandas, numpy, ipykernel; plt.figure(); plt.close("all")'
echo '` + stepMarker + `done'
`

// aptSourcesFiles are the host apt sources handed to mmdebstrap as its
// mirror argument, in order of preference.
var aptSourcesFiles = []string{
	"/etc/apt/sources.list.d/debian.sources",
	"/etc/apt/sources.list",
}

// stepMarker prefixes the lines the customize hook prints to report its own
// steps through mmdebstrap's output.
const stepMarker = "withruntime-step: "

const (
	stepConfigure   = "configuring user and workspace"
	stepWarmKernel  = "warming the kernel caches (matplotlib fonts)"
	sandboxUID      = "1000"
	mmdebstrapStep  = "downloading and installing packages (mmdebstrap)"
	cleanupStep     = "removing apt lists and caches"
	mountPointsStep = "creating mount points"
	subStepPrefix   = "mmdebstrap: "
	outputTailLines = 25
)

// customizeHook runs in mmdebstrap after the packages are installed; $1 is
// the rootfs.
const customizeHook = `set -eu
echo '` + stepMarker + stepConfigure + `'
chroot "$1" groupadd --gid ` + sandboxUID + ` user
chroot "$1" useradd --uid ` + sandboxUID + ` --gid ` + sandboxUID + ` --create-home --home-dir /home/user --shell /bin/bash user
install -d -m 0755 -o ` + sandboxUID + ` -g ` + sandboxUID + ` "$1/workspace"
# sudo without a password for the sandbox user: the sandbox is the boundary,
# root inside it is already allowed (exec as "root").
echo 'user ALL=(ALL:ALL) NOPASSWD: ALL' > "$1/etc/sudoers.d/withruntime-user"
chmod 0440 "$1/etc/sudoers.d/withruntime-user"
# pip installs where asked (pip install --user, or system-wide with sudo):
# a sandbox is disposable, so Debian's guard for the system's own Python
# (PEP 668, "externally-managed-environment") only gets in the way.
printf '[global]\nbreak-system-packages = true\n' > "$1/etc/pip.conf"
# C.UTF-8, the sandboxes' LANG, into the locale archive: glibc then maps
# one file where it opened each category's (34 opens by bash). An exec of
# bash -c true: 42-44 ms against 47-54 (medians of 100), ~910 host context
# switches of the sandbox's threads against ~1,080 (python3 -c pass: no
# difference, it loads one category).
chroot "$1" localedef --add-to-archive /usr/lib/locale/C.utf8
echo '` + stepMarker + `done'
`

var errMmdebstrapMissing = errors.New("mmdebstrap is not installed (needed to build templates): install it with `apt-get install mmdebstrap`, or run scripts/install.sh")

func checkMmdebstrap() error {
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return errMmdebstrapMissing
	}
	_, err := hostAptSources()
	return err
}

func hostAptSources() (string, error) {
	for _, p := range aptSourcesFiles {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Size() > 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("no apt sources to build from: none of %s exists", strings.Join(aptSourcesFiles, ", "))
}

func runMmdebstrap(ctx context.Context, env *buildEnv) error {
	bin, err := exec.LookPath("mmdebstrap")
	if err != nil {
		return errMmdebstrapMissing
	}
	sources, err := hostAptSources()
	if err != nil {
		return err
	}
	args := []string{
		"--variant=minbase",
		"--include=" + strings.Join(env.packages, ","),
		"--customize-hook=" + customizeHook,
	}
	if env.hook != "" {
		args = append(args, "--customize-hook="+env.hook)
	}
	args = append(args, env.suite, env.rootfs, sources)
	fmt.Fprintf(env.log, "# %s %s\n", bin, strings.Join(args, " "))

	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(append(os.Environ(), "LC_ALL=C.UTF-8"), env.hookEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group, so cancelling kills apt, dpkg and the
		// maintainer scripts too, not only mmdebstrap.
		Setpgid: true,
		// Do not outlive us if we crash.
		Pdeathsig: syscall.SIGKILL,
	}
	if os.Geteuid() == 0 {
		// As root mmdebstrap mounts /proc, /sys and /dev nodes into the
		// rootfs. In a private mount namespace those mounts die with it even
		// when it is killed, instead of lingering on the host. (Not root:
		// mmdebstrap picks its unshare mode, which does this itself.)
		cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS
	}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 10 * time.Second
	out := &outputParser{env: env}
	cmd.Stdout = out
	cmd.Stderr = out

	done := env.step(mmdebstrapStep)
	err = cmd.Run()
	out.flush()
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return fmt.Errorf("mmdebstrap failed: %v; last output:\n%s\n(full log: %s)", err, out.tail(), env.logPath)
	}
	out.endSub()
	done()

	// mmdebstrap already cleans apt's lists and caches; remove what is left.
	done = env.step(cleanupStep)
	if err := removeAptLeftovers(env.rootfs); err != nil {
		return err
	}
	done()

	// After mmdebstrap: its cleanup empties /run, hooks included.
	done = env.step(mountPointsStep)
	for _, d := range mountPoints {
		if err := mkdirRoot(filepath.Join(env.rootfs, d)); err != nil {
			return fmt.Errorf("create mount point: %w", err)
		}
	}
	done()
	return nil
}

// mountPoints are empty root-owned directories every built-in template has for the
// sandbox's mounts: the agent's socket directory, its host files, and data,
// where a volume mounts by default (a volume mounts only on a directory the
// template has: gvisor.checkVolumePaths).
var mountPoints = []string{"run/withruntime", "opt/withruntime", "data"}

func mkdirRoot(path string) error {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(path, 0o755); err != nil {
		return err
	}
	return os.Lchown(path, 0, 0)
}

// removeAptLeftovers empties apt's package lists and caches in rootfs,
// keeping the directories (and apt's lock files) apt expects.
func removeAptLeftovers(rootfs string) error {
	for _, d := range []string{"var/lib/apt/lists", "var/cache/apt"} {
		root := filepath.Join(rootfs, d)
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if e.IsDir() || e.Name() == "lock" {
				return nil
			}
			return os.Remove(p)
		})
		if err != nil {
			return fmt.Errorf("remove apt caches: %w", err)
		}
	}
	for _, g := range []string{"var/cache/debconf/*-old", "var/lib/dpkg/*-old"} {
		matches, _ := filepath.Glob(filepath.Join(rootfs, g))
		for _, m := range matches {
			if err := os.Remove(m); err != nil {
				return fmt.Errorf("remove apt caches: %w", err)
			}
		}
	}
	return nil
}

// outputParser receives mmdebstrap's stdout and stderr: it copies them to
// the build log, keeps the last lines for error messages and reports the
// "I: ..." lines (and the customize hook's markers) as steps. exec calls
// Write from one goroutine at a time because Stdout == Stderr.
type outputParser struct {
	env     *buildEnv
	partial []byte
	lines   []string // the last outputTailLines lines
	subDone func()   // ends the current sub-step, if one is open
}

func (o *outputParser) Write(p []byte) (int, error) {
	_, _ = o.env.log.Write(p) // a full disk must not fail the build here
	o.partial = append(o.partial, p...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			break
		}
		o.line(string(bytes.TrimRight(o.partial[:i], "\r")))
		o.partial = o.partial[i+1:]
	}
	return len(p), nil
}

// flush handles a last line without a newline.
func (o *outputParser) flush() {
	if len(o.partial) > 0 {
		o.line(string(o.partial))
		o.partial = nil
	}
}

func (o *outputParser) line(l string) {
	o.lines = append(o.lines, l)
	if len(o.lines) > outputTailLines {
		o.lines = o.lines[len(o.lines)-outputTailLines:]
	}
	if msg, ok := strings.CutPrefix(l, stepMarker); ok {
		o.endSub()
		if msg != "done" {
			o.subDone = o.env.step(msg)
		}
		return
	}
	msg, ok := strings.CutPrefix(l, "I: ")
	if !ok {
		return
	}
	msg = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(msg), "..."))
	// The hook reports itself; the final summary is the parent step's Done.
	if msg == "" || strings.HasPrefix(msg, "running --customize-hook") || strings.HasPrefix(msg, "success in ") {
		return
	}
	o.endSub()
	o.subDone = o.env.step(subStepPrefix + msg)
}

func (o *outputParser) endSub() {
	if o.subDone != nil {
		o.subDone()
		o.subDone = nil
	}
}

func (o *outputParser) tail() string {
	return strings.Join(o.lines, "\n")
}
