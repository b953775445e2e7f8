package itest

// A Dockerfile build whose RUN installs a package from this host's Python
// package index, through the build's allow list (the index's host names are
// read from this host's pip configuration, never written in code; see
// registryHosts in packages_test.go).

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/server"
)

// TestDockerfilePipFromIndex: FROM base, ENV, WORKDIR, COPY and a RUN pip
// install from the package index build a template whose sandboxes (with
// no network) import the package, see the env and the copied file. The
// RUN sandbox reaches the index only because the build allows its hosts
// (with the host's CA bundle trusted, as --sandbox-ca gives it): the same
// Dockerfile without ?allow fails at its RUN, with pip's output, and
// leaves no template.
func TestDockerfilePipFromIndex(t *testing.T) {
	pip, _, _ := registryHosts(t)
	s := newHostileScene(t)
	withBase(t, s.tdir)
	e := newEnv(t, withTemplatesDir(s.tdir), func(c *server.Config) {
		c.Egress.SandboxCAs = []string{"/etc/ssl/certs/ca-certificates.crt"}
	})
	// iniconfig: small, pure Python, and not in the base template.
	if res := e.sh(e.create(api.CreateSandboxRequest{}).ID, "python3 -c 'import iniconfig' 2>&1"); res.ExitCode == 0 {
		t.Fatalf("the base template already has iniconfig, so the build would prove nothing: %+v", res)
	}
	dockerfile := `FROM base
ENV GREETING="hello from ENV" PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /srv/app
COPY app.py ./
RUN pip install --no-cache-dir --break-system-packages --retries 1 --timeout 20 iniconfig && python3 -c 'import iniconfig; print("installed", iniconfig.__name__)'
`
	ctx := contextTar(t, map[string]string{"Dockerfile": dockerfile, "app.py": "import iniconfig\nprint('app sees', iniconfig.__name__)\n"})

	start := time.Now()
	evs, status, data := e.buildDockerfile("withpkg", url.Values{"allow": pip}, ctx)
	if status != 200 || len(evs) == 0 || evs[len(evs)-1].Type != "template" {
		t.Fatalf("build with the index allowed: %d %s", status, data)
	}
	t.Logf("build with the index allowed: %s", time.Since(start).Round(time.Millisecond))
	var out strings.Builder
	for _, ev := range evs {
		out.WriteString(ev.Data)
	}
	if !strings.Contains(out.String(), "installed iniconfig") {
		t.Errorf("RUN output: %q", out.String())
	}
	tpl := evs[len(evs)-1].Template
	if tpl.Origin == nil || tpl.Origin.WorkingDir != "/srv/app" {
		t.Errorf("template origin: %+v", tpl.Origin)
	}

	sb := e.create(api.CreateSandboxRequest{Template: "withpkg"})
	res := e.sh(sb.ID, `echo "$GREETING"; python3 /srv/app/app.py; python3 -c 'import iniconfig, sys; print(iniconfig.__file__.startswith(sys.prefix) or iniconfig.__file__)'; id -un`)
	want := "hello from ENV\napp sees iniconfig\nTrue\nuser\n"
	if res.Stdout != want {
		t.Errorf("in the built template:\n%s\nwant:\n%s\n(stderr %s)", res.Stdout, want, res.Stderr)
	}

	// Without the allow list the RUN has no network.
	start = time.Now()
	evs, status, data = e.buildDockerfile("nonet", nil, ctx)
	if status != 200 || len(evs) == 0 {
		t.Fatalf("build without network: %d %s", status, data)
	}
	last := evs[len(evs)-1]
	if last.Type != "error" || last.Error.Code != "bad_request" || !strings.Contains(last.Error.Message, "line 5") ||
		!strings.Contains(last.Error.Message, "exit code 1") || !strings.Contains(last.Error.Message, "Failed to establish a new connection") {
		t.Errorf("build without network: last event %+v", last)
	}
	t.Logf("build without network failed in %s", time.Since(start).Round(time.Millisecond))
	if left := s.leftovers(t); strings.Join(left, ",") != "base,withpkg" {
		t.Errorf("templates directory: %v", left)
	}
}
