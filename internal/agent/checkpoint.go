package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Checkpoints (pause and resume). The host pauses a sandbox by saving it
// whole with gVisor's checkpoint (runsc checkpoint) and resumes it with
// runsc restore, which brings back every process with its memory. gVisor
// cannot save a socket bound on the host (the agent's listener, made by
// runsc --host-uds=create: "Cannot save endpoint with bound host socket"),
// so the host first asks the agent (POST /checkpoint) to let go of it:
//
//  1. the agent opens gVisor's /proc/gvisor/checkpoint, which becomes
//     readable once the next checkpoint is over and then says how it went:
//     "resume" (saved, and this copy runs on), "restore" (this is a copy
//     restored from the image) or "error" (the save failed; this copy runs
//     on);
//  2. it disarms its lease backstop (a sandbox paused at its lease end must
//     not end itself when it is restored), closes its listener (which also
//     removes the socket file), and answers;
//  3. after the checkpoint it listens on the same path again and re-arms
//     the backstop: the lease it had on "resume" and "error", and
//     restoredLeaseBackstop from now on "restore", until the host sends the
//     lease of the resumed sandbox (POST /configure).
//
// Connections that are open at the save are closed by gVisor; an exec whose
// connection closes is killed as when its client goes away. Background
// processes keep running and are saved with the sandbox.

// checkpointFile is gVisor's checkpoint notification file.
const checkpointFile = "/proc/gvisor/checkpoint"

// restoredLeaseBackstop is the lease backstop of a sandbox just restored
// from a checkpoint, until the host sends its new lease end (which the
// host does right after the restore).
const restoredLeaseBackstop = 5 * time.Minute

// checkpointWait bounds how long the agent stays without a listener
// waiting for a checkpoint the host asked for: a host that died between
// asking and checkpointing must not leave the sandbox unreachable. The save
// stops every task, the agent's timers included, so this only has to cover
// the moment between the answer and the start of the save.
var checkpointWait = 10 * time.Second

// Checkpoint outcomes read from checkpointFile.
const (
	checkpointResumed  = "resume"
	checkpointRestored = "restore"
	checkpointFailed   = "error"
)

// checkpointer holds the agent's listener and a pending checkpoint.
type checkpointer struct {
	// file opens checkpointFile; tests replace it.
	file func() (io.ReadCloser, error)

	mu      sync.Mutex
	ln      net.Listener
	pending io.ReadCloser // checkpointFile while a checkpoint is pending
	lease   time.Time     // the lease end to re-arm after a failed save
}

func (c *checkpointer) setListener(ln net.Listener) {
	c.mu.Lock()
	c.ln = ln
	c.mu.Unlock()
}

// takePending returns the pending checkpoint's file, if any, and forgets it.
func (c *checkpointer) takePending() (io.ReadCloser, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, lease := c.pending, c.lease
	c.pending = nil
	return f, lease
}

// handleCheckpoint prepares the sandbox for a checkpoint: see above. It
// answers 204 once the listener is closed; a second call while one is
// pending is a conflict.
func (s *Server) handleCheckpoint(w http.ResponseWriter, r *http.Request) error {
	c := &s.ckpt
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending != nil {
		return conflict("a checkpoint is already pending")
	}
	if c.ln == nil {
		return conflict("the agent does not serve on a listener it can close")
	}
	open := c.file
	if open == nil {
		open = func() (io.ReadCloser, error) { return os.Open(checkpointFile) }
	}
	f, err := open()
	if err != nil {
		return conflict("this sandbox cannot be checkpointed: %v", err)
	}
	c.pending = f
	c.lease = s.lease.disarm()
	_ = c.ln.Close()
	c.ln = nil
	// The connection goes with the listener: nothing of it may remain at
	// the save.
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// awaitCheckpoint waits for the checkpoint the host asked for and returns
// a new listener on path. ctx ends the wait (the agent is shutting down).
func (s *Server) awaitCheckpoint(ctx context.Context, f io.ReadCloser, lease time.Time, path string) (net.Listener, error) {
	outcome, err := readCheckpoint(ctx, f, checkpointWait)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		s.log.Warn("no checkpoint came; serving again", "err", err)
		s.lease.set(lease)
	case outcome == checkpointRestored:
		s.log.Info("restored from a checkpoint")
		s.lease.set(time.Now().Add(restoredLeaseBackstop))
		s.restoredKernels()
	default:
		s.log.Info("checkpoint over", "outcome", outcome)
		s.lease.set(lease)
	}
	return Listen(path)
}

// readCheckpoint reads the outcome of the next checkpoint from f (which it
// closes), waiting at most max.
func readCheckpoint(ctx context.Context, f io.ReadCloser, max time.Duration) (string, error) {
	type result struct {
		s   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		b := make([]byte, 16)
		n, err := f.Read(b)
		done <- result{strings.TrimSpace(string(b[:n])), err}
	}()
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case r := <-done:
		f.Close()
		if r.s == "" && r.err != nil {
			return "", fmt.Errorf("reading %s: %w", checkpointFile, r.err)
		}
		return r.s, nil
	case <-ctx.Done():
		f.Close()
		return "", ctx.Err()
	case <-t.C:
		// Closing f does not interrupt a read under way; the reader
		// goroutine ends with the next checkpoint, or never.
		f.Close()
		return "", errors.New("timed out")
	}
}
