package itest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	withruntime "withruntime.dev/runtime/sdk/go"
)

// The Go SDK's template methods against a real server, in a templates
// directory of the test's own.

// TestSDKTemplates: a `docker save` tarball and an OCI layout on this
// machine become templates through CreateTemplate (read and uploaded by
// the SDK), whose sandboxes run /bin/sh; a Dockerfile and its context
// become one through BuildTemplate with its RUN output as progress; a
// taken name and a delete while a sandbox runs are ErrConflict; deleted
// templates are gone.
func TestSDKTemplates(t *testing.T) {
	tdir := filepath.Join(t.TempDir(), "templates")
	withBase(t, tdir)
	e := newEnv(t, withTemplatesDir(tdir))
	c := e.sdkClient()
	ctx := context.Background()
	start := time.Now()
	lap := func(what string) {
		t.Logf("%s: %s", what, time.Since(start).Round(time.Millisecond))
		start = time.Now()
	}

	img := imageOf(t, v1.Config{Env: []string{"GREETING=hi"}}, dashLayer(t))
	dir := t.TempDir()
	tarPath := filepath.Join(dir, "dash.tar")
	if err := tarball.WriteToFile(tarPath, mustTag(t, "example.test/dash:1"), img); err != nil {
		t.Fatal(err)
	}
	lp, err := layout.Write(filepath.Join(dir, "oci"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"})); err != nil {
		t.Fatal(err)
	}

	var steps []string
	progress := func(ev withruntime.TemplateEvent) {
		if ev.Type == "step" && ev.Done {
			steps = append(steps, ev.Step)
		}
	}
	for name, ref := range map[string]string{"sdk-tar": tarPath, "sdk-layout": "oci-layout:" + filepath.Join(dir, "oci")} {
		steps = nil
		tpl, err := c.CreateTemplate(ctx, name, ref, progress)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if tpl.Name != name || tpl.Origin == nil || tpl.Origin.Shell != "/bin/sh" || tpl.Origin.Image != ref ||
			strings.Join(tpl.Origin.Env, " ") != "GREETING=hi" || tpl.SizeBytes == 0 {
			t.Errorf("%s: %+v %+v", ref, tpl, tpl.Origin)
		}
		if len(steps) == 0 {
			t.Errorf("%s: no progress", ref)
		}
		sbx, err := c.Create(ctx, withruntime.Options{Template: name})
		if err != nil {
			t.Fatal(err)
		}
		res, err := sbx.Exec(ctx, withruntime.ExecRequest{Argv: []string{"/bin/sh", "-c", "echo ok $GREETING"}})
		if err != nil || res.Stdout != "ok hi\n" {
			t.Errorf("%s: /bin/sh: %+v %v", name, res, err)
		}
		if err := c.DeleteTemplate(ctx, name); !errors.Is(err, withruntime.ErrConflict) || !strings.Contains(err.Error(), sbx.ID()) {
			t.Errorf("delete while a sandbox uses it: %v", err)
		}
		sbx.Close()
		lap(ref)
	}
	if _, err := c.CreateTemplate(ctx, "sdk-tar", tarPath, nil); !errors.Is(err, withruntime.ErrConflict) {
		t.Errorf("a taken name: %v", err)
	}
	if _, err := c.CreateTemplate(ctx, "sdk-bad", filepath.Join(dir, "oci", "index.json")+".tar", nil); !errors.Is(err, withruntime.ErrNotFound) {
		t.Errorf("a missing tarball: %v", err)
	}
	bad := filepath.Join(dir, "bad.tar")
	os.WriteFile(bad, []byte("not a tarball"), 0o644)
	if _, err := c.CreateTemplate(ctx, "sdk-bad", bad, nil); !errors.Is(err, withruntime.ErrBadRequest) || !strings.Contains(err.Error(), "docker save") {
		t.Errorf("a bad tarball: %v", err)
	}

	// A Dockerfile build: the context less .dockerignore, RUN output as progress.
	bctx := t.TempDir()
	for name, body := range map[string]string{"app/main.sh": "echo built app\n", "secret.txt": "no\n", ".dockerignore": "secret.txt\n",
		"Dockerfile": "FROM base\nARG WHO\nENV APP=/srv/app\nCOPY . /srv/app/\nRUN echo \"building for $WHO\" && echo $WHO > /srv/app/who\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(bctx, name)), 0o755)
		os.WriteFile(filepath.Join(bctx, name), []byte(body), 0o644)
	}
	var output strings.Builder
	tpl, err := c.BuildTemplate(ctx, "sdk-built", withruntime.DockerfileBuild{Context: bctx, BuildArgs: map[string]string{"WHO": "sdk"}},
		func(ev withruntime.TemplateEvent) { output.WriteString(ev.Data) })
	if err != nil {
		t.Fatal(err)
	}
	lap("build")
	if !strings.Contains(output.String(), "building for sdk") {
		t.Errorf("RUN output: %q", output.String())
	}
	sbx, err := c.Create(ctx, withruntime.Options{Template: tpl.Name})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sbx.Run(ctx, `sh $APP/app/main.sh; cat $APP/who; ls -A $APP | tr '\n' ' '`)
	if err != nil || res.Stdout != "built app\nsdk\n.dockerignore Dockerfile app who " {
		t.Errorf("in the built template: %+v %v", res, err)
	}
	sbx.Close()
	lap("sandbox of the build")
	_, err = c.BuildTemplate(ctx, "sdk-failed", withruntime.DockerfileBuild{Context: bctx, DockerfileContent: "FROM base\nRUN echo oops; exit 4\n"}, nil)
	if !errors.Is(err, withruntime.ErrBadRequest) || !strings.Contains(err.Error(), "exit code 4") || !strings.Contains(err.Error(), "oops") {
		t.Errorf("a failing RUN: %v", err)
	}

	lap("failing build")
	list, err := c.ListTemplates(ctx)
	var names []string
	for _, t := range list {
		names = append(names, t.Name)
	}
	// base is the test's link to the shared base template, listed like any
	// other; only the three made here are deleted.
	if err != nil || strings.Join(names, ",") != "base,sdk-built,sdk-layout,sdk-tar" {
		t.Errorf("list: %v %v", names, err)
	}
	for _, name := range []string{"sdk-built", "sdk-layout", "sdk-tar"} {
		if err := c.DeleteTemplate(ctx, name); err != nil {
			t.Error(err)
		}
		if _, err := c.GetTemplate(ctx, name); !errors.Is(err, withruntime.ErrNotFound) {
			t.Errorf("get after delete: %v", err)
		}
	}
	if err := c.DeleteTemplate(ctx, "sdk-tar"); !errors.Is(err, withruntime.ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
}
