package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// leasePolicy checks a create's or set-timeout's onLeaseEnd and autoResume:
// onEnd "" keeps current; autoResume unset is true exactly when the lease
// end pauses.
func leasePolicy(onEnd string, autoResume *bool, current string) (string, *bool, error) {
	switch onEnd {
	case "":
		onEnd = current
	case store.OnLeaseEndStop, store.OnLeaseEndPause:
	default:
		return "", nil, errs.New(errs.Invalid, "onLeaseEnd must be %q or %q; got %q", store.OnLeaseEndStop, store.OnLeaseEndPause, onEnd)
	}
	if autoResume == nil {
		on := onEnd == store.OnLeaseEndPause
		autoResume = &on
	}
	return onEnd, autoResume, nil
}

// checkPauseMode checks a pause mode: "" is current; store.PauseFull
// always works, store.PauseFilesystem where the driver is a
// driver.FilePauser (errs.NotImplemented otherwise).
func (m *Manager) checkPauseMode(mode, current string) (string, error) {
	switch mode {
	case "":
		if current == "" {
			return store.PauseFull, nil
		}
		return current, nil
	case store.PauseFull:
		return mode, nil
	case store.PauseFilesystem:
		if _, ok := m.driver.(driver.FilePauser); !ok {
			return "", errs.New(errs.NotImplemented, "this server's driver (%s) cannot pause a sandbox with its files alone (mode %q): it is built for the gvisor driver only; pause with mode %q", m.driver.Name(), mode, store.PauseFull)
		}
		return mode, nil
	}
	return "", errs.New(errs.Invalid, "mode must be %q or %q; got %q", store.PauseFull, store.PauseFilesystem, mode)
}

// SetLeasePolicy changes what a sandbox's lease end does (onEnd "" keeps
// it), the mode of a lease-end pause (pauseMode "" keeps it) and whether
// requests resume it while paused (nil: true exactly when the lease end
// pauses). It applies to running and paused sandboxes. Errors:
// errs.Invalid for a bad onEnd or pauseMode, errs.NotImplemented for a
// pause mode the driver lacks, and those of Get; a stopped sandbox as
// Running.
func (m *Manager) SetLeasePolicy(ctx context.Context, id, onEnd, pauseMode string, autoResume *bool) (store.Sandbox, error) {
	sb, err := m.Get(ctx, id)
	if err != nil {
		return sb, err
	}
	if sb.State == store.StateStopped {
		_, err := m.Running(ctx, id)
		return sb, err
	}
	onEnd, autoResume, err = leasePolicy(onEnd, autoResume, sb.OnLeaseEnd)
	if err != nil {
		return sb, err
	}
	if pauseMode, err = m.checkPauseMode(pauseMode, sb.LeasePauseMode); err != nil {
		return sb, err
	}
	if err := m.store.SetLeasePolicy(ctx, id, onEnd, *autoResume, 0); err != nil {
		return sb, err
	}
	if pauseMode != sb.LeasePauseMode {
		if err := m.store.SetLeasePauseMode(ctx, id, pauseMode); err != nil {
			return sb, err
		}
	}
	return m.Get(ctx, id)
}

// pauseAtLeaseEnd pauses a sandbox whose lease ended with onLeaseEnd
// pause, in mode (its lease pause mode). It reports whether the sandbox
// is paused; if not, the caller stops it (the lease has ended either way).
func (m *Manager) pauseAtLeaseEnd(ctx context.Context, id, mode string) bool {
	unlock := m.lockSandbox(id)
	defer unlock()
	if _, err := m.pauseLocked(ctx, id, mode); err != nil {
		m.log.Error("the lease ended and the sandbox could not be paused; stopping it", "sandbox", id, "err", err)
		return false
	}
	m.log.Info("lease ended; paused", "sandbox", id)
	return true
}

// bindRequest ties a request to the sandbox's request context (see
// liveSandbox.interrupt); done releases it.
func bindRequest(req *http.Request, sandboxCtx context.Context) (*http.Request, func()) {
	ctx, cancel := context.WithCancelCause(req.Context())
	stop := context.AfterFunc(sandboxCtx, func() { cancel(context.Cause(sandboxCtx)) })
	return req.WithContext(ctx), func() { stop(); cancel(nil) }
}

// pausedError is the error of a request that a pause or a snapshot
// interrupted, or nil.
func pausedError(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), errSnapshotInFlight) {
		return errs.New(errs.Conflict, "a snapshot of the sandbox was taken while this request ran: its connection to the sandbox closed "+
			"and the command it ran was killed, as when a client goes away (background processes run on); send the request again")
	}
	if !errors.Is(context.Cause(ctx), errPausedInFlight) {
		return nil
	}
	return errs.New(errs.Paused, "the sandbox was paused while this request ran: the command it ran was killed, as when a client goes away "+
		"(background processes are saved with the sandbox and run on when it resumes); resume the sandbox and send the request again")
}

// pausableBody is an agent's answer whose stream a pause may cut: an
// NDJSON stream then ends with an error event (code sandbox_paused), any
// other answer with errs.Paused.
type pausableBody struct {
	rc     io.ReadCloser
	ctx    context.Context
	done   func()
	ndjson bool
	last   byte   // the last byte passed on
	tail   []byte // the error event still to pass on
	ended  bool
}

func (b *pausableBody) Read(p []byte) (int, error) {
	if b.tail != nil {
		n := copy(p, b.tail)
		if b.tail = b.tail[n:]; len(b.tail) == 0 {
			b.tail, b.ended = nil, true
		}
		return n, nil
	}
	if b.ended {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if n > 0 {
		b.last = p[n-1]
	}
	if err == nil || err == io.EOF {
		return n, err
	}
	perr := pausedError(b.ctx)
	if perr == nil {
		return n, err
	}
	if !b.ndjson {
		return n, perr
	}
	code := "sandbox_paused"
	if errors.Is(perr, errs.Conflict) {
		code = agentapi.CodeConflict
	}
	line, _ := json.Marshal(agentapi.Event{Type: "error", Error: &agentapi.Error{Code: code, Message: perr.Error()}})
	if b.last != '\n' && b.last != 0 {
		line = append([]byte{'\n'}, line...)
	}
	b.tail = append(line, '\n')
	if n > 0 {
		return n, nil
	}
	return b.Read(p)
}

func (b *pausableBody) Close() error {
	err := b.rc.Close()
	b.done()
	return err
}
