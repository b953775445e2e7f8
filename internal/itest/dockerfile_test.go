package itest

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/store"
)

// contextTar is a build context: files by name.
func contextTar(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
	}
	tw.Close()
	return buf.Bytes()
}

// withBase gives a test templates directory the shared base template (a
// symlink: builds never write it).
func withBase(t *testing.T, tdir string) {
	t.Helper()
	if err := os.MkdirAll(tdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(templatesDir, "base"), filepath.Join(tdir, "base")); err != nil {
		t.Fatal(err)
	}
}

func (e *env) buildDockerfile(name string, query url.Values, ctx []byte) ([]api.TemplateEvent, int, []byte) {
	e.t.Helper()
	q := url.Values{"name": {name}, "dockerfile": {"Dockerfile"}}
	for k, v := range query {
		q[k] = v
	}
	status, data := e.do("POST", "/v1/templates?"+q.Encode(), ctx, "Content-Type", api.ContentTypeTar, "Accept", agentapi.ContentTypeNDJSON)
	if status != http.StatusOK {
		return nil, status, data
	}
	var evs []api.TemplateEvent
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var ev api.TemplateEvent
		if err := jsonUnmarshal(line, &ev); err != nil {
			e.t.Fatalf("bad event %q: %v", line, err)
		}
		if ev.Type != agentapi.EventHeartbeat {
			evs = append(evs, ev)
		}
	}
	return evs, status, data
}

// TestDockerfileBuild: FROM base, ARG, ENV, WORKDIR, COPY, a pip install
// of a package from the context, a deletion, USER, and a RUN that points
// /etc/group at a host file build a template whose sandboxes see all of
// it; the base template and the host file are untouched, and nothing of
// the build is left running.
func TestDockerfileBuild(t *testing.T) {
	s := newHostileScene(t)
	withBase(t, s.tdir)
	e := newEnv(t, withTemplatesDir(s.tdir))
	baseDoc := filepath.Join(templatesDir, "base", "rootfs", "usr/share/doc")
	if _, err := os.Stat(baseDoc); err != nil {
		t.Fatalf("base has no /usr/share/doc: %v", err)
	}
	before := s.around(t)
	dockerfile := `FROM base
ARG VERSION=1
ENV GREETING=hello APP_HOME=/srv/app
WORKDIR $APP_HOME
COPY app.py ./
COPY mypkg /src/mypkg/
RUN pip install --quiet --break-system-packages --no-index --no-build-isolation /src/mypkg && echo installed
RUN echo "v$VERSION" > /srv/version && rm -rf /usr/share/doc
RUN ln -sf ` + s.victim + ` /etc/group
USER user
RUN id -un > /home/user/who
`
	ctx := contextTar(t, map[string]string{
		"Dockerfile":              dockerfile,
		"app.py":                  "print('app', 6*7)\n",
		"mypkg/pyproject.toml":    "[build-system]\nrequires = [\"setuptools\"]\nbuild-backend = \"setuptools.build_meta\"\n[project]\nname = \"mypkg\"\nversion = \"0.1\"\n",
		"mypkg/mypkg/__init__.py": "VALUE = 'from mypkg'\n",
	})
	evs, status, data := e.buildDockerfile("built", url.Values{"buildArg": {"VERSION=2"}}, ctx)
	if status != 200 || len(evs) == 0 || evs[len(evs)-1].Type != "template" {
		t.Fatalf("build: %d %s", status, data)
	}
	var out strings.Builder
	var steps []string
	for _, ev := range evs {
		switch {
		case ev.Type == "output":
			out.WriteString(ev.Data)
		case ev.Type == "step" && ev.Done:
			steps = append(steps, fmt.Sprintf("[%.1fs] %s", ev.ElapsedSeconds, ev.Step))
		}
	}
	t.Logf("build steps:\n%s", strings.Join(steps, "\n"))
	if !strings.Contains(out.String(), "installed") {
		t.Errorf("RUN output was not streamed: %q", out.String())
	}
	tpl := evs[len(evs)-1].Template
	if tpl.Origin == nil || tpl.Origin.WorkingDir != "/srv/app" || strings.Join(tpl.Origin.Env, " ") != "GREETING=hello APP_HOME=/srv/app" {
		t.Errorf("template: %s", data[bytes.LastIndexByte(data[:len(data)-1], '\n')+1:])
	}

	sb := e.create(api.CreateSandboxRequest{Template: "built"})
	res := e.sh(sb.ID, `echo "$GREETING $APP_HOME"; python3 /srv/app/app.py; python3 -c 'import mypkg; print(mypkg.VALUE)'; cat /srv/version /home/user/who; ls /usr/share/doc 2>&1 | head -1; id -un`)
	want := "hello /srv/app\napp 42\nfrom mypkg\nv2\nuser\nls: cannot access '/usr/share/doc': No such file or directory\nuser\n"
	if res.Stdout != want {
		t.Errorf("in the built template:\n%s\nwant:\n%s\n(stderr %s)", res.Stdout, want, res.Stderr)
	}
	if _, err := os.Stat(baseDoc); err != nil {
		t.Errorf("the build changed the base template: %v", err)
	}
	if after := s.around(t); after != before {
		t.Errorf("files around the templates directory changed:\n%s\n---\n%s", before, after)
	}
	var list api.SandboxList
	e.must(200, "GET", "/v1/sandboxes?state="+store.StateRunning, nil, &list)
	if len(list.Sandboxes) != 1 || list.Sandboxes[0].ID != sb.ID {
		t.Errorf("running sandboxes after the build: %+v", list.Sandboxes)
	}
}

// TestDockerfileRefused: a failing RUN shows its output and exit code and
// leaves no template and no sandbox; an unsupported instruction is refused
// by name before anything runs.
func TestDockerfileRefused(t *testing.T) {
	s := newHostileScene(t)
	withBase(t, s.tdir)
	e := newEnv(t, withTemplatesDir(s.tdir))
	evs, status, data := e.buildDockerfile("failing", nil, contextTar(t, map[string]string{
		"Dockerfile": "FROM base\nRUN echo first\nRUN echo oops >&2; exit 3\nRUN echo never\n",
	}))
	if status != 200 || len(evs) == 0 {
		t.Fatalf("build: %d %s", status, data)
	}
	last := evs[len(evs)-1]
	if last.Type != "error" || last.Error.Code != "bad_request" || !strings.Contains(last.Error.Message, "line 3") ||
		!strings.Contains(last.Error.Message, "exit code 3") || !strings.Contains(last.Error.Message, "oops") {
		t.Errorf("last event: %+v", last)
	}
	if strings.Contains(string(data), "never") {
		t.Errorf("a step after the failing RUN ran: %s", data)
	}
	var list api.SandboxList
	e.must(200, "GET", "/v1/sandboxes?state="+store.StateRunning, nil, &list)
	if len(list.Sandboxes) != 0 {
		t.Errorf("the build sandbox is still running: %+v", list.Sandboxes)
	}
	if left := s.leftovers(t); strings.Join(left, ",") != "base" {
		t.Errorf("templates directory: %v", left)
	}

	for df, want := range map[string]string{
		"FROM base\nENTRYPOINT [\"python3\"]\n":      "line 2 (ENTRYPOINT [\"python3\"]): ENTRYPOINT is not supported",
		"FROM base\nCOPY missing.txt /x\n":           "COPY missing.txt: no such file or directory in the build context",
		"FROM base\nRUN --network=host true\n":       "the flag --network=host of RUN is not supported",
		"FROM no-such-template-or-image:1\nRUN true": "no-such-template-or-image:1",
	} {
		_, status, data := e.buildDockerfile("refused", nil, contextTar(t, map[string]string{"Dockerfile": df}))
		msg := ""
		if status != 200 {
			msg = errorMessage(t, data)
		} else {
			msg = string(data[bytes.LastIndexByte(data[:len(data)-1], '\n')+1:])
		}
		if !strings.Contains(msg, want) {
			t.Errorf("%q: %d %s\nwant %q", df, status, msg, want)
		}
	}
	if left := s.leftovers(t); strings.Join(left, ",") != "base" {
		t.Errorf("templates directory: %v", left)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// TestCLIDockerfile: `template build NAME -f FILE DIR` sends DIR less what
// its .dockerignore excludes, with a Dockerfile from outside DIR.
func TestCLIDockerfile(t *testing.T) {
	s := newHostileScene(t)
	withBase(t, s.tdir)
	e := newEnv(t, withTemplatesDir(s.tdir))
	dir := t.TempDir()
	for name, body := range map[string]string{
		"app/main.py": "print('hi')\n", "secret.txt": "do not send\n", ".dockerignore": "secret.txt\n*.log\n", "build.log": "x",
	} {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	df := filepath.Join(t.TempDir(), "Dockerfile.custom")
	os.WriteFile(df, []byte("FROM base\nARG WHO\nCOPY . /ctx/\nRUN echo \"built by $WHO\" > /ctx/by\n"), 0o644)
	r := e.cli(nil, "template", "build", "clibuilt", "-f", df, "--build-arg", "WHO=cli", dir)
	if r.code != 0 || !strings.Contains(r.stderr, "template clibuilt built") {
		t.Fatalf("build: %+v", r)
	}
	if r := e.cli(nil, "sandbox", "run", "--template", "clibuilt", "--", "cd /ctx && ls -A | sort | tr '\\n' ' ' && cat by"); r.stdout != ".dockerignore app by built by cli\n" {
		t.Errorf("the context in the template: %+v", r)
	}
}
