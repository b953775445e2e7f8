package itest

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/server"
)

// packTypeScript builds and packs sdk/typescript (npm ci, npm pack) and
// installs the tarball in a fresh project; it returns that project.
func packTypeScript(t *testing.T) string {
	t.Helper()
	sdk, err := filepath.Abs("../../sdk/typescript")
	if err != nil {
		t.Fatal(err)
	}
	run := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
		}
		return string(out)
	}
	if _, err := os.Stat(filepath.Join(sdk, "node_modules", "typescript")); err != nil {
		run(sdk, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	}
	packs := t.TempDir()
	out := run(sdk, "npm", "pack", "--silent", "--pack-destination", packs)
	tgz := filepath.Join(packs, strings.TrimSpace(out[strings.LastIndexByte(strings.TrimSpace(out), '\n')+1:]))
	proj := t.TempDir()
	if err := os.WriteFile(filepath.Join(proj, "package.json"), []byte(`{"name":"trial-user","private":true,"type":"module"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run(proj, "npm", "install", "--no-audit", "--no-fund", "--loglevel=error", tgz)
	return proj
}

// TestNpxTrial: `npx withruntime sandbox run --trial -- python3 -c 'print(6
// * 7)'` from the packed TypeScript package, with no key anywhere, prints a
// link and a code, waits while the test approves the code as a trial (as an
// administrator would in the dashboard), saves the key (0600) and prints 42.
func TestNpxTrial(t *testing.T) {
	e := newEnv(t, withLogin(server.LoginConfig{PollInterval: time.Second, TrialHours: 50}))
	proj := packTypeScript(t)
	home := t.TempDir()
	cmd := exec.Command("npx", "--no-install", "withruntime", "sandbox", "run", "--trial", "--", "python3", "-c", "print(6 * 7)")
	cmd.Dir = proj
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WITHRUNTIME_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+home, "WITHRUNTIME_URL="+e.http.URL)
	p := e.startLogin(cmd)
	if !strings.Contains(p.linkLine, e.http.URL+"/ui/device?code="+p.code) {
		t.Errorf("npx printed no approval link; stderr:\n%s", p.stderr.String())
	}
	var req api.DeviceRequest
	e.must(http.StatusOK, "GET", "/v1/device/requests/"+p.code, nil, &req)
	if !req.TrialRequested {
		t.Errorf("the npx login did not ask for a trial: %+v", req)
	}
	e.must(http.StatusNoContent, "POST", "/v1/device/approve",
		api.DeviceApproveRequest{UserCode: p.code, KeyName: "npx-trial", DailyLimitMicros: 1_000_000, Trial: true}, nil)
	if code := p.wait(t, 60*time.Second); code != 0 || p.stdout.String() != "42\n" {
		t.Fatalf("npx withruntime sandbox run --trial exited %d with %q:\n%s", code, p.stdout.String(), p.stderr.String())
	}
	url, key := readUserConfig(t, home)
	if url != e.http.URL || !strings.HasPrefix(key, "wr_") {
		t.Errorf("config file holds url %q key %q", url, key)
	}
}
