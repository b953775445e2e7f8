package egress

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"golang.org/x/sys/unix"
	"withruntime.dev/runtime/internal/egress/secrets"
)

// findRunsc returns runsc and the base template's root filesystem. Without
// them the test is skipped, unless WITHRUNTIME_RUNSC is set (as the test
// script sets it), which makes their absence a failure.
func findRunsc(t *testing.T) (runsc, rootfs string) {
	t.Helper()
	runsc = os.Getenv("WITHRUNTIME_RUNSC")
	required := runsc != ""
	if runsc == "" {
		runsc = "/usr/local/bin/runsc"
	}
	dir := os.Getenv("WITHRUNTIME_TEMPLATES_DIR")
	if dir == "" {
		dir = "/var/lib/withruntime/templates"
	}
	rootfs = filepath.Join(dir, "base", "rootfs")
	for _, p := range []string{runsc, filepath.Join(rootfs, "usr/bin/curl")} {
		if _, err := os.Stat(p); err != nil {
			if required {
				t.Fatalf("gVisor end-to-end test needs %s: %v", p, err)
			}
			t.Skipf("gVisor end-to-end test: %s not found (run scripts/install.sh --template)", p)
		}
	}
	return runsc, rootfs
}

// TestGVisorSandbox boots a real gVisor sandbox (a bare OCI bundle, no
// agent) in an attached namespace and runs curl, getent and python inside.
// These are the settings the gVisor driver needs:
//
//	runsc --network=sandbox --overlay2=root:memory run --bundle B ID
//	linux.namespaces: {type: network, path: Attachment.NetnsPath}
//	mount /etc/resolv.conf: bind, ro, from a file holding Attachment.ResolvConf
func TestGVisorSandbox(t *testing.T) {
	runsc, rootfs := findRunsc(t)
	ca, err := secrets.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	upstreamRoots := x509.NewCertPool()
	w := newWorld(t, Policy{Allow: []string{"api.egress.test", "*.site.test"}}, func(c *Config) {
		c.CA, c.UpstreamRoots = ca, upstreamRoots
	})
	upstreamRoots.AppendCertsFromPEM(w.in.caPEM)
	const value = "sk-gvisor-test-5e4d3c2b1a"
	env, err := w.m.SetSecrets(w.sb.att.SandboxID, []Secret{{Name: "API_KEY", Value: value, Hosts: []string{"api.egress.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	// The sandbox's CA bundle: the template's own, the fake internet's CA
	// (standing in for the public roots) and the Runtime CA, mounted over
	// the system store and named by the usual environment variables.
	resolv := filepath.Join(dir, "resolv.conf")
	bundleFile := filepath.Join(dir, "ca-certificates.crt")
	mustWrite(t, resolv, w.sb.att.ResolvConf)
	system, err := os.ReadFile(filepath.Join(rootfs, "etc/ssl/certs/ca-certificates.crt"))
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, bundleFile, string(ca.Bundle(append(system, w.in.caPEM...))))
	procEnv := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8",
		"API_KEY=" + env["API_KEY"]}
	for _, n := range secrets.TrustEnvNames {
		procEnv = append(procEnv, n+"=/etc/ssl/certs/ca-certificates.crt")
	}

	up := w.in.ip.String()
	script := strings.Join([]string{
		`t() { name=$1; shift; s=$(date +%s%N); out=$("$@" 2>&1); rc=$?; e=$(date +%s%N); echo "$name rc=$rc ms=$(( (e-s)/1000000 )) out=$(echo $out | tr '\n' ' ' | cut -c1-160)"; }`,
		`t getent getent hosts api.egress.test`,
		`t getent_denied getent hosts other.test`,
		`t http_allowed curl -sS -m 5 -o /dev/null -w '%{http_code}' http://api.egress.test/`,
		`t https_allowed curl -sS -m 5 -o /dev/null -w '%{http_code}' https://www.site.test/`,
		`t https_denied_name curl -sS -m 5 -o /dev/null -w '%{http_code}' https://other.test/`,
		`t https_denied_resolve curl -sS -m 5 --resolve other.test:443:` + up + ` -o /dev/null -w '%{http_code}' https://other.test/`,
		`t http_ip_literal curl -sS -m 5 -o /dev/null -w '%{http_code}' http://` + up + `/`,
		`t rebind curl -sS -m 5 --resolve rebind.site.test:80:` + up + ` -o /dev/null -w '%{http_code}' http://rebind.site.test/`,
		`t metadata curl -sS -m 5 -o /dev/null -w '%{http_code}' http://169.254.169.254/latest/meta-data/`,
		`t metadata_tls curl -sS -m 5 -k -o /dev/null -w '%{http_code}' https://169.254.169.254/`,
		`t port22 curl -sS -m 5 telnet://` + up + `:22`,
		`t python_allowed python3 -c "import urllib.request as u; print(u.urlopen('http://api.egress.test/', timeout=5).status)"`,
		`t python_denied python3 -c "import urllib.request as u; print(u.urlopen('http://other.test/', timeout=5).status)"`,
		`t secret_curl curl -sS -m 5 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $API_KEY" https://api.egress.test/`,
		`t secret_python python3 -c "import os,urllib.request as u; r=u.Request('https://api.egress.test/', headers={'Authorization':'Bearer '+os.environ['API_KEY']}); print(u.urlopen(r, timeout=5).headers['X-Seen-Authorization'])"`,
		`t node_fetch node -e "fetch('https://api.egress.test/').then(r=>console.log(r.status)).catch(e=>{console.log(String(e.cause&&e.cause.code||e));process.exit(1)})"`,
		`t node_fetch_denied node -e "fetch('https://other.test/').then(r=>console.log(r.status)).catch(e=>{console.log(String(e.cause&&e.cause.code||e));process.exit(1)})"`,
		`t node_lookup node -e "require('dns').lookup('api.egress.test',(e,a)=>{console.log(e?e.code:a);process.exit(e?1:0)})"`,
	}, "\n")

	spec := &specs.Spec{
		Version:  specs.Version,
		Hostname: "sandbox",
		Root:     &specs.Root{Path: rootfs},
		Process: &specs.Process{
			Args: []string{"/bin/bash", "-c", script},
			Env:  procEnv,
			Cwd:  "/",
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777"}},
			{Destination: "/etc/resolv.conf", Type: "bind", Source: resolv, Options: []string{"rbind", "ro"}},
			{Destination: "/etc/ssl/certs/ca-certificates.crt", Type: "bind", Source: bundleFile, Options: []string{"rbind", "ro"}},
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace},
				{Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.MountNamespace},
				{Type: specs.NetworkNamespace, Path: w.sb.att.NetnsPath},
			},
		},
	}
	bundle := filepath.Join(dir, "bundle")
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.MarshalIndent(spec, "", "  ")
	mustWrite(t, filepath.Join(bundle, "config.json"), string(cfg))

	id := "egress-e2e-" + randHex(3)
	root := filepath.Join(dir, "runsc-root")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, runsc, "--root", root, "--network=sandbox", "--overlay2=root:memory",
		"run", "--bundle", bundle, id)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	t.Logf("runsc run took %v\n%s", time.Since(start), stdout.String())
	_ = exec.Command(runsc, "--root", root, "delete", "--force", id).Run()
	// runsc keeps a namespace mounted at <root>/null-netns.
	_ = unix.Unmount(filepath.Join(root, "null-netns"), unix.MNT_DETACH)
	if err != nil {
		t.Fatalf("runsc run: %v\n%s", err, stderr.String())
	}

	results := parseResults(t, stdout.String())
	expect := func(name string, ok func(r result) bool, what string) {
		t.Helper()
		r, found := results[name]
		if !found {
			t.Errorf("%s: no result", name)
			return
		}
		if !ok(r) {
			t.Errorf("%s: %+v, want %s", name, r, what)
		}
		if r.rc != 0 && r.ms >= 2000 {
			t.Errorf("%s: failed after %d ms, want well under 2 s", name, r.ms)
		}
	}
	code := func(c string) func(result) bool {
		return func(r result) bool { return r.rc == 0 && strings.HasPrefix(r.out, c) }
	}
	failed := func(r result) bool { return r.rc != 0 }
	expect("getent", func(r result) bool { return r.rc == 0 && strings.HasPrefix(r.out, up+" ") }, "the upstream address")
	expect("getent_denied", failed, "no address")
	expect("http_allowed", code("200"), "200")
	expect("https_allowed", code("200"), "200")
	expect("https_denied_name", failed, "a resolve failure")
	expect("https_denied_resolve", failed, "a TLS alert")
	expect("http_ip_literal", code("403"), "403 from the proxy")
	expect("rebind", code("403"), "403 from the proxy")
	expect("metadata", code("403"), "403 from the proxy")
	expect("metadata_tls", failed, "a TLS alert")
	expect("port22", func(r result) bool { return r.rc == 7 }, "connection refused (curl exit 7)")
	expect("python_allowed", code("200"), "200")
	expect("python_denied", failed, "an error")
	expect("secret_curl", code("200"), "200")
	expect("secret_python", func(r result) bool { return r.rc == 0 && r.out == "Bearer "+env["API_KEY"] }, "the placeholder echoed back")
	expect("node_fetch", code("200"), "200")
	expect("node_fetch_denied", func(r result) bool { return r.rc != 0 && strings.Contains(r.out, "ENOTFOUND") }, "ENOTFOUND")
	w.in.mu.Lock()
	auths := strings.Join(w.in.auths, "\n")
	w.in.mu.Unlock()
	if !strings.Contains(auths, "api.egress.test Bearer "+value) {
		t.Errorf("the upstream never got the secret; it saw:\n%s", auths)
	}
	if strings.Contains(stdout.String(), value) || strings.Contains(string(cfg), value) {
		t.Error("the secret's value reached the sandbox")
	}
	expect("node_lookup", func(r result) bool { return r.rc == 0 && r.out == up }, "the upstream address")
}

type result struct {
	rc, ms int
	out    string
}

var resultLine = regexp.MustCompile(`^(\S+) rc=(\d+) ms=(\d+) out=(.*)$`)

func parseResults(t *testing.T, s string) map[string]result {
	t.Helper()
	out := map[string]result{}
	for _, line := range strings.Split(s, "\n") {
		m := resultLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		rc, _ := strconv.Atoi(m[2])
		ms, _ := strconv.Atoi(m[3])
		out[m[1]] = result{rc: rc, ms: ms, out: strings.TrimSpace(m[4])}
	}
	return out
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
