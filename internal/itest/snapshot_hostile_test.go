package itest

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// sandboxAddr is the IPv4 address sandbox id's traffic leaves from (asked
// from inside: the source address of a route to the fake internet).
func (e *env) sandboxAddr(id string) string {
	e.t.Helper()
	res := e.sh(id, `python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("198.18.0.1", 9)); print(s.getsockname()[0])'`)
	addr := strings.TrimSpace(res.Stdout)
	if res.ExitCode != 0 || addr == "" {
		e.t.Fatalf("the address of %s: %+v", id, res)
	}
	return addr
}

// TestSnapshotHostile: root inside a sandbox made from a snapshot is in a
// sandbox of its own. It cannot reach its source's or a sibling's address,
// sees none of the source's later files, cannot find or write the
// snapshot's image, and the secret its source used is not in it: the
// snapshot of a sandbox that sent a secret holds only the placeholder (the
// image's bytes are searched for the value), and the placeholder it
// inherited gets no value from the copy's egress proxy. A copy created
// with the secret gets its own placeholder, which works.
func TestSnapshotHostile(t *testing.T) {
	in := newFakeInternet(t)
	e := newEnv(t, withInternet(in))
	const half1, half2 = "sk-snap-2b4d6f", "8a0c1e3g5i7k"
	const value = half1 + half2
	e.must(http.StatusCreated, "POST", "/v1/secrets", api.CreateSecretRequest{Name: "API_KEY", Value: value, Hosts: []string{inetAPI}}, nil)
	allow := &api.NetworkPolicy{Allow: []string{inetAPI}}
	src := e.create(api.CreateSandboxRequest{Network: allow, Secrets: []string{"API_KEY"}, TimeoutSeconds: 600})
	if auths := sendSecret(e, in, src.ID); !strings.Contains(auths, value) {
		t.Fatalf("the source's request with the secret: the upstream saw %q", auths)
	}
	// A process that keeps the placeholder and the TLS session's memory,
	// and a server on every address.
	e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+src.ID+"/processes", agentapi.ExecRequest{
		Command: `python3 -c 'import os,time,urllib.request as u; r=u.Request("https://` + inetAPI + `/", headers={"Authorization":"Bearer "+os.environ["API_KEY"]}); print(u.urlopen(r, timeout=5).status, flush=True); time.sleep(3600)'`}, nil)
	e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+src.ID+"/processes", agentapi.ExecRequest{
		Command: `python3 -m http.server 8001 --bind 0.0.0.0`}, nil)
	waitFor(t, 20*time.Second, "the source's server", func() bool {
		return e.sh(src.ID, curl("http://127.0.0.1:8001/")).Stdout == "200"
	})
	placeholder := strings.TrimSpace(e.sh(src.ID, "echo $API_KEY").Stdout)
	if placeholder == "" || strings.Contains(placeholder, value) {
		t.Fatalf("the source's placeholder: %q", placeholder)
	}

	sn := e.snapshot(src.ID, api.CreateSnapshotRequest{})
	image := filepath.Join(e.dataDir, "gvisor", "snapshots", sn.ID)
	if files := filesHolding(t, image, value); len(files) > 0 {
		t.Errorf("the snapshot's image holds the secret's value in %v", files)
	}
	if files := filesHolding(t, image, placeholder); len(files) == 0 {
		t.Errorf("the image does not hold the placeholder either: the search found nothing it should (image %s)", image)
	}

	// Copies without the secret: the inherited placeholder gets nothing.
	var fr api.ForkResult
	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+src.ID+"/fork", api.ForkRequest{Count: 2, Network: allow}, &fr)
	var copies []string
	for _, f := range fr.Sandboxes {
		if f.Sandbox == nil {
			t.Fatalf("fork: %+v", f.Error)
		}
		copies = append(copies, f.Sandbox.ID)
	}
	e.sh(src.ID, "echo later > /workspace/later")
	srcAddr, c0Addr, c1Addr := e.sandboxAddr(src.ID), e.sandboxAddr(copies[0]), e.sandboxAddr(copies[1])
	t.Logf("addresses: source %s, copies %s %s", srcAddr, c0Addr, c1Addr)
	if srcAddr == c0Addr || c0Addr == c1Addr {
		t.Errorf("a copy has its source's or sibling's address: %s %s %s", srcAddr, c0Addr, c1Addr)
	}
	if got := strings.TrimSpace(e.sh(copies[0], "echo $API_KEY").Stdout); got != placeholder {
		t.Errorf("the copy's inherited variable: %q, want the source's placeholder", got)
	}
	// Without the secret the proxy does not intercept: the copy's TLS goes
	// to the upstream itself, whose test CA no sandbox trusts (-k).
	before := in.seenAuths()
	res := e.sh(copies[0], curl(`-k -H "Authorization: Bearer $API_KEY" https://`+inetAPI+`/`))
	seen := strings.TrimPrefix(in.seenAuths(), before)
	if res.Stdout != "200" || strings.Contains(seen, value) || !strings.Contains(seen, placeholder) {
		t.Errorf("a copy without the secret sends its inherited placeholder: %+v; the upstream saw %q, want the placeholder and never the value", res, seen)
	}
	for _, target := range []string{srcAddr, c1Addr} {
		r := e.rootSh(copies[0], curl("http://"+target+":8001/"))
		if r.Stdout == "200" {
			t.Errorf("copy %s reached %s:8001: %+v", copies[0], target, r)
		}
	}
	// Its own files only; the host's directory read-only; no image inside.
	r := e.rootSh(copies[0], `test -e /workspace/later && echo SEES-LATER; `+
		`touch /run/withruntime/host/x 2>/dev/null && echo WROTE-HOST; `+
		`find / -xdev \( -name pages.img -o -name checkpoint.img -o -name snapshot.json \) 2>/dev/null | head -3; `+
		`for f in /proc/[0-9]*/environ; do tr '\0' '\n' < $f 2>/dev/null; done | grep -cF "`+half1+`" ; true`)
	if strings.Contains(r.Stdout, "SEES-LATER") || strings.Contains(r.Stdout, "WROTE-HOST") || strings.Contains(r.Stdout, ".img") || strings.Contains(r.Stdout, "snapshot.json") {
		t.Errorf("root in a copy: %+v", r)
	}

	// A copy created with the secret gets a placeholder of its own, which
	// the proxy fills.
	withSecret := e.create(api.CreateSandboxRequest{Snapshot: sn.ID, Network: allow, Secrets: []string{"API_KEY"}})
	own := strings.TrimSpace(e.sh(withSecret.ID, "echo $API_KEY").Stdout)
	if own == "" || own == placeholder {
		t.Errorf("a copy with the secret: placeholder %q (the source's %q)", own, placeholder)
	}
	if auths := sendSecret(e, in, withSecret.ID); !strings.Contains(auths, value) {
		t.Errorf("a copy with the secret: the upstream saw %q", auths)
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/snapshots/"+sn.ID, nil, nil)
}
