package itest

// /dev/shm (issue 24, F2): a sticky, world-writable tmpfs as Docker and E2B
// give, so that POSIX shared memory works for the default user, and counted
// in the sandbox's memory.

import (
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// multiprocessingProgram uses each thing that needs /dev/shm: a Pool (its
// queues hold semaphores), a ProcessPoolExecutor and shared_memory.
const multiprocessingProgram = `
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import shared_memory

def sq(x):
    return x * x

if __name__ == "__main__":
    mp.Semaphore()
    with mp.Pool(2) as p:
        print("pool", p.map(sq, [1, 2, 3]))
    with ProcessPoolExecutor(2) as ex:
        print("executor", list(ex.map(sq, [4, 5])))
    shm = shared_memory.SharedMemory(create=True, size=1024)
    shm.buf[:5] = b"hello"
    peer = shared_memory.SharedMemory(name=shm.name)
    print("shm", bytes(peer.buf[:5]).decode())
    peer.close(); shm.close(); shm.unlink()
`

const multiprocessingWant = "pool [1, 4, 9]\nexecutor [16, 25]\nshm hello\n"

func TestDevShm(t *testing.T) {
	b := newBox(t, api.CreateSandboxRequest{MemoryMiB: 512})
	b.logOnFailure(t)
	res := b.mustOK("stat -c '%a %U' /dev/shm; awk '$2 == \"/dev/shm\" {print $3}' /proc/mounts; df -m --output=size /dev/shm | tail -1")
	lines := strings.Fields(res.Stdout)
	if len(lines) != 4 || lines[0] != "1777" || lines[1] != "root" || lines[2] != "tmpfs" {
		t.Fatalf("/dev/shm is %q, want a 1777 tmpfs owned by root", res.Stdout)
	}
	if lines[3] != "128" {
		t.Errorf("/dev/shm of a 512 MiB sandbox is %s MiB, want a quarter of its memory (128)", lines[3])
	}

	for _, user := range []string{"", "root"} { // "" is the default user
		res := b.exec(agentapi.ExecRequest{Command: "python3 - <<'EOF'\n" + multiprocessingProgram + "EOF", User: user, TimeoutSeconds: 60})
		if res.ExitCode != 0 || res.Stdout != multiprocessingWant {
			t.Errorf("multiprocessing as %q: exit %d, stdout %q, stderr %q", user, res.ExitCode, res.Stdout, res.Stderr)
		}
	}

	// Writing past /dev/shm's size is ENOSPC for that command only.
	res, _ = b.shT("head -c 600M /dev/zero > /dev/shm/fill", 60)
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left on device") {
		t.Errorf("filling /dev/shm: %+v, want No space left on device", res)
	}
	b.mustOK("rm /dev/shm/fill && echo ok > /dev/shm/again && cat /dev/shm/again")
}

// TestDevShmKernel: the code interpreter's kernels run as the default user
// too; a multiprocessing Pool works from a cell.
func TestDevShmKernel(t *testing.T) {
	e := newEnv(t)
	id := e.ciSandbox(api.CreateSandboxRequest{}).ID
	// A cell's functions live in __main__, which Pool's workers cannot
	// import under the spawn method: fork (Linux's default) is what
	// notebooks use.
	ex := e.code(id, agentapi.RunCodeRequest{Code: `
import multiprocessing as mp
from multiprocessing import shared_memory
with mp.get_context("fork").Pool(2) as p:
    print(p.map(abs, [-1, -2]))
s = shared_memory.SharedMemory(create=True, size=16); s.close(); s.unlink()
print("shm ok")`})
	if ex.Error != nil {
		t.Fatalf("cell: %+v", ex.Error)
	}
	if got := strings.Join(ex.Logs.Stdout, ""); got != "[1, 2]\nshm ok\n" {
		t.Fatalf("cell stdout %q", got)
	}
}
