package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"withruntime.dev/runtime/bench/internal/apiclient"
	"withruntime.dev/runtime/bench/internal/bare"
	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// The sandboxes' size on all three paths: the host's two cores, 4 GiB of
// memory, 8 GiB of root filesystem writes (the host path runs unlimited on
// the same two cores).
const (
	sandboxCPUs      = 2
	sandboxMemoryMiB = 4096
	sandboxDiskMiB   = 8192
	// stepTimeout bounds one step (a stuck step fails the run).
	stepTimeout = 20 * time.Minute
)

// runner is one way of running the tasks: Runtime, bare runsc, the host.
type runner interface {
	name() string
	open(ctx context.Context) (box, error)
}

// box is one fresh sandbox (or host directory).
type box interface {
	// upload puts the host file src at /workspace/in/<base name>.
	upload(ctx context.Context, src string) error
	// run runs script (bash) as the sandbox user in /workspace, timed to
	// its end, and returns its stdout.
	run(ctx context.Context, script string) (time.Duration, string, error)
	close() error
}

// runtimeRunner runs the tasks in sandboxes of an in-process Runtime server.
type runtimeRunner struct {
	c   *apiclient.Client
	tpl string
}

func (r *runtimeRunner) name() string { return "runtime" }

type runtimeBox struct {
	r  *runtimeRunner
	id string
}

func (r *runtimeRunner) open(ctx context.Context) (box, error) {
	id, err := r.c.Create(ctx, api.CreateSandboxRequest{Template: r.tpl, CPU: sandboxCPUs, MemoryMiB: sandboxMemoryMiB,
		DiskMiB: sandboxDiskMiB, TimeoutSeconds: 3 * 3600})
	if err != nil {
		if id != "" {
			_ = r.c.Del(context.Background(), id)
		}
		return nil, err
	}
	return &runtimeBox{r: r, id: id}, nil
}

func (b *runtimeBox) upload(ctx context.Context, src string) error {
	return b.r.c.Upload(ctx, b.id, "/workspace/in/"+filepath.Base(src), src)
}

func (b *runtimeBox) run(ctx context.Context, script string) (time.Duration, string, error) {
	env := map[string]string{}
	for _, kv := range taskEnv {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	req := agentapi.ExecRequest{Command: scriptPrefix + script, Env: env, TimeoutSeconds: stepTimeout.Seconds()}
	var res agentapi.ExecResult
	start := time.Now()
	err := b.r.c.GetJSON(ctx, "POST", "/v1/sandboxes/"+b.id+"/exec", req, &res)
	d := time.Since(start)
	if err != nil {
		return d, "", err
	}
	if res.ExitCode != 0 {
		return d, res.Stdout, fmt.Errorf("exit %d: %s", res.ExitCode, tailStr(res.Stderr+res.Stdout, 1500))
	}
	return d, res.Stdout, nil
}

func (b *runtimeBox) close() error { return b.r.c.Del(context.Background(), b.id) }

// bareRunner runs the tasks in bare runsc sandboxes (bare.Runner with
// Defaults: runsc's default flags) of the same template root and size.
type bareRunner struct {
	b     *bare.Runner
	label string
}

func (r *bareRunner) name() string { return r.label }

type bareBox struct {
	r  *bareRunner
	id string
}

func (r *bareRunner) open(ctx context.Context) (box, error) {
	id, err := r.b.Start(ctx, "wl")
	if err != nil {
		return nil, err
	}
	return &bareBox{r: r, id: id}, nil
}

// upload streams src into the sandbox through `runsc exec` (cat), the
// bare equivalent of the API's upload; outside the timing.
func (b *bareBox) upload(ctx context.Context, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	_, _, err = b.r.b.ExecScript(ctx, b.id, "mkdir -p /workspace/in && cat > /workspace/in/"+filepath.Base(src), taskEnv, f)
	return err
}

func (b *bareBox) run(ctx context.Context, script string) (time.Duration, string, error) {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	return b.r.b.ExecScript(ctx, b.id, scriptPrefix+script, taskEnv, nil)
}

func (b *bareBox) close() error { return b.r.b.Destroy(b.id) }

// hostRunner runs the tasks on the host without gVisor: the template's
// own binaries (the same python3, node, git and go as in the sandboxes;
// the host's are other versions) under bubblewrap, the template root
// read-only as /, a fresh host directory as /workspace and another as
// /home/user, /tmp a tmpfs as in the sandboxes, as uid 1000 (setpriv, no
// capabilities). Namespaces and bind mounts cost the kernel's file
// operations nothing measurable: this is the host's own speed.
type hostRunner struct {
	rootfs, dir string
	seq         atomic.Int64
}

func (r *hostRunner) name() string { return "host" }

type hostBox struct {
	r             *hostRunner
	dir, ws, home string
}

func (r *hostRunner) open(context.Context) (box, error) {
	dir := filepath.Join(r.dir, fmt.Sprintf("h%04d", r.seq.Add(1)))
	b := &hostBox{r: r, dir: dir, ws: filepath.Join(dir, "workspace"), home: filepath.Join(dir, "home")}
	for _, d := range []string{b.ws, filepath.Join(b.ws, "in"), b.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(d, 1000, 1000); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (b *hostBox) upload(_ context.Context, src string) error {
	dst := filepath.Join(b.ws, "in", filepath.Base(src))
	if err := copyFile(src, dst); err != nil {
		return err
	}
	return os.Chown(dst, 1000, 1000)
}

func (b *hostBox) run(ctx context.Context, script string) (time.Duration, string, error) {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	args := []string{"--ro-bind", b.r.rootfs, "/", "--bind", b.ws, "/workspace", "--bind", b.home, "/home/user",
		"--proc", "/proc", "--dev", "/dev", "--perms", "01777", "--tmpfs", "/tmp", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
		"--unshare-net", "--die-with-parent", "--clearenv", "--chdir", "/workspace"}
	for _, kv := range taskEnv {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	args = append(args, "--", "/usr/bin/setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "--inh-caps=-all",
		"--bounding-set=-all", "/bin/bash", "-c", scriptPrefix+script)
	cmd := exec.CommandContext(ctx, "bwrap", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, stdout.String(), fmt.Errorf("bwrap: %w: %s", err, tailStr(stderr.String(), 1500))
	}
	return d, stdout.String(), nil
}

func (b *hostBox) close() error { return os.RemoveAll(b.dir) }

func tailStr(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}
