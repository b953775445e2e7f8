package itest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/server"
	"withruntime.dev/runtime/internal/store"
)

// TestDataDirLock: one server at a time runs on a data directory. A second
// Open is refused and names the holder; a CLI command on that directory
// uses the running server when it serves the API (instead of adopting its
// sandboxes and taking over their networks), and waits for it otherwise.
func TestDataDirLock(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "wr-lock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := newEnv(t, withDataDir(dir))

	_, err = server.Open(context.Background(), server.Config{DataDir: dir, TemplatesDir: templatesDir, Runsc: runscBin, Agent: agentBin})
	var inUse *server.ErrInUse
	if !errors.As(err, &inUse) || inUse.Holder.PID != os.Getpid() || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Open on %s: %v", dir, err)
	}

	bin := buildWithruntime(t)
	cli := func(ctx context.Context, args ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "WITHRUNTIME_DATA_DIR="+dir, "WITHRUNTIME_URL=", "WITHRUNTIME_API_KEY=",
			"XDG_CONFIG_HOME="+t.TempDir(), "WITHRUNTIME_AGENT="+agentBin, "WITHRUNTIME_RUNSC="+runscBin)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}

	// Held by a server that does not serve the API (another CLI command's
	// embedded server): the CLI waits, and says so.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, stderr, err := cli(ctx, "sandbox", "ls")
	cancel()
	if err == nil || !strings.Contains(stderr, "waiting for another withruntime command") {
		t.Fatalf("CLI while another embedded server holds the directory: %v\n%s", err, stderr)
	}

	// Held by a server that serves the API: the CLI uses it.
	if err := e.srv.Advertise(e.http.URL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stdout, stderr, err := cli(ctx, "sandbox", "run", "--", "echo", "shared")
	if err != nil || stdout != "shared\n" {
		t.Fatalf("CLI with a serving holder: %v\nstdout %q\nstderr %s", err, stdout, stderr)
	}
	sbs, err := e.srv.Store.ListSandboxes(context.Background(), store.SandboxFilter{})
	if err != nil || len(sbs) != 1 || sbs[0].State != store.StateStopped {
		t.Fatalf("the CLI's sandbox should be the running server's, run and destroyed: %+v %v", sbs, err)
	}
}
