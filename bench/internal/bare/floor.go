package bare

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// The floor programs: the least an agent can do for one command. A Runtime
// sandbox's process is its agent, which runs each command as a child
// process; a bare `runsc run` of `true` has no agent and runs `true` as the
// sandbox's first process. Between the two lies what gVisor charges for a
// child process and a new address space, and for starting a Go runtime —
// prices any agent pays, whatever its server does. A floor program runs
// `true` as a child (argument "exec") or returns at once (any other
// argument), as the sandbox's first process, bind-mounted read-only at
// FloorPath (Runner.Files).

// FloorPath is where the benchmarks mount a floor program in a bare
// sandbox.
const FloorPath = "/opt/wr-floor"

// goFloorSource runs `true` through os/exec, the agent's way (fork and exec
// from Go, its output on a pipe), and exits 1 unless it exits 0 silently.
const goFloorSource = `package main

import (
	"os"
	"os/exec"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "exec" {
		out, err := exec.Command("true").Output()
		if err != nil || len(out) != 0 {
			os.Exit(1)
		}
	}
}
`

// cFloorSource is goFloorSource's exec in C: fork, execlp("true") with
// its output on a pipe, waitpid.
const cFloorSource = `#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc < 2 || strcmp(argv[1], "exec") != 0) return 0;
	int p[2];
	if (pipe(p) != 0) return 1;
	pid_t pid = fork();
	if (pid < 0) return 1;
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execlp("true", "true", (char *)0);
		_exit(127);
	}
	close(p[1]);
	char buf[64];
	ssize_t n, total = 0;
	while ((n = read(p[0], buf, sizeof buf)) > 0) total += n;
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || total != 0) return 1;
	return 0;
}
`

// BuildGoFloor builds the Go floor program as a static binary
// (CGO_ENABLED=0, as the agent is built) in dir and returns its path.
func BuildGoFloor(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(goFloorSource), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module floor\n\ngo 1.22\n"), 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "gofloor")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the Go floor program: %w: %s", err, out)
	}
	return bin, nil
}

// BuildCFloor builds the C floor program with `gcc -static` in dir and
// returns its path; the error says when gcc or a static libc is missing.
func BuildCFloor(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	src := filepath.Join(dir, "floor.c")
	if err := os.WriteFile(src, []byte(cFloorSource), 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "cfloor")
	if out, err := exec.Command("gcc", "-static", "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the C floor program (needs gcc and a static libc): %w: %s", err, out)
	}
	return bin, nil
}
