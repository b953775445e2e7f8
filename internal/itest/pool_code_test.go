package itest

import (
	"net/http"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/server"
	"withruntime.dev/runtime/internal/template"
)

// A pooled code-interpreter sandbox has its default context's kernel
// started (pandas and matplotlib imported) before it is claimed: the first
// run_code after a claim does not wait for a kernel, and sees the create's
// env.
func TestPoolWarmKernel(t *testing.T) {
	needCodeInterpreter(t)
	e := newEnv(t, func(c *server.Config) {
		c.Pool = sandbox.PoolConfig{Size: 1, Templates: []string{template.CodeInterpreter}}
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		var h api.Health
		e.must(http.StatusOK, "GET", "/v1/health", nil, &h)
		if h.Pool[template.CodeInterpreter].Ready == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool: %+v", h.Pool)
		}
		time.Sleep(100 * time.Millisecond)
	}
	start := time.Now()
	sb := e.create(api.CreateSandboxRequest{Template: template.CodeInterpreter, Env: map[string]string{"FROM_CREATE": "yes"}})
	created := time.Since(start)
	ex := e.code(sb.ID, agentapi.RunCodeRequest{Code: "import os, sys\n('pandas' in sys.modules, os.environ.get('FROM_CREATE'))"})
	first := time.Since(start)
	if got := mainText(t, ex); got != "(True, 'yes')" || ex.ExecutionCount != 1 {
		t.Fatalf("first call in a pooled sandbox: %q %+v", got, ex)
	}
	t.Logf("pooled create %v, create to first run_code result %v (the call itself %d ms)", created, first, ex.DurationMs)
	if ex.DurationMs > 1000 {
		t.Errorf("the first call took %d ms: the kernel was not warm", ex.DurationMs)
	}
	// Commands see the env too, and the kernel's variables start empty.
	if got := mainText(t, e.code(sb.ID, agentapi.RunCodeRequest{Code: "'pd' in globals()"})); got != "False" {
		t.Errorf("warm imports bound a name: %q", got)
	}
}
