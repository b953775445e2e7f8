package itest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// The agent keeps /etc/passwd and /etc/group between execs while they are
// unchanged; a change made inside the sandbox after boot must still be
// seen by the very next exec: an edit in place of the same size (only the
// file's ctime tells), a user added with useradd (a new file renamed over
// the old), a supplementary group appended. And the agent's own Go
// settings never reach a command's environment.
func TestExecSeesAccountChanges(t *testing.T) {
	b := newBox(t, api.CreateSandboxRequest{})
	asRoot := func(command string) agentapi.ExecResult {
		t.Helper()
		res := b.exec(agentapi.ExecRequest{Command: command, User: "root"})
		if res.ExitCode != 0 {
			t.Fatalf("%q as root: exit %d, %q %q", command, res.ExitCode, res.Stdout, res.Stderr)
		}
		return res
	}
	if got := b.mustOK("id -u").Stdout; got != "1000\n" {
		t.Fatalf("user's uid %q, want 1000", got)
	}
	b.mustOK("id -u") // a second lookup, from the cache

	// Same size, same inode, mtime set back: only the file's ctime tells.
	// The first edit also copies the file up into the sandbox's overlay;
	// after racyWindow (2 s) the agent keeps its read, and the second edit
	// must still be seen.
	edit := func(from, to string) {
		t.Helper()
		asRoot(`python3 -c '
import os, sys
p = "/etc/passwd"
st = os.stat(p)
with open(p, "r+") as f:
    s = f.read()
    assert sys.argv[1] in s, s
    f.seek(0)
    f.write(s.replace(sys.argv[1], sys.argv[2]))
os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
' ` + from + " " + to)
	}
	edit("user:x:1000:1000:", "user:x:1001:1001:")
	if got := b.mustOK("id -u").Stdout; got != "1001\n" {
		t.Errorf("after an edit in place of /etc/passwd, the user's uid is %q, want 1001", got)
	}
	time.Sleep(2500 * time.Millisecond)
	b.mustOK("id -u")
	b.mustOK("id -u") // from the cache
	edit("user:x:1001:1001:", "user:x:1002:1002:")
	if got := b.mustOK("id -u").Stdout; got != "1002\n" {
		t.Errorf("after a second edit in place of /etc/passwd, the user's uid is %q, want 1002", got)
	}

	asRoot("useradd -u 1500 -M -s /bin/sh other && echo 'extra:x:2345:user' >> /etc/group")
	// useradd wrote /etc/passwd anew (a new inode); the group file grew.
	res := b.mustOK("id -u; id -G")
	lines := strings.Split(res.Stdout, "\n")
	if len(lines) < 2 || lines[0] != "1002" || !slices.Contains(strings.Fields(lines[1]), "2345") {
		t.Errorf("after useradd and a group appended: %q, want uid 1002 and the group 2345 among the user's", res.Stdout)
	}

	env := b.mustOK("env").Stdout
	for _, k := range []string{"GODEBUG=", "GOMAXPROCS=", "GOGC="} {
		for _, line := range strings.Split(env, "\n") {
			if strings.HasPrefix(line, k) {
				t.Errorf("a command's environment has the agent's %s", line)
			}
		}
	}
}
