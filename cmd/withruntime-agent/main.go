// Command withruntime-agent runs as PID 1 inside every sandbox: it serves
// the agentapi protocol on a unix socket and, being PID 1, reaps the
// orphans it inherits (agent.StartReaping). Outside PID 1 (tests on a host)
// it only serves.
//
// Build it static: CGO_ENABLED=0 go build ./cmd/withruntime-agent
//
// decoratemappings=0: the Go runtime does not name its memory mappings
// (prctl PR_SET_VMA), about 23 traps into gVisor's kernel at every start
// and nothing anyone reads in a sandbox (bench/README.md, agent).
//
//go:debug decoratemappings=0
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"withruntime.dev/runtime/internal/agent"
	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/agentauth"
	"withruntime.dev/runtime/internal/version"
)

func main() {
	socket := flag.String("socket", "/run/withruntime/agent.sock", "unix socket to serve the agent API on")
	user := flag.String("user", "user", "user that commands run as and that owns created files")
	workspace := flag.String("workspace", agentapi.Workspace, "directory that relative paths and commands start in")
	memoryBytes := flag.Int64("memory-bytes", 0, "the sandbox's memory size; commands that would take it past this are killed as out of memory (0: not watched)")
	leaseEndsAt := flag.Int64("lease-ends-at", 0, "Unix time (seconds) of the lease end; the sandbox ends itself agent.LeaseGrace after it unless a server stopped it first (0: no end)")
	pidsLimit := flag.Int("pids-limit", 0, "processes and threads per user; a command that keeps the sandbox at this is killed (0: RLIMIT_NPROC)")
	listenTCP := flag.String("listen-tcp", "", "serve on this TCP address (e.g. :7000) instead of -socket, authenticated with -credentials (the Kubernetes driver)")
	credentials := flag.String("credentials", "", "directory of the sandbox's channel credentials (tls.crt, tls.key, token): required with -listen-tcp")
	install := flag.String("install", "", "copy this binary into the directory and exit (the Kubernetes driver's init container)")
	trust := flag.String("trust", "", "PEM file of CA certificates to add to the sandbox's CA bundle at boot (the Kubernetes driver: the Runtime CA of a sandbox with secrets)")
	flag.Parse()

	if *install != "" {
		if err := installSelf(*install); err != nil {
			fmt.Fprintf(os.Stderr, "withruntime-agent: install: %v\n", err)
			os.Exit(1)
		}
		return
	}

	if agent.IsPID1() {
		agent.StartReaping()
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "agent")
	// Only in a sandbox (PID 1 on gVisor's kernel) does the agent change
	// /etc: PID 1 in a PID namespace on a host's filesystem once appended
	// the Runtime CA to the host's own CA bundle.
	inSandbox := agent.IsPID1() && agent.InGVisor()
	if inSandbox {
		// /etc/hosts, resolv.conf and the CA bundle come from the host's
		// read-only directory (see agent.LinkHostFiles).
		if err := agent.LinkHostFiles(agent.HostFilesDir); err != nil {
			log.Error("cannot link the host's files into /etc", "err", err)
		}
	}
	if *trust != "" && inSandbox { // never a host's bundle
		if err := agent.AddTrust(*trust); err != nil {
			log.Error("cannot add the Runtime CA to the sandbox's CA bundle", "err", err)
		}
	}

	srv, err := agent.New(agent.Config{Workspace: *workspace, User: *user, Version: version.Get().String(), Logger: log,
		MemoryBytes: *memoryBytes, PidsLimit: *pidsLimit})
	if err != nil {
		fmt.Fprintf(os.Stderr, "withruntime-agent: %v\n", err)
		os.Exit(2)
	}
	if *leaseEndsAt > 0 {
		srv.SetLease(time.Unix(*leaseEndsAt, 0))
	}
	if err := srv.EnsureWorkspace(); err != nil {
		log.Warn("cannot create the workspace", "workspace", *workspace, "err", err)
	}
	ln, err := listen(*socket, *listenTCP, *credentials)
	if err != nil {
		fmt.Fprintf(os.Stderr, "withruntime-agent: %v\n", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Info("serving", "socket", *socket, "tcp", *listenTCP, "user", *user, "workspace", *workspace, "version", version.Get().String(),
		"memoryBytes", *memoryBytes)
	if agent.IsPID1() {
		// PID 1's standard streams are runsc's console, a file on the host
		// with no size cap. Root inside the sandbox could write into it
		// through /proc/1/fd/1, so the agent lets go of it once booted:
		// boot errors still reach the host; later logs go nowhere.
		if err := detachConsole(); err != nil {
			log.Error("cannot let go of the console", "err", err)
			os.Exit(1)
		}
	}
	if err := srv.Serve(ctx, ln); err != nil {
		log.Error("serve", "err", err)
		os.Exit(1)
	}
}

// detachConsole points the agent's stdin, stdout and stderr at /dev/null.
func detachConsole() error {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	for fd := 0; fd <= 2; fd++ {
		if err := syscall.Dup3(int(null.Fd()), fd, 0); err != nil {
			return fmt.Errorf("dup3 onto %d: %w", fd, err)
		}
	}
	return nil
}

// listen serves on the unix socket, or with tcp set on that TCP address
// behind the sandbox's credentials (agentauth).
func listen(socket, tcp, credentials string) (net.Listener, error) {
	if tcp == "" {
		ln, err := agent.Listen(socket)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", socket, err)
		}
		return ln, nil
	}
	if credentials == "" {
		return nil, errors.New("-listen-tcp needs -credentials: the agent never serves TCP unauthenticated")
	}
	c, err := agentauth.Load(credentials)
	if err != nil {
		return nil, err
	}
	ln, err := agentauth.Listen(tcp, c)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", tcp, err)
	}
	return ln, nil
}

// installSelf copies the running binary to dir/withruntime-agent (mode
// 0755), through a temporary file renamed into place.
func installSelf(dir string) error {
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		return err
	}
	defer self.Close()
	tmp, err := os.CreateTemp(dir, ".agent-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, self); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, "withruntime-agent"))
}
