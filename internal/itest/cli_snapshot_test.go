package itest

import (
	"strings"
	"testing"
)

// TestCLISnapshot: sandbox snapshot, sandbox create --snapshot, sandbox
// fork -n, snapshot ls and rm, as a user types them.
func TestCLISnapshot(t *testing.T) {
	e := newEnv(t)
	run := func(args ...string) string {
		t.Helper()
		r := e.cli(nil, args...)
		if r.code != 0 {
			t.Fatalf("withruntime %v: exit %d, stderr %s", args, r.code, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	src := run("sandbox", "create")
	run("sandbox", "exec", src, "--", "echo kept > /workspace/f")
	snap := run("sandbox", "snapshot", src, "--name", "cli-snap")
	if !strings.HasPrefix(snap, "snap_") {
		t.Fatalf("sandbox snapshot printed %q", snap)
	}
	c := run("sandbox", "create", "--snapshot", "cli-snap")
	if got := run("sandbox", "exec", c, "--", "cat /workspace/f"); got != "kept" {
		t.Errorf("a sandbox from the snapshot: %q", got)
	}
	forks := strings.Fields(run("sandbox", "fork", src, "-n", "2"))
	if len(forks) != 2 {
		t.Fatalf("sandbox fork -n 2 printed %v", forks)
	}
	for _, id := range forks {
		if got := run("sandbox", "exec", id, "--", "cat /workspace/f"); got != "kept" {
			t.Errorf("fork %s: %q", id, got)
		}
	}
	if ls := run("snapshot", "ls"); !strings.Contains(ls, snap) || !strings.Contains(ls, "cli-snap") || strings.Count(ls, "snap_") != 1 ||
		!strings.Contains(ls, "MODE") || !strings.Contains(ls, " full ") || !strings.Contains(ls, "EXPIRES") {
		t.Errorf("snapshot ls:\n%s", ls)
	}
	run("snapshot", "rm", "cli-snap")
	if r := e.cli(nil, "snapshot", "rm", "cli-snap"); r.code == 0 || !strings.Contains(r.stderr, `no snapshot "cli-snap"`) {
		t.Errorf("snapshot rm of a deleted snapshot: %+v", r)
	}
	if r := e.cli(nil, "sandbox", "fork", src, "-n", "0"); r.code == 0 || !strings.Contains(r.stderr, "count") {
		t.Errorf("sandbox fork -n 0: %+v", r)
	}
}
