package agent

import (
	"context"
	_ "embed" // kernelStartup
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/jupyter"
)

// A kernel is one ipykernel process of a code context, started like any
// command (its own session, as the sandbox user, in the guard's view: a
// kernel that takes the sandbox's memory is the command the guard kills),
// and the agent's connection to it over the Jupyter messaging protocol.
//
// Its connection file and ZeroMQ sockets (ipc transport: unix sockets) live
// in a directory of their own in /tmp, made by the agent (mkdir of a random
// name, so nothing in the sandbox can have prepared it) and then handed to
// the sandbox user, as the kernel binds its sockets there. The agent keeps
// the key and the socket paths in memory and never reads back what the
// kernel (that is, the user's code) may have written there.
type kernel struct {
	lang    *language
	p       *proc
	dir     string
	client  *jupyter.Client
	started time.Time
	stderr  *tailSink

	mu       sync.Mutex
	killedBy string // why the agent killed it on purpose ("" otherwise)
}

// markKilled records why the kernel is about to be killed on purpose, for
// the call it interrupts.
func (k *kernel) markKilled(why string) {
	k.mu.Lock()
	if k.killedBy == "" {
		k.killedBy = why
	}
	k.mu.Unlock()
}

func (k *kernel) killReason() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.killedBy
}

const (
	// kernelStartTimeout bounds a kernel's start, from exec to ready.
	// Measured under gVisor: 1.2-1.8 s for ipykernel 6.17.
	kernelStartTimeout = 60 * time.Second
	// kernelPoll is how often a starting kernel's sockets are looked for.
	kernelPoll = 10 * time.Millisecond
)

// kernelArgv starts ipykernel with the connection file path appended.
// History is off: nothing reads it, and its SQLite thread costs every cell.
var kernelArgv = []string{"python3", "-Xfrozen_modules=off", "-m", "ipykernel_launcher",
	"--HistoryManager.enabled=False", "-f"}

// kernelEnv is added to every kernel's environment: the inline backend
// (ipykernel's default, set so that it holds whatever the sandbox's
// environment says) and no warning from the debugger about frozen modules.
var kernelEnv = map[string]string{
	"MPLBACKEND":                     "module://matplotlib_inline.backend_inline",
	"PYDEVD_DISABLE_FILE_VALIDATION": "1",
}

// kernelStartup runs silently in every kernel before its first cell: the
// display formatters that give a matplotlib figure's result its chart and
// a DataFrame's its columns (kernel_startup.py says how).
//
//go:embed kernel_startup.py
var kernelStartup string

// errNoKernels is the answer in a sandbox without ipykernel.
var errNoKernels = &apiError{status: http.StatusNotImplemented, code: agentapi.CodeNotImplemented,
	msg: "this sandbox has no Jupyter kernel (python3 with ipykernel); create the sandbox from the \"code-interpreter\" template to run code in contexts, or run commands with /exec"}

// startKernel starts a kernel as user ("user" or "root") in cwd with env added
// and waits until it answers. ctx bounds the wait.
func (s *Server) startKernel(ctx context.Context, lang *language, cwd, user string, env map[string]string) (*kernel, error) {
	acct, err := s.lookupAccount(user)
	if err != nil {
		return nil, err
	}
	extra := make(map[string]string, len(lang.env)+len(env))
	for k, v := range lang.env {
		extra[k] = v
	}
	for k, v := range env {
		extra[k] = v
	}
	spec := procSpec{dir: cwd, env: commandEnv(s.environ(), acct, extra), cred: acct.credential()}
	if spec.path, err = lookPath(lang.argv[0], spec.env, cwd); err != nil {
		if lang.name == agentapi.LanguagePython {
			return nil, errNoKernels
		}
		return nil, badRequest("language %q has no kernel in this sandbox (%s: %s is not on PATH)", lang.name, lang.title, lang.argv[0])
	}
	dir, info, err := makeKernelDir(acct, lang)
	if err != nil {
		return nil, err
	}
	spec.args = append(append([]string{}, lang.argv...), filepath.Join(dir, "kernel.json"))
	k := &kernel{lang: lang, dir: dir, started: time.Now(), stderr: newTailSink(8 << 10)}
	if k.p, err = s.start(spec, k.stderr); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, kernelStartTimeout)
	defer cancel()
	if k.client, err = k.connect(ctx, info); err != nil {
		k.kill()
		if lang.name == agentapi.LanguagePython && strings.Contains(k.stderr.String(), "No module named ipykernel") {
			return nil, errNoKernels
		}
		return nil, err
	}
	return k, nil
}

// makeKernelDir makes the kernel's private directory in /tmp with its
// connection file (ipc transport, or tcp on loopback for a kernel that
// has no ipc (Deno); a new key), owned by acct.
func makeKernelDir(acct account, lang *language) (string, jupyter.ConnectionInfo, error) {
	dir, err := os.MkdirTemp("/tmp", ".withruntime-kernel-")
	if err != nil {
		return "", jupyter.ConnectionInfo{}, fmt.Errorf("create the kernel's directory: %w", err)
	}
	info := jupyter.ConnectionInfo{
		Transport: "ipc", IP: filepath.Join(dir, "k"),
		ShellPort: 1, IOPubPort: 2, StdinPort: 3, ControlPort: 4, HBPort: 5,
		Key: jupyter.NewKey(), SignatureScheme: "hmac-sha256", KernelName: lang.name,
	}
	if lang.tcp {
		ports, err := freePorts(5)
		if err != nil {
			os.RemoveAll(dir)
			return "", jupyter.ConnectionInfo{}, fmt.Errorf("find ports for the kernel: %w", err)
		}
		info.Transport, info.IP = "tcp", "127.0.0.1"
		info.ShellPort, info.IOPubPort, info.StdinPort, info.ControlPort, info.HBPort = ports[0], ports[1], ports[2], ports[3], ports[4]
	}
	data, _ := json.Marshal(info)
	fail := func(err error) (string, jupyter.ConnectionInfo, error) {
		os.RemoveAll(dir)
		return "", jupyter.ConnectionInfo{}, fmt.Errorf("write the kernel's connection file: %w", err)
	}
	// Written while the directory is still root's alone (0700), then both
	// handed to the user: the kernel rewrites the file and binds its
	// sockets in the directory.
	f, err := os.OpenFile(filepath.Join(dir, "kernel.json"), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fail(err)
	}
	if err := f.Chown(acct.Uid, acct.Gid); err != nil {
		f.Close()
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := os.Chown(dir, acct.Uid, acct.Gid); err != nil {
		return fail(err)
	}
	return dir, info, nil
}

// freePorts finds n loopback TCP ports free at this moment (held open
// together, so they differ).
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// connect waits for the kernel's shell and IOPub sockets, connects, and
// waits until the kernel answers.
func (k *kernel) connect(ctx context.Context, info jupyter.ConnectionInfo) (*jupyter.Client, error) {
	paths := info.IPCPaths()
	for info.Transport == "ipc" {
		if k.exited() {
			return nil, k.startError("exited while starting")
		}
		if ready(paths[0]) && ready(paths[1]) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, k.startError(fmt.Sprintf("did not open its sockets within %s", kernelStartTimeout))
		case <-time.After(kernelPoll):
		}
	}
	var c *jupyter.Client
	var err error
	for {
		// The socket file exists a moment before it accepts.
		if c, err = jupyter.Dial(ctx, info); err == nil {
			break
		}
		if k.exited() || ctx.Err() != nil {
			return nil, k.startError(fmt.Sprintf("could not be reached (%v)", err))
		}
		time.Sleep(kernelPoll)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-k.p.exited:
			cancel()
		case <-rctx.Done():
		}
	}()
	if err := c.Ready(rctx); err != nil {
		c.Close()
		return nil, k.startError(fmt.Sprintf("did not answer (%v)", err))
	}
	return c, nil
}

// ready reports whether path is a socket.
func ready(path string) bool {
	st, err := os.Lstat(path)
	return err == nil && st.Mode()&os.ModeSocket != 0
}

func (k *kernel) exited() bool {
	select {
	case <-k.p.exited:
		return true
	default:
		return false
	}
}

// waitExit waits up to d for the kernel to exit and reports whether it did.
func (k *kernel) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-k.p.exited:
		return true
	case <-t.C:
		return false
	}
}

// startError explains a kernel that failed to start, with the end of what
// it printed.
func (k *kernel) startError(what string) error {
	msg := fmt.Sprintf("%s %s", k.lang.title, what)
	status, code := http.StatusInternalServerError, agentapi.CodeInternal
	// A kernel killed for memory as it starts often fails its connection a
	// moment before its exit is seen: give the exit a moment, so that the
	// answer says why (409, out of memory) rather than "did not answer".
	if k.waitExit(time.Second) {
		if r := k.p.result(); r.OOMKilled {
			// The sandbox's state, not the server's fault: 409.
			msg += "; it was killed because the sandbox is out of memory (each context's kernel takes its own memory): " +
				"remove a context you no longer need, or create the sandbox with more memoryMiB"
			status, code = http.StatusConflict, agentapi.CodeConflict
		} else {
			msg += fmt.Sprintf(" (exit code %d)", r.ExitCode)
		}
	}
	if tail := strings.TrimSpace(k.stderr.String()); tail != "" {
		msg += "; it printed:\n" + tail
	}
	return &apiError{status: status, code: code, msg: msg}
}

// interrupt sends SIGINT to the kernel's process group: ipykernel raises
// KeyboardInterrupt in the running cell, and `!cmd` children stop too. A
// kernel whose language interrupts by message (Deno) gets an
// interrupt_request on its control channel instead.
func (k *kernel) interrupt() {
	if k.lang.messageInterrupt {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = k.client.Interrupt(ctx) // a kernel that does not stop is killed at the grace's end
		}()
		return
	}
	k.p.mu.Lock()
	defer k.p.mu.Unlock()
	if !k.p.reaped {
		_ = syscall.Kill(-k.p.pid, syscall.SIGINT)
	}
}

// kill kills the kernel's whole tree, closes the connection and removes
// its directory. It returns when the kernel has exited.
func (k *kernel) kill() {
	k.p.signal(syscall.SIGKILL)
	if k.client != nil {
		k.client.Close()
	}
	<-k.p.exited
	os.RemoveAll(k.dir)
}

// tailSink keeps the last bytes a process wrote to either stream.
type tailSink struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

func newTailSink(limit int) *tailSink { return &tailSink{limit: limit} }

func (t *tailSink) write(_ int, p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.limit; over > 0 {
		t.buf = append(t.buf[:0:0], t.buf[over:]...)
	}
}

func (t *tailSink) end(int) {}

func (t *tailSink) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(string(t.buf), "\uFFFD")
}
