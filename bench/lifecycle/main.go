// Command lifecycle runs sandbox lifecycles one at a time, so that the host
// CPU of one lifecycle can be measured over the whole process tree (server,
// every runsc process, the sandbox's gVisor kernel, gofer and host stubs)
// with `perf stat -e task-clock` or `perf record`; bench/lifecycle/cpu.sh
// does that and prints CPU ms per lifecycle. Modes (-mode):
//
//   - runtime: create (POST /v1/sandboxes), collected exec of `true`,
//     DELETE, through an in-process server with the production defaults
//     (sandbox networks, 8 prepared ahead; metering), no warm pool.
//   - runtime-noexec: the same without the exec.
//   - bare: `runsc run` of `true` in a bundle equal to bench/suite's bare
//     baseline (boot, run, exit, delete).
//   - bare-detach: `runsc run --detach` of `sleep infinity`, then `runsc
//     delete --force`, as Runtime's driver boots and destroys.
//   - bare-go: `bare`, but the process is a static Go program
//     (bench/internal/bare's floor program, built CGO_ENABLED=0 like the
//     agent, bind-mounted read-only) that returns at once: what gVisor charges to start and end the Go
//     runtime, a floor under any agent written in Go.
//   - bare-go-exec: the same Go program runs `true` through os/exec and
//     waits for it, as the agent runs a command: the floor of a Go agent's
//     lifecycle with one exec, with no server, network or API.
//   - bare-c-exec: the same with a static C program (gcc -static: fork,
//     execvp("true") with its output on a pipe, waitpid): how much of that
//     floor is gVisor's price of a child process and a new address space,
//     which any agent pays for a command, in whatever language.
//
// With -ctl CTL,ACK it enables perf through perf's control FIFOs just
// before the measured lifecycles and disables it after them (perf stat
// --delay=-1 --control=fifo:CTL,ACK), so that server start, template and
// agent builds and warm-up lifecycles are left out. It prints the wall time
// per lifecycle (and per phase in the runtime modes). Run as root.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/bench/internal/bare"
	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/server"
)

const workDir = "/tmp/wr-bench-lifecycle"

var (
	// phases sums the wall time of create, exec and delete.
	phases [3]time.Duration
	// cpuProfile is where the server's CPU profile goes (-cpuprofile).
	cpuProfile string
	// noExec leaves out the exec of each lifecycle (runtime-noexec).
	noExec bool
	// createEnv is the environment of every create (-env).
	createEnv map[string]string
)

func main() {
	n := flag.Int("n", 20, "measured lifecycles")
	warm := flag.Int("warm", 2, "unmeasured lifecycles first")
	mode := flag.String("mode", "runtime", "runtime, runtime-noexec, bare, bare-detach, bare-go, bare-go-exec or bare-c-exec")
	network := flag.Bool("network", true, "sandbox networks (runtime mode)")
	ctl := flag.String("ctl", "", "perf control FIFO (CTL,ACK)")
	tpls := flag.String("templates", "/var/lib/withruntime/templates", "templates directory")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write the in-process server's CPU profile over the measured lifecycles here")
	env := flag.String("env", "", "KEY=VALUE set in each sandbox's environment (the agent's too)")
	flag.Parse()
	if k, v, ok := strings.Cut(*env, "="); ok {
		createEnv = map[string]string{k: v}
	}
	if err := run(*n, *warm, *mode, *network, *ctl, *tpls); err != nil {
		fmt.Fprintln(os.Stderr, "lifecycle:", err)
		os.Exit(1)
	}
}

func run(n, warm int, mode string, network bool, ctl, tpls string) error {
	ctx := context.Background()
	var one func() error
	var cleanup func()
	switch mode {
	case "runtime":
		f, c, err := runtimeLifecycle(ctx, network, tpls)
		if err != nil {
			return err
		}
		one, cleanup = f, c
	case "runtime-noexec":
		noExec = true
		f, c, err := runtimeLifecycle(ctx, network, tpls)
		if err != nil {
			return err
		}
		one, cleanup = f, c
	case "bare":
		one, cleanup = bareLifecycle(tpls, false, nil), bareCleanup
	case "bare-detach":
		one, cleanup = bareLifecycle(tpls, true, nil), bareCleanup
	case "bare-go", "bare-go-exec":
		bin, err := bare.BuildGoFloor(filepath.Join(workDir, "floor"))
		if err != nil {
			return err
		}
		arg := "return"
		if mode == "bare-go-exec" {
			arg = "exec"
		}
		one = bareLifecycle(tpls, false, &floorProg{bin: bin, arg: arg})
		cleanup = func() { bareCleanup(); _ = os.RemoveAll(filepath.Dir(bin)) }
	case "bare-c-exec":
		bin, err := bare.BuildCFloor(filepath.Join(workDir, "floor"))
		if err != nil {
			return err
		}
		one = bareLifecycle(tpls, false, &floorProg{bin: bin, arg: "exec"})
		cleanup = func() { bareCleanup(); _ = os.RemoveAll(filepath.Dir(bin)) }
	default:
		return fmt.Errorf("mode %q", mode)
	}
	defer cleanup()
	for i := 0; i < warm; i++ {
		if err := one(); err != nil {
			return err
		}
	}
	time.Sleep(500 * time.Millisecond)
	perf(ctl, "enable")
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := one(); err != nil {
			return err
		}
	}
	wall := time.Since(start)
	// Background work of the last lifecycle (network teardown) finishes.
	time.Sleep(300 * time.Millisecond)
	perf(ctl, "disable")
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	fmt.Printf("%s: %d lifecycles, %.1f ms each (wall)\n", mode, n, float64(wall.Milliseconds())/float64(n))
	if phases[0] > 0 {
		k := float64(n+warm) * 1e6
		fmt.Printf("mean wall: create %.1f ms, exec %.1f ms, delete %.1f ms\n",
			float64(phases[0])/k, float64(phases[1])/k, float64(phases[2])/k)
	}
	return nil
}

func perf(ctl, cmd string) {
	if ctl == "" {
		return
	}
	c, a, _ := strings.Cut(ctl, ",")
	f, err := os.OpenFile(c, os.O_WRONLY, 0)
	if err != nil {
		panic(err)
	}
	fmt.Fprintln(f, cmd)
	f.Close()
	if a != "" {
		af, err := os.Open(a)
		if err != nil {
			panic(err)
		}
		buf := make([]byte, 16)
		_, _ = af.Read(buf)
		af.Close()
	}
}

func runtimeLifecycle(ctx context.Context, network bool, tpls string) (func() error, func(), error) {
	_ = os.RemoveAll(workDir)
	agent := filepath.Join(workDir, "bin", "withruntime-agent")
	build := exec.Command("go", "build", "-o", agent, "withruntime.dev/runtime/cmd/withruntime-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("build agent: %w: %s", err, out)
	}
	cfg := server.Config{
		DataDir: filepath.Join(workDir, "data"), TemplatesDir: tpls,
		Runsc: runscPath(), Agent: agent,
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Pool: sandbox.PoolConfig{Max: sandbox.DefaultPoolMax, NetworkSlots: sandbox.DefaultNetworkSlots},
	}
	if network {
		cfg.Egress = server.EgressConfig{Name: "wrlc", LinkPrefix: "wlc"}
	} else {
		cfg.Egress.Disabled = true
	}
	srv, err := server.Open(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	go func() { _ = srv.Serve(sctx, l) }()
	base := "http://" + l.Addr().String()
	call := func(method, path string, body, out any) error {
		var rd io.Reader = http.NoBody
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("Authorization", "Bearer "+srv.LocalKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
		}
		if out != nil {
			return json.Unmarshal(b, out)
		}
		return nil
	}
	one := func() error {
		var sb api.Sandbox
		t0 := time.Now()
		if err := call("POST", "/v1/sandboxes", api.CreateSandboxRequest{TimeoutSeconds: 600, Env: createEnv}, &sb); err != nil {
			return err
		}
		t1 := time.Now()
		var res agentapi.ExecResult
		if noExec {
			res.ExitCode = 0
		} else if err := call("POST", "/v1/sandboxes/"+sb.ID+"/exec", agentapi.ExecRequest{Argv: []string{"true"}}, &res); err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("exec true: exit %d", res.ExitCode)
		}
		t2 := time.Now()
		err := call("DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
		t3 := time.Now()
		phases[0] += t1.Sub(t0)
		phases[1] += t2.Sub(t1)
		phases[2] += t3.Sub(t2)
		return err
	}
	cleanup := func() {
		srv.Manager.DestroyAll(context.Background())
		cancel()
		_ = srv.Close()
		_ = os.RemoveAll(workDir)
	}
	return one, cleanup, nil
}

// floorProg is the floor program a bare-go or bare-c lifecycle runs
// (bench/internal/bare's, mounted at bare.FloorPath) and its argument.
type floorProg struct{ bin, arg string }

// bareLifecycle is bench/suite's bare baseline: `runsc run` of `true` in a
// bundle equal to a Runtime sandbox's; with g, of that Go program instead.
func bareLifecycle(tpls string, detach bool, g *floorProg) func() error {
	dir := filepath.Join(workDir, "bare")
	seq := 0
	return func() error {
		seq++
		id := fmt.Sprintf("lc-%d-%d", os.Getpid(), seq)
		bundle := filepath.Join(dir, id)
		if err := os.MkdirAll(bundle, 0o700); err != nil {
			return err
		}
		argv := []string{"true"}
		if detach {
			argv = []string{"sleep", "infinity"}
		}
		if g != nil {
			argv = []string{bare.FloorPath, g.arg}
		}
		mem, quota, period, pids := int64((512+64+128)<<20), int64(100_000), uint64(100_000), int64(2*3*128+256)
		spec := specs.Spec{
			Version: specs.Version, Hostname: "sandbox",
			Root: &specs.Root{Path: filepath.Join(tpls, "base", "rootfs")},
			Process: &specs.Process{
				User: specs.User{UID: 1000, GID: 1000}, Args: argv, Cwd: "/workspace",
				Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
				Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 65536, Soft: 65536},
					{Type: "RLIMIT_NPROC", Hard: 128, Soft: 128}},
			},
			Mounts: []specs.Mount{
				{Destination: "/proc", Type: "proc", Source: "proc"},
				{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "mode=755"}},
				{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
				{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", "size=268435456"}},
			},
			Linux: &specs.Linux{
				CgroupsPath: "/withruntime-bench-lifecycle/" + id,
				Resources: &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: &mem},
					CPU: &specs.LinuxCPU{Quota: &quota, Period: &period}, Pids: &specs.LinuxPids{Limit: pids}},
				Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace},
					{Type: specs.UTSNamespace}, {Type: specs.MountNamespace}, {Type: specs.NetworkNamespace}},
			},
		}
		if g != nil {
			spec.Mounts = append(spec.Mounts, specs.Mount{Destination: bare.FloorPath, Type: "bind",
				Source: g.bin, Options: []string{"bind", "ro"}})
		}
		data, _ := json.Marshal(spec)
		if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o600); err != nil {
			return err
		}
		root := filepath.Join(dir, "runsc")
		args := []string{"--root", root, "--network=none", "--host-uds=create",
			fmt.Sprintf("--overlay2=root:dir=%s,size=%d", bundle, 2048<<20), "run"}
		if detach {
			args = append(args, "--detach")
		}
		cmd := exec.Command(runscPath(), append(args, "--bundle", bundle, id)...)
		if detach {
			// The sandbox inherits stdout and stderr: a file, not a pipe.
			logf, err := os.Create(filepath.Join(bundle, "console.log"))
			if err != nil {
				return err
			}
			defer logf.Close()
			cmd.Stdout, cmd.Stderr = logf, logf
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("runsc run --detach: %w", err)
			}
			if out, err := exec.Command(runscPath(), "--root", root, "delete", "--force", id).CombinedOutput(); err != nil {
				return fmt.Errorf("runsc delete: %w: %s", err, out)
			}
			return os.RemoveAll(bundle)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("runsc run: %w: %s", err, out)
		}
		return os.RemoveAll(bundle)
	}
}

// bareCleanup unmounts the empty network namespace that runsc pins in its
// root directory (shared by its --network=none sandboxes) and removes the
// bare sandboxes' directory.
func bareCleanup() {
	dir := filepath.Join(workDir, "bare")
	for i := 0; i < 100 && unix.Unmount(filepath.Join(dir, "runsc", "null-netns"), unix.MNT_DETACH) == nil; i++ {
	}
	_ = os.RemoveAll(dir)
}

func runscPath() string {
	if p := os.Getenv("WITHRUNTIME_RUNSC"); p != "" {
		return p
	}
	return "/usr/local/bin/runsc"
}
