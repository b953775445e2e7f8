package e2b

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/template/dockerfile"
)

const hashA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// TestTranslate: E2B's steps become a Dockerfile that Runtime's builder
// parses, with E2B's defaults (user "user" in /home/user), a RUN's user
// for that RUN only, COPY from the upload's place in the context with its
// owner and mode, ENV as build-only ARGs, quoted so that nothing expands.
func TestTranslate(t *testing.T) {
	spec := buildSpec{FromImage: "e2bdev/base", Steps: []buildStep{
		{Type: "RUN", Args: []string{"echo hi > /tmp/x"}},
		{Type: "RUN", Args: []string{"apt-get update", "root"}},
		{Type: "COPY", Args: []string{"app dir/a$b.txt", "./dest/", "", "0755"}, FilesHash: hashA},
		{Type: "ENV", Args: []string{"GREETING", `say "hi" $HOME \n`, "B", "2"}},
		{Type: "WORKDIR", Args: []string{"/srv/app"}},
		{Type: "USER", Args: []string{"root"}},
		{Type: "COPY", Args: []string{"x", "/y", "user", ""}, FilesHash: hashA},
		{Type: "RUN", Args: []string{"line one\nline two"}},
	}}
	tr, err := spec.translate("base")
	if err != nil {
		t.Fatal(err)
	}
	want := `FROM base
USER user
WORKDIR /home/user
RUN echo hi > /tmp/x
USER root
RUN apt-get update
USER user
COPY --chown=user --chmod=0755 ["\"files/` + hashA + `/app dir/a\\$b.txt\"","\"./dest/\""]
ARG GREETING="say \"hi\" \$HOME \\n"
ARG B="2"
WORKDIR "/srv/app"
USER root
COPY --chown=user ["\"files/` + hashA + `/x\"","\"/y\""]
RUN ["/bin/sh","-c","if [ -x /bin/bash ]; then exec /bin/bash -c \"$0\"; fi; exec /bin/sh -c \"$0\"","line one\nline two"]
`
	if tr.dockerfile != want {
		t.Errorf("Dockerfile:\n%s\nwant:\n%s", tr.dockerfile, want)
	}
	if len(tr.hashes) != 1 || tr.hashes[0] != hashA || tr.hashStep[hashA] != 3 {
		t.Errorf("hashes %v, first step %v", tr.hashes, tr.hashStep)
	}
	if tr.steps[1] != 0 || tr.steps[5] != 2 || tr.steps[8] != 3 || tr.steps[14] != 8 {
		t.Errorf("lines to steps: %v", tr.steps)
	}
	f, err := dockerfile.Parse(strings.NewReader(tr.dockerfile))
	if err != nil {
		t.Fatalf("the builder refuses the Dockerfile: %v", err)
	}
	if f.From != "base" || len(f.Steps) != 13 || f.Steps[6].Chmod != 0o755 || f.Steps[6].Chown != "user" || !f.Steps[12].JSON {
		t.Errorf("parsed: %+v", f)
	}
}

// TestTranslateRefuses: what Runtime's builder cannot do is refused by
// name, with the step's number.
func TestTranslateRefuses(t *testing.T) {
	for _, c := range []struct {
		spec buildSpec
		want string
	}{
		{buildSpec{FromImage: "x", Steps: []buildStep{{Type: "ADD", Args: []string{"a", "b"}}}}, `step 1 (ADD a b): the step type "ADD" is not supported`},
		{buildSpec{FromImage: "x", StartCmd: "npm start\x00", ReadyCmd: "true"}, "startCmd holds a NUL byte"},
		{buildSpec{FromImage: "x", Steps: []buildStep{{Type: "RUN", Args: []string{"id", "postgres"}}}}, `step 1 (RUN id postgres): user "postgres": Runtime runs build steps as root or user`},
		{buildSpec{FromImage: "x", Steps: []buildStep{{Type: "COPY", Args: []string{"a", "/b"}, FilesHash: "nothex"}}}, `filesHash "nothex" is not a SHA-256`},
		{buildSpec{FromImage: "x", Steps: []buildStep{{Type: "COPY", Args: []string{"../a", "/b"}, FilesHash: hashA}}}, "must be a path inside the template's file context"},
		{buildSpec{FromImage: "x", Steps: []buildStep{{Type: "COPY", Args: []string{"a", "/b", "", "u+x"}, FilesHash: hashA}}}, `mode "u+x": give an octal mode`},
		{buildSpec{FromImage: "x", Steps: []buildStep{{Type: "ENV", Args: []string{"1A", "x"}}}}, `"1A" is not a variable name`},
		{buildSpec{FromImage: "x", Steps: []buildStep{{Type: "ENV", Args: []string{"A", "two\nlines"}}}}, "holds a newline"},
		{buildSpec{FromImage: "x", Steps: []buildStep{{Type: "ENV", Args: []string{"A"}}}}, "ENV takes names and values in pairs"},
		{buildSpec{FromImage: "x", Steps: []buildStep{{Type: "RUN"}}}, "RUN takes a command"},
	} {
		_, err := c.spec.translate("base")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want %q", c.spec, err, c.want)
		}
	}
	for _, c := range []struct {
		spec buildSpec
		want string
	}{
		{buildSpec{}, "give fromImage or fromTemplate"},
		{buildSpec{FromImage: "a", FromTemplate: "b"}, "not both"},
		{buildSpec{FromImage: "a", FromImageRegistry: []byte(`{"type":"registry","username":"u","password":"p"}`)}, "fromImageRegistry (registry credentials"},
		{buildSpec{FromImage: "/tmp/image.tar"}, "is a path"},
		{buildSpec{FromImage: "UPPER::case"}, "is not a valid reference"},
	} {
		_, err := c.spec.checkFrom()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want %q", c.spec, err, c.want)
		}
	}
	if ref, err := (buildSpec{FromImage: "e2bdev/base"}).checkFrom(); err != nil || ref != "" {
		t.Errorf("E2B's base image: %q %v; want Runtime's base template", ref, err)
	}
	// E2B's names are Docker's: the facade names the registry, as Runtime's
	// builder wants it named; a full name passes as given.
	for given, want := range map[string]string{
		"ubuntu:22.04":                "index.docker.io/library/ubuntu:22.04",
		"python":                      "index.docker.io/library/python:latest",
		"team/app:1":                  "index.docker.io/team/app:1",
		"registry.example:5000/app:2": "registry.example:5000/app:2",
	} {
		if ref, err := (buildSpec{FromImage: given}).checkFrom(); err != nil || ref != want {
			t.Errorf("fromImage %q: %q %v; want %q", given, ref, err, want)
		}
	}
}

// TestTranslateStart: set_start_cmd and set_ready_cmd become the
// template's start, run where E2B runs them: the last WORKDIR (relative
// ones resolved), with the ENV steps' values exported as written (no
// expansion, quotes kept), through sudo when the steps ended as root. The
// wrapped command is run by a real shell here.
func TestTranslateStart(t *testing.T) {
	dir := t.TempDir()
	spec := buildSpec{FromImage: "e2bdev/base", StartCmd: `printf '%s|%s|%s' "$(pwd)" "$NOTE" "$B"`, ReadyCmd: `test -n "$NOTE"`, Steps: []buildStep{
		{Type: "ENV", Args: []string{"NOTE", `it's "$HOME"`, "B", "2"}},
		{Type: "WORKDIR", Args: []string{dir}},
		{Type: "WORKDIR", Args: []string{"sub"}},
	}}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tr, err := spec.translate("base")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "-c", tr.startCmd).CombinedOutput()
	if want := filepath.Join(dir, "sub") + `|it's "$HOME"|2`; err != nil || string(out) != want {
		t.Errorf("start command printed %q (%v); want %q\n%s", out, err, want, tr.startCmd)
	}
	if err := exec.Command("bash", "-c", tr.readyCmd).Run(); err != nil {
		t.Errorf("ready check: %v\n%s", err, tr.readyCmd)
	}
	// A working directory that is gone fails the start, not runs it elsewhere.
	if err := exec.Command("bash", "-c", startContext("true", filepath.Join(dir, "gone"), "user", nil)).Run(); err == nil {
		t.Error("a start in a missing directory ran")
	}

	// Ending as root: the command goes through sudo with the same script.
	spec.Steps = append(spec.Steps, buildStep{Type: "USER", Args: []string{"root"}})
	if tr, err = spec.translate("base"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tr.startCmd, "exec sudo -n -- /bin/sh -c") || !strings.Contains(tr.startCmd, "command -v sudo") {
		t.Errorf("a root start: %s", tr.startCmd)
	}
	// No start, no ready check: nothing (the template is not warm).
	if tr, err = (buildSpec{FromImage: "x"}).translate("base"); err != nil || tr.startCmd != "" || tr.readyCmd != "" {
		t.Errorf("no start: %q %q %v", tr.startCmd, tr.readyCmd, err)
	}
}
