package agent

import (
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// fakeCheckpoint stands in for /proc/gvisor/checkpoint: reads block until
// the test writes the outcome.
type fakeCheckpoint struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func newFakeCheckpoint() *fakeCheckpoint {
	r, w := io.Pipe()
	return &fakeCheckpoint{r: r, w: w}
}

// checkpointAgent is a test agent whose checkpoint file is fc.
func checkpointAgent(t *testing.T, fc *fakeCheckpoint) (*testAgent, *Server) {
	t.Helper()
	var srv *Server
	a := newTestAgentWith(t, Config{}, func(s *Server) {
		srv = s
		s.ckpt.file = func() (io.ReadCloser, error) { return fc.r, nil }
	})
	// The backstop ends the sandbox (kill -1): never let it fire in a test.
	t.Cleanup(func() { srv.SetLease(time.Time{}) })
	return a, srv
}

// connects reports whether something accepts connections on sock.
func connects(sock string) bool {
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// A checkpoint closes the listener (gVisor cannot save a socket bound on
// the host) before the agent answers, and the agent listens again on the
// same path once the checkpoint is over. A restored agent gets a lease
// backstop until the host sends the resumed sandbox's lease.
func TestCheckpointRestore(t *testing.T) {
	fc := newFakeCheckpoint()
	a, srv := checkpointAgent(t, fc)
	lease := time.Now().Add(time.Hour)
	srv.SetLease(lease)
	a.call("POST", "/checkpoint", nil, http.StatusNoContent, nil)
	if connects(a.socket) {
		t.Fatal("the agent still accepts connections after answering /checkpoint")
	}
	if _, err := os.Lstat(a.socket); err == nil {
		t.Fatal("the socket file is still there after /checkpoint")
	}
	if at := srv.lease.disarm(); !at.IsZero() {
		t.Fatalf("the lease backstop is still armed (%s) while a checkpoint is pending", at)
	}
	if _, err := fc.w.Write([]byte("restore\n")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the agent to listen again", func() bool { return connects(a.socket) })
	a.call("GET", "/health", nil, http.StatusOK, nil)
	srv.lease.mu.Lock()
	at := srv.lease.at
	srv.lease.mu.Unlock()
	if want := time.Now().Add(restoredLeaseBackstop); at.Before(want.Add(-time.Minute)) || at.After(want.Add(time.Minute)) {
		t.Fatalf("restored lease backstop at %s, want about %s", at, want)
	}
}

// A failed save ("error") or a save this copy survived ("resume") gives
// back the lease the sandbox had.
func TestCheckpointFailedKeepsLease(t *testing.T) {
	fc := newFakeCheckpoint()
	a, srv := checkpointAgent(t, fc)
	lease := time.Now().Add(time.Hour).Truncate(time.Second)
	srv.SetLease(lease)
	a.call("POST", "/checkpoint", nil, http.StatusNoContent, nil)
	if _, err := fc.w.Write([]byte("error\n")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the agent to listen again", func() bool { return connects(a.socket) })
	a.call("GET", "/health", nil, http.StatusOK, nil)
	srv.lease.mu.Lock()
	at := srv.lease.at
	srv.lease.mu.Unlock()
	if !at.Equal(lease) {
		t.Fatalf("lease after a failed save: %s, want %s", at, lease)
	}
}

// Without a checkpoint file (not under gVisor) the agent refuses and keeps
// serving.
func TestCheckpointUnsupported(t *testing.T) {
	a := newTestAgentWith(t, Config{}, func(s *Server) {
		s.ckpt.file = func() (io.ReadCloser, error) { return nil, os.ErrNotExist }
	})
	a.call("POST", "/checkpoint", nil, http.StatusConflict, nil)
	a.call("GET", "/health", nil, http.StatusOK, nil)
}

// A checkpoint that never comes does not leave the agent unreachable.
func TestCheckpointThatNeverComes(t *testing.T) {
	fc := newFakeCheckpoint()
	old := checkpointWait
	checkpointWait = 100 * time.Millisecond
	t.Cleanup(func() { checkpointWait = old })
	a, _ := checkpointAgent(t, fc)
	a.call("POST", "/checkpoint", nil, http.StatusNoContent, nil)
	waitUntil(t, "the agent to listen again", func() bool { return connects(a.socket) })
	a.call("GET", "/health", nil, http.StatusOK, nil)
}
