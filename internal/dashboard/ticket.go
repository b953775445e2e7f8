package dashboard

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/store"
)

// Terminal tickets. Every state-changing request of the dashboard proves
// that a page of this dashboard sent it: the session's CSRF token in its
// form, on top of the cross-origin check. A browser's WebSocket cannot carry
// a form or a header of the page's choosing, so the terminal's page first
// POSTs its CSRF token (POST /ui/sandboxes/{id}/terminal) and gets a ticket:
// a random 256-bit token, bound to the session, the sandbox and the
// process, that opens that one terminal once, within ticketTTL. The
// WebSocket's URL carries it (…/terminal?ticket=T). Unlike the CSRF token,
// which lives as long as the session, a ticket that leaks (a proxy's log, a
// history entry) is worth nothing after its first use or 30 s, and never for
// another sandbox, process or session. Only its SHA-256 is stored, in the
// store, so any server sharing the store can take it, and only once.
const (
	// ticketTTL is how long a ticket may wait for its WebSocket.
	ticketTTL = 30 * time.Second
	// maxTicketsPerSession bounds the unused tickets of one session.
	maxTicketsPerSession = 16
	// maxTicketLen is the longest ticket looked up (newToken makes 43
	// characters).
	maxTicketLen = 64
)

// errTicket is the category of every refused ticket; the message says why.
var errTicket = errors.New("terminal ticket refused")

type ticketError struct{ msg string }

func (e *ticketError) Error() string { return e.msg }
func (e *ticketError) Unwrap() error { return errTicket }

func refusedTicket(format string, args ...any) error {
	return &ticketError{msg: fmt.Sprintf(format, args...)}
}

// mintTicket makes a ticket for session s to open the terminal of process
// pid in sandbox id.
func (d *Dashboard) mintTicket(ctx context.Context, s *signed, id string, pid int) (string, error) {
	tok := newToken()
	now := d.cfg.Now()
	err := d.cfg.Store.InsertTerminalTicket(ctx, store.TerminalTicket{Hash: hashToken(tok), SessionHash: hashToken(s.token),
		SandboxID: id, Pid: pid, ExpiresAt: now.Add(ticketTTL)}, now, maxTicketsPerSession)
	if errors.Is(err, store.ErrTooMany) {
		return "", refusedTicket("this session has %d terminal tickets it has not used yet; wait %d s for them to expire, or use them",
			maxTicketsPerSession, int(ticketTTL.Seconds()))
	}
	return tok, err
}

// redeemTicket takes ticket tok (it cannot be used again, whatever the
// outcome) and checks that it was minted for session s, sandbox id and
// process pid, and has not expired. A refusal wraps errTicket.
func (d *Dashboard) redeemTicket(ctx context.Context, tok string, s *signed, id string, pid int) error {
	if tok == "" {
		return refusedTicket("no terminal ticket: open the terminal from the sandbox's page, which asks for one (POST /ui/sandboxes/%s/terminal)", id)
	}
	if len(tok) > maxTicketLen || strings.Trim(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		return refusedTicket("the terminal ticket is not one this dashboard makes")
	}
	t, err := d.cfg.Store.TakeTerminalTicket(ctx, hashToken(tok))
	if errors.Is(err, store.ErrNotFound) {
		return refusedTicket("the terminal ticket is unknown or was used already (each opens one connection); reopen the terminal from the sandbox's page")
	}
	if err != nil {
		return err
	}
	switch {
	case subtle.ConstantTimeCompare([]byte(t.SessionHash), []byte(hashToken(s.token))) != 1:
		return refusedTicket("the terminal ticket belongs to another session")
	case t.SandboxID != id || t.Pid != pid:
		return refusedTicket("the terminal ticket was made for another terminal (sandbox %s, process %d), not sandbox %s process %d", t.SandboxID, t.Pid, id, pid)
	case !d.cfg.Now().Before(t.ExpiresAt):
		return refusedTicket("the terminal ticket expired (a ticket lasts %d s); reopen the terminal from the sandbox's page", int(ticketTTL.Seconds()))
	}
	return nil
}
