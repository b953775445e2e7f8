package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"os"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/sdk/go/wire"
)

// handleUpdateContext is PATCH /contexts/{contextId} {cwd}: the context's
// kernel moves to cwd. A running kernel changes directory in a silent
// execution (no output, no history, no execution count), with the slot
// held so no cell runs meanwhile; one not running starts there next time,
// as a restarted one does. A default context need not exist yet: in a
// sandbox with kernels it is made with that cwd, so the sandbox's first
// cell runs there; Python's ("default") has its kernel started in the
// background, another language's ("default-<language>") at its first cell
// (E2B's code interpreter starts its kernels in the user's home; the E2B
// facade asks for that, Runtime's own default stays /workspace).
func (s *Server) handleUpdateContext(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.UpdateContextRequest
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	if req.Cwd == "" {
		return badRequest("cwd is missing: say where the context's kernel is to work")
	}
	cwd, err := s.resolve(req.Cwd)
	if err != nil {
		return err
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return badRequest("cwd %s is not an existing directory; create it first (POST /files/mkdir)", cwd)
	}
	id := r.PathValue("contextId")
	c, err := s.context(id)
	if err != nil {
		lang, isDefault := defaultContextLanguage(id)
		if !isDefault {
			return err
		}
		if !languages[wire.LanguagePython].isInstalled() {
			return errNoKernels
		}
		c, made, err := s.addContext(id, agentapi.CreateContextRequest{Language: lang.name, Cwd: cwd})
		if err != nil {
			return err
		}
		if made {
			if lang.name == wire.LanguagePython {
				go s.startIdle(c)
			} // another language's kernel starts at its first cell, as its default context's does
			writeJSON(w, http.StatusOK, c.info())
			return nil
		}
		// Made meanwhile by a first cell: move it as any other.
		return s.moveContext(w, r, c, cwd)
	}
	return s.moveContext(w, r, c, cwd)
}

// moveContext moves c's kernel to cwd (handleUpdateContext) and answers c.
func (s *Server) moveContext(w http.ResponseWriter, r *http.Request, c *codeContext, cwd string) error {
	acct, err := s.lookupAccount(c.user)
	if err != nil {
		return err
	}
	if !canEnter(cwd, acct) {
		return badRequest("cwd %s is not a directory the kernel's user %q (uid %d) can enter; choose another", cwd, c.user, acct.Uid)
	}
	if err := c.acquire(r.Context()); err != nil {
		return err
	}
	defer c.release()
	c.mu.Lock()
	k, deleted := c.k, c.deleted
	c.mu.Unlock()
	if deleted {
		return notFound("context %s was deleted", c.id)
	}
	if k != nil && !k.exited() && c.language != wire.LanguagePython {
		// Only Python's kernel is moved in place (a silent os.chdir).
		return conflict("the %s kernel of context %s is running; a running kernel moves only in Python: create a context with this cwd instead", c.language, c.id)
	}
	if k != nil && !k.exited() {
		quoted, _ := json.Marshal(cwd) // a JSON string is a Python string literal
		if lost := s.runSilent(c, k, "__import__('os').chdir("+string(quoted)+")"); lost {
			return conflict("the kernel of context %s was lost while it changed directory; the next call starts a new one", c.id)
		}
	}
	c.mu.Lock()
	c.cwd = cwd
	c.mu.Unlock()
	writeJSON(w, http.StatusOK, c.info())
	return nil
}

// startIdle starts c's kernel when no call is using it (a context made
// without a call, which the first call would otherwise start).
func (s *Server) startIdle(c *codeContext) {
	ctx, cancel := context.WithTimeout(context.Background(), kernelStartTimeout)
	defer cancel()
	if err := c.acquire(ctx); err != nil {
		return
	}
	defer c.release()
	if _, err := s.kernelOf(ctx, c); err != nil {
		s.log.Warn("starting a context's kernel", "context", c.id, "err", err)
	}
}
