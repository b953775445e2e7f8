// Package testserver starts a real `withruntime serve` for the Go adapters'
// tests (each adapter is a module of its own, so they share this one through
// a replace directive rather than copying it).
package testserver

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Start starts a real `withruntime serve` (from PATH; scripts/install.sh
// installs it) on a free port with its own data directory, with the
// server's defaults (warm pool included), and points the SDK at it
// (WITHRUNTIME_URL, WITHRUNTIME_API_KEY). The server is stopped, and its
// log shown if the test failed, when the test ends. Templates come from
// WITHRUNTIME_TEMPLATES_DIR (default /var/lib/withruntime/templates); base
// must be built.
func Start(t *testing.T) {
	t.Helper()
	bin, err := exec.LookPath("withruntime")
	if err != nil {
		t.Fatalf("withruntime is not on PATH (scripts/install.sh installs it): %v", err)
	}
	templates := os.Getenv("WITHRUNTIME_TEMPLATES_DIR")
	if templates == "" {
		templates = "/var/lib/withruntime/templates"
	}
	dir, err := os.MkdirTemp("/tmp", "wr-adapter-")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	logs := &syncBuffer{}
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data-dir", dir, "--templates-dir", templates, "--no-build")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
		os.RemoveAll(dir)
	})

	url := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("withruntime serve exited: %v\n%s", err, logs.String())
		default:
		}
		if resp, err := http.Get(url + "/v1/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("withruntime serve did not answer /v1/health in 60s\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	key, err := os.ReadFile(filepath.Join(dir, "local.key"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("WITHRUNTIME_URL", url)
	t.Setenv("WITHRUNTIME_API_KEY", strings.TrimSpace(string(key)))
}

// syncBuffer is the server's log, written by exec's copying goroutine and
// read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
