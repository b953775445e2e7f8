package kubernetes_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// probe is a program that ignores the proxy variables: a plain TCP connect
// to the fake internet's HTTPS port, "connected" on success.
const probe = `python3 -c 'import socket; socket.create_connection(("` + upstreamIP + `", 443), timeout=5); print("connected")'`

// TestNetworkPolicyEnforcedOnRealNode: on the real node, whose
// NetworkPolicy enforcer is kube-network-policies (nftables + nfqueue), the
// packets of a sandbox's pod obey its NetworkPolicy. The fake internet is
// the test's own HTTPS server in a network namespace of its own, routed
// through the node (upstreamIP); nothing else is reached.
//   - internet off: a direct connect to it gets nothing;
//   - an allow list naming its IP: the connect succeeds;
//   - PUT /v1/sandboxes/{id}/network {"internet": false} on that sandbox:
//     new connects get nothing again;
//   - an allow list naming a host (through the egress proxy): curl through
//     the proxy reaches it, but a program ignoring the proxy variables
//     (the probe, curl --noproxy) gets nothing.
func TestNetworkPolicyEnforcedOnRealNode(t *testing.T) {
	if os.Getenv("WITHRUNTIME_K8S_NODE") != "real" {
		t.Skip("needs the real node (scripts/test-kubernetes.sh --real-node): only it enforces NetworkPolicy")
	}
	dir := t.TempDir()
	caFile := fakeInternet(t, dir)
	t.Setenv("SSL_CERT_FILE", caFile)
	s := startServer(t, "--kubernetes-egress-proxy", "10.88.0.1:3128", "--kubernetes-egress-proxy-listen", ":3128")
	api, key := "http://"+s.addr, s.key

	exec := func(id, cmd string) (int, string) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"command": cmd, "timeoutSeconds": 60})
		start := time.Now()
		status, b := call(t, "POST", api+"/v1/sandboxes/"+id+"/exec", key, string(body))
		if status != http.StatusOK {
			t.Fatalf("exec %q: %d %s", cmd, status, b)
		}
		var res struct {
			ExitCode       int
			Stdout, Stderr string
		}
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s $ %s\nexit %d in %v\nstdout: %s\nstderr: %s", id, cmd, res.ExitCode, time.Since(start).Round(time.Millisecond), res.Stdout, res.Stderr)
		return res.ExitCode, res.Stdout
	}
	reaches := func(id string) bool {
		t.Helper()
		code, out := exec(id, probe)
		return code == 0 && strings.Contains(out, "connected")
	}

	del := func(id string) {
		t.Helper()
		if status, b := call(t, "DELETE", api+"/v1/sandboxes/"+id, key, ""); status/100 != 2 {
			t.Fatalf("delete %s: %d %s", id, status, b)
		}
	}
	// One sandbox at a time: the node has 2 CPUs.
	off, _ := create(t, s, `{"template": "base", "network": {"internet": false}}`)
	if reaches(off) {
		t.Errorf("sandbox %s with internet off connected to %s", off, upstreamIP)
	}
	del(off)
	allowed, _ := create(t, s, `{"template": "base", "network": {"allow": ["`+upstreamIP+`/32"]}}`)
	if !reaches(allowed) {
		t.Fatalf("sandbox %s whose allow list names %s could not connect to it", allowed, upstreamIP)
	}
	if status, b := call(t, "PUT", api+"/v1/sandboxes/"+allowed+"/network", key, `{"internet": false}`); status != http.StatusOK {
		t.Fatalf("PUT {internet: false}: %d %s", status, b)
	}
	// The enforcer sees the change through its informer: allow it a few
	// seconds, then it must hold.
	start := time.Now()
	for reaches(allowed) {
		if time.Since(start) > 15*time.Second {
			t.Fatalf("sandbox %s still connects to %s 15 s after its allow list was removed", allowed, upstreamIP)
		}
		time.Sleep(time.Second)
	}
	t.Logf("cut off %v after the PUT", time.Since(start).Round(time.Millisecond))
	if reaches(allowed) {
		t.Errorf("sandbox %s connected to %s again after its allow list was removed", allowed, upstreamIP)
	}
	del(allowed)

	// No secret, so the proxy tunnels TLS untouched: the fake internet's
	// certificate is its own CA's, which the sandbox does not trust (-k).
	named, _ := create(t, s, `{"template": "base", "network": {"allow": ["api.example.com"]}}`)
	if code, out := exec(named, `curl -sSk --max-time 30 https://api.example.com/`); code != 0 || !strings.Contains(out, "upstream saw host=api.example.com") {
		t.Errorf("curl through the egress proxy to the allowed host: exit %d %q", code, out)
	}
	if reaches(named) {
		t.Errorf("sandbox %s (host names only) connected to %s ignoring the proxy", named, upstreamIP)
	}
	if code, out := exec(named, `curl -sS --max-time 10 --noproxy '*' --resolve api.example.com:443:`+upstreamIP+` https://api.example.com/`); code == 0 {
		t.Errorf("curl --noproxy to the allowed host's address: exit 0 %q, want nothing", out)
	}

	del(named)
	assertNothingLeft(t, s)
}
