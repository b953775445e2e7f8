package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/driver"
)

// The manager's own calls to a sandbox's agent (clients' requests go
// through internal/api's forwarder instead).

// postAgentVia sends one JSON request to an agent over the connections of
// tr (a one-off connection, or a pooled sandbox's agentConns, kept open)
// and returns the answer's status, the body drained.
func postAgentVia(ctx context.Context, tr http.RoundTripper, path string, in any) (int, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent"+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// configureAgent sends a sandbox's agent its settings: a claimed pooled
// sandbox's environment, a lease end.
func configureAgent(ctx context.Context, h *driver.Handle, conf agentapi.ConfigureRequest) error {
	tr := &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return h.Dial(ctx) },
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	return configureVia(ctx, tr, conf)
}

// configureVia is configureAgent over the connections of tr.
func configureVia(ctx context.Context, tr http.RoundTripper, conf agentapi.ConfigureRequest) error {
	status, err := postAgentVia(ctx, tr, "/configure", conf)
	if err != nil {
		return err
	}
	if status != http.StatusNoContent {
		return fmt.Errorf("agent configure: status %d", status)
	}
	return nil
}

// warmUpCommand runs (warmUpRuns times) in every pooled sandbox before it
// joins the pool.
// The first start of an interpreter in a new gVisor sandbox is slower than
// the next (the sandbox kernel's file and page caches are cold): measured
// here, python3 -c 'print(6*7)' took 100 ms first and 83 ms after. Its CPU
// is used before the claim, so nobody is billed for it.
const warmUpCommand = "command -v python3 >/dev/null 2>&1 && python3 -c pass; true"

// warmUpRuns is how many times warmUpCommand runs. Two runs were tried:
// the first command after a claim came to 0.82-1.01x the same command in
// a sandbox that had run all along (bench/suite claim, paired; 1.22-1.26
// with one), but the pooled create+exec did not gain (paired 1.07, 1.10
// against 0.89, 1.04 with one, interleaved runs) and every refill took
// one python3 longer (3.25-3.35x a cold create against 2.64-3.01x).
const warmUpRuns = 1

// warmUp runs warmUpCommand in a booted sandbox, and has a sandbox with
// Jupyter kernels start its default code context (so that a pooled
// code-interpreter sandbox is ready to run code when claimed: 2-3 s more
// per pooled sandbox, before it joins the pool); a failure only costs the
// claim that speed.
func warmUp(ctx context.Context, tr http.RoundTripper) {
	for range warmUpRuns {
		_, _ = postAgentVia(ctx, tr, "/exec", agentapi.ExecRequest{Command: warmUpCommand, TimeoutSeconds: 10})
	}
	_ = configureVia(ctx, tr, agentapi.ConfigureRequest{WarmKernel: true})
}
