package template

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

// The code-interpreter template's kernels for languages other than Python
// (the agent's internal/agent/languages.go says how each is started):
//
//   - Bash: bash_kernel from PyPI (a Python kernel that drives bash through
//     a pty; pexpect from Debian).
//   - JavaScript and TypeScript: Deno's built-in Jupyter kernel
//     (`deno jupyter --kernel`), the deno binary from its npm package.
//   - R: IRkernel, Debian's r-cran-irkernel (in kernelDebPackages).
//   - Java: a kernel of our own, javakernel/JShellKernel.java: the JDK's
//     JShell (Debian's openjdk-17-jdk-headless, in kernelDebPackages)
//     behind the Jupyter messaging of JJava's library
//     (org.dflib.jjava:jjava-jupyter from Maven Central, with its
//     dependencies, each pinned below). Maven Central serves JJava's
//     library but not its kernel, so the kernel is this file, compiled by
//     the hook with the rootfs's own javac into agentapi.JavaKernelDir
//     beside the jars. The hook then runs it (--check), recording the
//     classes it loads in a CDS archive (jshell.jsa) that the agent's Java
//     kernels start from.
//
// Debian's packages are installed by mmdebstrap with the others. The files
// from PyPI, npm and Maven Central are fetched on the build host with its
// own clients (pip, npm and mvn, as the host is set up to reach the
// registries) into a cache
// beside the templates (<Dir>/.cache/kernels/<version>/, kept across
// builds, so a rebuild downloads nothing), then installed into the rootfs
// by kernelsHook. Versions are pinned, and the files' names (with their
// versions) are in the hook, so a new version is a new recipe version.
type kernelFile struct {
	// name is the file the client writes into the cache.
	name string
	// fetch is the host command that writes name into the directory given
	// as its last argument (dirFlag + the directory when dirFlag is set).
	fetch   []string
	dirFlag string
}

// Pinned kernel versions.
const (
	bashKernelVersion = "0.10.0"
	filetypeVersion   = "1.2.0" // bash_kernel's dependency not in Debian
	denoVersion       = "2.9.6"
	// mavenDependencyPlugin copies one artifact from Maven Central.
	mavenDependencyPlugin = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
)

// javaKernelJars are JJava's Jupyter library and its dependencies (as its
// POM names them), group:artifact:version.
var javaKernelJars = []string{
	"org.dflib.jjava:jjava-jupyter:1.0-a6",
	"org.zeromq:jeromq:0.6.0",
	"eu.neilalexander:jnacl:1.0.0",
	"com.google.code.gson:gson:2.11.0",
	"com.google.errorprone:error_prone_annotations:2.27.0",
	"org.slf4j:slf4j-api:2.0.17",
}

//go:embed javakernel/JShellKernel.java
var javaKernelSource string

// mavenJar is the kernel file of one group:artifact:version jar.
func mavenJar(gav string) kernelFile {
	p := strings.Split(gav, ":")
	return kernelFile{name: p[1] + "-" + p[2] + ".jar",
		fetch:   []string{"mvn", "-B", "-q", mavenDependencyPlugin + ":copy", "-Dartifact=" + gav + ":jar"},
		dirFlag: "-DoutputDirectory="}
}

// kernelFiles are fetched from the registries by the build host: the
// first three by index in kernelsHook, then the Java kernel's jars.
var kernelFiles = append([]kernelFile{
	{name: "bash_kernel-" + bashKernelVersion + "-py2.py3-none-any.whl",
		fetch: []string{"pip", "download", "--no-deps", "--only-binary=:all:", "bash_kernel==" + bashKernelVersion, "-d"}},
	{name: "filetype-" + filetypeVersion + "-py2.py3-none-any.whl",
		fetch: []string{"pip", "download", "--no-deps", "--only-binary=:all:", "filetype==" + filetypeVersion, "-d"}},
	{name: "deno-linux-x64-glibc-" + denoVersion + ".tgz",
		fetch: []string{"npm", "pack", "--silent", "@deno/linux-x64-glibc@" + denoVersion, "--pack-destination"}},
}, javaKernelFiles()...)

func javaKernelFiles() []kernelFile {
	var fs []kernelFile
	for _, j := range javaKernelJars {
		fs = append(fs, mavenJar(j))
	}
	return fs
}

// kernelDebPackages are the kernels' packages from Debian: pexpect for
// bash_kernel, IRkernel (with R) for R, the JDK (JShell and javac) for
// Java.
var kernelDebPackages = []string{"python3-pexpect", "r-cran-irkernel", "openjdk-17-jdk-headless"}

// kernelsEnv names the hook's environment variable that holds the cache
// directory of the kernels' files.
const kernelsEnv = "WITHRUNTIME_KERNEL_FILES"

const stepKernels = "installing the Bash, JavaScript/TypeScript and Java kernels"

// kernelsHook installs the cached kernel files into the rootfs ($1):
// bash_kernel with pip (offline, from the cache), deno's binary to
// /usr/local/bin, the Java kernel's jars to agentapi.JavaKernelDir with
// the kernel compiled beside them. It then starts each once as the sandbox user, so
// that a broken install fails the build, not a sandbox's first cell.
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
` + javaKernelHook + `echo '` + stepMarker + `done'
`

// javaKernelHook installs the jars, compiles the kernel (its source in a
// here-document, so a change of it is a new recipe version), runs it once
// as root to record its CDS archive (root: the archive is written into a
// directory the sandbox user cannot write) and once as the sandbox user
// from that archive.
var javaKernelHook = `install -d -m 0755 "$1` + agentapi.JavaKernelDir + `"
` + javaJarCopies() + `install -d -m 0700 "$1/tmp/withruntime-jshell"
cat > "$1/tmp/withruntime-jshell/JShellKernel.java" <<'WITHRUNTIME_JAVA_SOURCE'
` + javaKernelSource + `WITHRUNTIME_JAVA_SOURCE
chroot "$1" javac -nowarn -encoding UTF-8 -d /tmp/withruntime-jshell/classes -cp '` + agentapi.JavaKernelDir + `/*' /tmp/withruntime-jshell/JShellKernel.java
chroot "$1" jar --create --file ` + agentapi.JavaKernelDir + `/withruntime-jshell.jar -C /tmp/withruntime-jshell/classes .
rm -rf "$1/tmp/withruntime-jshell"
chmod 0644 "$1` + agentapi.JavaKernelDir + `"/*.jar
chroot "$1" env HOME=/root java ` + agentapi.JavaKernelFlags + ` -XX:ArchiveClassesAtExit=` + agentapi.JavaKernelDir + `/jshell.jsa -cp '` + agentapi.JavaKernelDir + `/*' ` + agentapi.JavaKernelClass + ` --check
chmod 0644 "$1` + agentapi.JavaKernelDir + `/jshell.jsa"
chroot --userspec=` + sandboxUID + `:` + sandboxUID + ` "$1" env HOME=/home/user java ` + agentapi.JavaKernelFlags + ` -XX:SharedArchiveFile=` + agentapi.JavaKernelDir + `/jshell.jsa -cp '` + agentapi.JavaKernelDir + `/*' ` + agentapi.JavaKernelClass + ` --check
`

func javaJarCopies() string {
	var b strings.Builder
	for _, f := range javaKernelFiles() {
		fmt.Fprintf(&b, "cp \"$k/%s\" \"$1%s/\"\n", f.name, agentapi.JavaKernelDir)
	}
	return b.String()
}

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
	done := env.step("downloading the kernels from the package registries (pip, npm, mvn)")
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
	args := append(append([]string{}, f.fetch[1:]...), f.dirFlag+tmp)
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
