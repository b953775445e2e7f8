package itest

// Installing packages inside a sandbox from the registries this host uses,
// through an allow list. This is the one kind of test that reaches past this
// machine: only to the package registries the host's own pip, npm and apt
// are configured for (their names are read from that configuration here,
// never written in code), and only from a sandbox whose allow list names
// them.

import (
	"bufio"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/server"
)

// hostOf returns the host name of a URL, or "".
func hostOf(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// registryHosts reads the host names of the package registries this host's
// pip, npm and apt use, from their own configuration and defaults.
func registryHosts(t *testing.T) (pip []string, npm, apt string) {
	t.Helper()
	out, err := exec.Command("python3", "-c", `
import subprocess
from pip._internal.models.index import PyPI
urls = [PyPI.simple_url, "https://" + PyPI.file_storage_domain + "/"]
cfg = subprocess.run(["python3", "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
for line in cfg.splitlines():
    key, _, value = line.partition("=")
    if key.endswith(("index-url", "extra-index-url")):
        urls.append(value.strip("'\""))
print("\n".join(urls))`).Output()
	if err != nil {
		t.Skipf("this host has no pip to read the package index from: %v", err)
	}
	for _, u := range strings.Fields(string(out)) {
		if h := hostOf(u); h != "" {
			pip = append(pip, h)
		}
	}
	if reg, err := exec.Command("npm", "config", "get", "registry").Output(); err == nil {
		npm = hostOf(string(reg))
	}
	if f, err := os.Open("/etc/apt/sources.list.d/debian.sources"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "URIs:"); ok && apt == "" {
				apt = hostOf(strings.Fields(rest)[0])
			}
		}
	}
	if len(pip) == 0 || npm == "" || apt == "" {
		t.Fatalf("cannot tell this host's registries: pip %v, npm %q, apt %q", pip, npm, apt)
	}
	return pip, npm, apt
}

// TestPackagesInstall: pip install --user, npm install and sudo apt-get
// install work in a sandbox allowed only to this host's registries, with
// the host's CA bundle trusted (--sandbox-ca: on this host's network HTTPS
// passes through an intercepting proxy whose CA is in that bundle). The
// same sandbox with its network off fails fast.
func TestPackagesInstall(t *testing.T) {
	pip, npm, apt := registryHosts(t)
	e := newEnv(t, func(c *server.Config) {
		c.Egress.SandboxCAs = []string{"/etc/ssl/certs/ca-certificates.crt"}
	})
	allow := append(append([]string{}, pip...), npm, apt)
	sb := e.create(api.CreateSandboxRequest{TimeoutSeconds: 600, Network: &api.NetworkPolicy{Allow: allow}})
	run := func(what, command string) agentapi.ExecResult {
		t.Helper()
		start := time.Now()
		res := e.exec(sb.ID, agentapi.ExecRequest{Command: command, TimeoutSeconds: 240})
		t.Logf("%s: exit %d in %s", what, res.ExitCode, time.Since(start).Round(time.Millisecond))
		if res.ExitCode != 0 {
			t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", what, res.ExitCode, res.Stdout, res.Stderr)
		}
		return res
	}
	if res := run("pip", `pip install --user --no-cache-dir --disable-pip-version-check -q iniconfig &&
python3 -c 'import iniconfig; print(iniconfig.__file__)'`); !strings.Contains(res.Stdout, "/home/user/.local/") {
		t.Errorf("iniconfig imported from %q, want the user's site-packages", res.Stdout)
	}
	if res := run("npm", `cd /workspace && npm install --no-audit --no-fund --loglevel=error is-number >/dev/null &&
node -e "console.log(require('is-number')(42))"`); res.Stdout != "true\n" {
		t.Errorf("require('is-number'): %q", res.Stdout)
	}
	if res := run("apt", `sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >/dev/null &&
echo '{"a":42}' | jq .a`); res.Stdout != "42\n" {
		t.Errorf("jq from apt: %q", res.Stdout)
	}
	// Nothing of the host's network setup shows inside.
	if res := run("env", `env | grep -i -E '^(https?|all|no)_proxy=' || true`); res.Stdout != "" {
		t.Errorf("proxy settings inside the sandbox: %q", res.Stdout)
	}

	e.must(200, "PUT", "/v1/sandboxes/"+sb.ID+"/network", api.NetworkPolicy{}, nil)
	start := time.Now()
	res := e.exec(sb.ID, agentapi.ExecRequest{Command: `pip install --user --no-cache-dir --retries 0 --timeout 5 attrs`, TimeoutSeconds: 60})
	if took := time.Since(start); res.ExitCode == 0 || took > 15*time.Second {
		t.Errorf("pip install with the network off: exit %d after %s: %s", res.ExitCode, took, res.Stderr)
	}
	res = e.sh(sb.ID, "curl -sS -m 20 https://"+pip[0]+"/ 2>&1; npm view --fetch-retries=0 is-number version 2>&1 | head -3")
	if !strings.Contains(res.Stdout, "Could not resolve host") || !strings.Contains(res.Stdout, "ENOTFOUND") {
		t.Errorf("with the network off, curl and npm do not say the name does not resolve: %q", res.Stdout)
	}
}
