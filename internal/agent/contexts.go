package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

// contexts are the sandbox's code contexts, each with at most one kernel.
type contexts struct {
	mu   sync.Mutex
	byID map[string]*codeContext
}

func newContexts() *contexts { return &contexts{byID: map[string]*codeContext{}} }

// codeContext is one context. One call at a time runs in it: slot is held
// by the running call (or a kernel start) and queues the others.
type codeContext struct {
	id       string
	language string
	lang     *language
	cwd      string
	user     string // "user" or "root": who the kernel runs as
	env      map[string]string
	created  time.Time
	slot     chan struct{}

	mu       sync.Mutex
	k        *kernel // nil: not started yet, or lost
	state    string
	restarts int
	// notice says why the last kernel was lost; the next call that runs
	// reports it (Execution.Restarted) and clears it.
	notice  string
	deleted bool
	// pendingEnv is env a configure gave while the kernel already ran: set
	// in its os.environ before the next call.
	pendingEnv map[string]string
	// reseed says the sandbox was restored from a checkpoint since the
	// kernel's last call: its random generators are seeded again before
	// the next one (restoredKernels).
	reseed bool
}

func (c *codeContext) acquire(ctx context.Context) error {
	select {
	case c.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *codeContext) release() { <-c.slot }

func (c *codeContext) setState(st string) {
	c.mu.Lock()
	c.state = st
	c.mu.Unlock()
}

func (c *codeContext) info() agentapi.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.state
	if c.k != nil && c.k.exited() {
		st = "dead"
	}
	return agentapi.Context{ID: c.id, Language: c.language, Cwd: c.cwd, User: c.user, State: st,
		CreatedAt: c.created, Restarts: c.restarts}
}

// kernel returns the context's kernel, starting one if there is none (the
// caller holds the slot). A kernel found dead (it exited while idle) is
// lost first, with a notice.
func (s *Server) kernelOf(ctx context.Context, c *codeContext) (*kernel, error) {
	c.mu.Lock()
	k, deleted := c.k, c.deleted
	c.mu.Unlock()
	if deleted {
		return nil, notFound("context %s was deleted", c.id)
	}
	if k != nil && !k.exited() {
		return k, nil
	}
	if k != nil {
		s.loseKernel(c, k, idleExit(s, k))
	}
	c.setState("starting")
	k, err := s.startKernel(ctx, c.lang, c.cwd, c.user, c.env)
	if err == nil && c.lang.startup != "" {
		// A kernel lost here is found dead by the first call.
		s.runSilent(c, k, c.lang.startup)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.state = "dead"
		return nil, err
	}
	if c.deleted {
		go k.kill()
		return nil, notFound("context %s was deleted", c.id)
	}
	c.k, c.state = k, "idle"
	go s.watchKernel(c, k)
	return k, nil
}

// exitReason says how a kernel that exited ended.
func (s *Server) exitReason(k *kernel) string {
	r := k.p.result()
	switch {
	case r.OOMKilled:
		return fmt.Sprintf("killed because the sandbox ran out of memory (%d MiB)", s.memoryBytes.Load()>>20)
	case r.Signal != "":
		return "killed by " + r.Signal
	default:
		return fmt.Sprintf("exit code %d", r.ExitCode)
	}
}

// loseKernel records that k is gone (killed, died) and why, kills what is
// left of it, and starts a replacement in the background so that the next
// call does not wait for it. The caller holds the slot.
func (s *Server) loseKernel(c *codeContext, k *kernel, why string) {
	c.mu.Lock()
	if c.k == k {
		c.k = nil
		c.restarts++
		c.state = "dead"
		c.notice = fmt.Sprintf("The kernel of context %q was restarted before this call because the previous one %s: "+
			"variables, imports and definitions from earlier calls are gone.", c.id, why)
	}
	deleted := c.deleted
	c.mu.Unlock()
	k.kill()
	if deleted {
		return
	}
	go func() {
		if err := c.acquire(context.Background()); err != nil {
			return
		}
		defer c.release()
		c.mu.Lock()
		skip := c.k != nil || c.deleted
		c.mu.Unlock()
		if !skip {
			if _, err := s.kernelOf(context.Background(), c); err != nil {
				s.log.Warn("restarting a kernel", "context", c.id, "err", err)
			}
		}
	}()
}

// watchKernel loses a kernel that exits while no call runs in its
// context (a call in flight sees the exit itself).
func (s *Server) watchKernel(c *codeContext, k *kernel) {
	<-k.p.exited
	select {
	case c.slot <- struct{}{}:
	default:
		return // a call (or a restart) holds the slot and handles it
	}
	defer c.release()
	c.mu.Lock()
	current := c.k == k && !c.deleted
	c.mu.Unlock()
	if current {
		s.loseKernel(c, k, idleExit(s, k))
	}
}

// idleExit says how a kernel ended between calls.
func idleExit(s *Server, k *kernel) string {
	if why := k.killReason(); why != "" {
		return "was stopped because " + why
	}
	return "exited between calls (" + s.exitReason(k) + ")"
}

// newContextID is a context's id: "ctx_" and 16 hex digits.
func newContextID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "ctx_" + hex.EncodeToString(b[:])
}

// add creates a context (id "" for a new random one) or, for the default
// id, returns the existing one.
func (s *Server) addContext(id string, req agentapi.CreateContextRequest) (*codeContext, bool, error) {
	lang, err := languageOf(req.Language)
	if err != nil {
		return nil, false, err
	}
	// Python's absence is found when its kernel starts (a 501 that names
	// the template); another language's is a 400 naming it.
	if lang.name != agentapi.LanguagePython && !lang.isInstalled() {
		return nil, false, badRequest("language %q has no kernel in this sandbox (%s is not installed); create the sandbox from the \"code-interpreter\" template, which has the kernels of %s", req.Language, lang.title, knownLanguages())
	}
	if dl, ok := defaultContextLanguage(id); ok && dl != lang {
		return nil, false, badRequest("context %s is %s's default context, not %s's; omit contextId to run in %s's default context (%s)", id, dl.name, lang.name, lang.name, defaultContextID(lang))
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, false, badRequest("env variable %q is invalid: names must be non-empty without '=' or NUL, values without NUL", k)
		}
	}
	cwd := s.cfg.Workspace
	if req.Cwd != "" {
		if cwd, err = s.resolve(req.Cwd); err != nil {
			return nil, false, err
		}
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return nil, false, badRequest("cwd %s is not an existing directory; create it first (POST /files/mkdir) or omit cwd to start in %s", cwd, s.cfg.Workspace)
	}
	user := defaultUserName
	if req.User == rootUserName {
		user = rootUserName
	}
	acct, err := s.lookupAccount(req.User)
	if err != nil {
		return nil, false, err
	}
	if !canEnter(cwd, acct) {
		return nil, false, badRequest("cwd %s is not a directory the kernel's user %q (uid %d) can enter; choose another, or run the context as \"root\" (user)", cwd, user, acct.Uid)
	}
	s.ctxs.mu.Lock()
	defer s.ctxs.mu.Unlock()
	if id == "" {
		id = newContextID()
	} else if c := s.ctxs.byID[id]; c != nil {
		return c, false, nil
	}
	if len(s.ctxs.byID) >= agentapi.MaxContexts {
		return nil, false, conflict("this sandbox already has %d contexts, the most it may have; delete one (DELETE /contexts/{id}) first", agentapi.MaxContexts)
	}
	c := &codeContext{id: id, language: lang.name, lang: lang, cwd: cwd, user: user, env: req.Env,
		created: time.Now().UTC(), slot: make(chan struct{}, 1), state: "starting"}
	s.ctxs.byID[id] = c
	return c, true, nil
}

func (s *Server) context(id string) (*codeContext, error) {
	s.ctxs.mu.Lock()
	defer s.ctxs.mu.Unlock()
	c := s.ctxs.byID[id]
	if c == nil {
		return nil, notFound("no context %q in this sandbox; list them with GET /contexts, or omit contextId to use the default one", id)
	}
	return c, nil
}

func (s *Server) removeContext(c *codeContext) {
	s.ctxs.mu.Lock()
	if s.ctxs.byID[c.id] == c {
		delete(s.ctxs.byID, c.id)
	}
	s.ctxs.mu.Unlock()
	c.mu.Lock()
	c.deleted = true
	k := c.k
	c.mu.Unlock()
	if k != nil {
		k.markKilled("the context was deleted (DELETE /contexts/{id})")
		k.kill()
	}
}

// closeContexts kills every kernel (the agent is shutting down).
func (s *Server) closeContexts() {
	s.ctxs.mu.Lock()
	all := make([]*codeContext, 0, len(s.ctxs.byID))
	for _, c := range s.ctxs.byID {
		all = append(all, c)
	}
	s.ctxs.mu.Unlock()
	for _, c := range all {
		s.removeContext(c)
	}
}

func (s *Server) handleCreateContext(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.CreateContextRequest
	if err := decodeJSON(r, &req, true); err != nil {
		return err
	}
	c, _, err := s.addContext("", req)
	if err != nil {
		return err
	}
	if err := c.acquire(r.Context()); err != nil {
		return err
	}
	defer c.release()
	if _, err := s.kernelOf(r.Context(), c); err != nil {
		s.removeContext(c)
		return err
	}
	writeJSON(w, http.StatusCreated, c.info())
	return nil
}

func (s *Server) handleListContexts(w http.ResponseWriter, r *http.Request) error {
	s.ctxs.mu.Lock()
	all := make([]*codeContext, 0, len(s.ctxs.byID))
	for _, c := range s.ctxs.byID {
		all = append(all, c)
	}
	s.ctxs.mu.Unlock()
	out := agentapi.ContextList{Contexts: []agentapi.Context{}}
	for _, c := range all {
		out.Contexts = append(out.Contexts, c.info())
	}
	sort.Slice(out.Contexts, func(i, j int) bool { return out.Contexts[i].CreatedAt.Before(out.Contexts[j].CreatedAt) })
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleGetContext(w http.ResponseWriter, r *http.Request) error {
	c, err := s.context(r.PathValue("contextId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c.info())
	return nil
}

func (s *Server) handleDeleteContext(w http.ResponseWriter, r *http.Request) error {
	c, err := s.context(r.PathValue("contextId"))
	if err != nil {
		return err
	}
	s.removeContext(c)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleRestartContext replaces the context's kernel with a new one at
// once, interrupting a call in flight (which reports the kernel lost).
func (s *Server) handleRestartContext(w http.ResponseWriter, r *http.Request) error {
	c, err := s.context(r.PathValue("contextId"))
	if err != nil {
		return err
	}
	c.mu.Lock()
	k := c.k
	c.mu.Unlock()
	if k != nil {
		k.markKilled("the context was restarted (POST /contexts/{id}/restart)")
		k.kill()
	}
	if err := c.acquire(r.Context()); err != nil {
		return err
	}
	defer c.release()
	c.mu.Lock()
	if c.k == k && k != nil {
		c.k = nil
		c.restarts++
	}
	c.notice = "" // asked for: nothing to tell the next call
	c.mu.Unlock()
	if _, err := s.kernelOf(r.Context(), c); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c.info())
	return nil
}

// warmImports are imported into a warmed kernel without binding a name
// (sys.modules only), so the user's first `import pandas as pd` is quick.
const warmImports = "__import__('numpy'); __import__('pandas'); __import__('matplotlib.pyplot')"

// kernelsConfigured hands a claiming create's env to kernels started
// before it (their os.environ gets it before their next call) and, when
// warm, starts the default context and waits until it is ready.
func (s *Server) kernelsConfigured(ctx context.Context, env map[string]string, warm bool) {
	if len(env) > 0 {
		s.ctxs.mu.Lock()
		for _, c := range s.ctxs.byID {
			c.mu.Lock()
			if c.pendingEnv == nil {
				c.pendingEnv = map[string]string{}
			}
			for k, v := range env {
				c.pendingEnv[k] = v
			}
			c.mu.Unlock()
		}
		s.ctxs.mu.Unlock()
	}
	// Only Python's default kernel is warmed: the other languages' start
	// on first use.
	if warm && languages[agentapi.LanguagePython].isInstalled() {
		s.warmKernel(ctx)
	}
}

// warmKernel starts the default context's kernel and imports warmImports.
func (s *Server) warmKernel(ctx context.Context) {
	c, _, err := s.addContext(agentapi.DefaultContextID, agentapi.CreateContextRequest{})
	if err != nil {
		return
	}
	if err := c.acquire(ctx); err != nil {
		return
	}
	defer c.release()
	k, err := s.kernelOf(ctx, c)
	if err != nil {
		s.log.Warn("warming the default kernel", "err", err)
		return
	}
	start := time.Now()
	s.runSilent(c, k, warmImports)
	s.log.Info("default kernel warm", "importSeconds", time.Since(start).Seconds())
}

// reseedCode seeds a kernel's random generators again from the OS
// (Python's random module, and numpy's global one where numpy is
// imported), binding no name: after a restore every copy of a kernel
// would go on from one saved state. Generators a program made itself
// (random.Random(), numpy's default_rng() before the save) are not
// reached (docs/behaviour.md says so).
const reseedCode = "__import__('random').seed(); " +
	"(lambda np: np is not None and np.random.seed())(__import__('sys').modules.get('numpy'))"

// restoredKernels reseeds every context's kernel: the sandbox was just
// restored from a checkpoint (a pause's resume, a snapshot's copy, a warm
// template's create). Each is marked first, so that a call that gets the
// context before the reseed here does it itself (applyPendingEnv), and
// reseeded in the background, so that the first call does not wait for it.
func (s *Server) restoredKernels() {
	s.ctxs.mu.Lock()
	all := make([]*codeContext, 0, len(s.ctxs.byID))
	for _, c := range s.ctxs.byID {
		c.mu.Lock()
		c.reseed = true
		c.mu.Unlock()
		all = append(all, c)
	}
	s.ctxs.mu.Unlock()
	for _, c := range all {
		go func() {
			if err := c.acquire(context.Background()); err != nil {
				return
			}
			defer c.release()
			c.mu.Lock()
			k, reseed := c.k, c.reseed && c.k != nil && !c.deleted
			if reseed {
				c.reseed = false
			}
			c.mu.Unlock()
			if reseed && !k.exited() && c.lang.reseed != "" {
				s.runSilent(c, k, c.lang.reseed)
			}
		}()
	}
}

// applyPendingEnv sets the env a configure gave after k started, and
// reseeds its generators after a restore (the caller holds the slot).
func (s *Server) applyPendingEnv(c *codeContext, k *kernel) {
	c.mu.Lock()
	env, reseed := c.pendingEnv, c.reseed
	c.pendingEnv, c.reseed = nil, false
	c.mu.Unlock()
	if reseed && c.lang.reseed != "" {
		s.runSilent(c, k, c.lang.reseed)
	}
	if len(env) > 0 {
		s.runSilent(c, k, c.lang.setEnv(env, false))
	}
}
