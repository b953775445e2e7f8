package gvisor

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestListWaitsForStrayCommands: a runsc command that a dead process left
// running on the state directory (here a stand-in with its command line,
// orphaned as a killed server's `runsc run` is) holds List back until it
// ends; a command on another state directory does not.
func TestListWaitsForStrayCommands(t *testing.T) {
	state := t.TempDir()
	runsc := filepath.Join(t.TempDir(), "runsc")
	d := &Driver{cfg: Config{Runsc: runsc, StateDir: state}}
	orphan := func(root string, secs string) {
		t.Helper()
		// The inner shell is started in the background by an outer one that
		// exits at once, so its parent is no longer this process.
		script := `exec -a "$0" bash -c "sleep ` + secs + `; true" x --root "$1" run sbx_a >/dev/null 2>&1 &`
		if out, err := exec.Command("bash", "-c", script, runsc, root).CombinedOutput(); err != nil {
			t.Fatalf("starting the stand-in: %v %s", err, out)
		}
	}
	orphan(filepath.Join(t.TempDir(), "runsc"), "3") // another server's
	orphan(filepath.Join(state, "runsc"), "1.5")
	time.Sleep(100 * time.Millisecond)
	if n := len(d.strayCommands()); n != 1 {
		t.Fatalf("found %d stray commands, want 1", n)
	}
	start := time.Now()
	if _, err := d.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < time.Second || took > 2500*time.Millisecond {
		t.Errorf("List returned after %s, want when the stray command ended (~1.4 s)", took)
	}
}
