package itest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/server"
)

func withLogin(l server.LoginConfig) option { return func(c *server.Config) { c.Login = l } }

// userCmd is a withruntime command run as a user with no server configured
// but what home's config file and extra say: HOME is home, no WITHRUNTIME_*
// variable is inherited, and the data directory is an empty one of the
// test's (so nothing falls back to the host's server).
func (e *env) userCmd(home string, extra []string, args ...string) *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(buildWithruntime(e.t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WITHRUNTIME_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+home, "WITHRUNTIME_DATA_DIR="+filepath.Join(home, "no-server"))
	cmd.Env = append(cmd.Env, extra...)
	return cmd
}

var userCodeRE = regexp.MustCompile(`approve the code ([A-Z]{4}-[A-Z]{4})`)

// loginProc is a CLI process waiting in a device login.
type loginProc struct {
	cmd      *exec.Cmd
	code     string
	stdout   bytes.Buffer
	stderr   bytes.Buffer
	done     chan error
	linkLine string
}

// startLogin starts cmd and waits for it to print its user code.
func (e *env) startLogin(cmd *exec.Cmd) *loginProc {
	e.t.Helper()
	p := &loginProc{cmd: cmd, done: make(chan error, 1)}
	cmd.Stdout = &p.stdout
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.done
		}
	})
	codes := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			p.stderr.WriteString(line + "\n")
			if strings.Contains(line, "/ui/device?code=") {
				p.linkLine = strings.TrimSpace(line)
			}
			if m := userCodeRE.FindStringSubmatch(line); m != nil && !sent {
				sent = true
				codes <- m[1]
			}
		}
		close(codes)
	}()
	go func() { err := cmd.Wait(); pw.Close(); p.done <- err }()
	select {
	case c, ok := <-codes:
		if !ok {
			e.t.Fatalf("withruntime %v ended without a user code:\n%s", cmd.Args[1:], p.stderr.String())
		}
		p.code = c
	case <-time.After(30 * time.Second):
		e.t.Fatalf("withruntime %v printed no user code in 30 s:\n%s", cmd.Args[1:], p.stderr.String())
	}
	return p
}

// wait waits for the process to end and returns its exit code.
func (p *loginProc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("withruntime %v still running after %s:\n%s", p.cmd.Args[1:], d, p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// readUserConfig reads home's ~/.config/withruntime/config.json and
// checks it is the owner's only.
func readUserConfig(t *testing.T, home string) (url, key string) {
	t.Helper()
	p := filepath.Join(home, ".config", "withruntime", "config.json")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatalf("config file: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %o, want 0600", p, fi.Mode().Perm())
	}
	var fc struct{ URL, APIKey string }
	data, _ := os.ReadFile(p)
	if err := json.Unmarshal(data, &fc); err != nil {
		t.Fatalf("config file %s: %v", data, err)
	}
	return fc.URL, fc.APIKey
}

// TestDeviceLogin: `withruntime login URL` prints a link and a code, an
// administrator approves it (here through the API the dashboard uses), and
// the CLI saves the server and its new key (0600); `sandbox run` then uses
// it and prints 42. `sandbox run --trial` with no key logs in first, asking
// for a trial; a trial key past its sandbox-hours is refused with a 429 that
// says so, and usage shows what is left.
func TestDeviceLogin(t *testing.T) {
	e := newEnv(t, withLogin(server.LoginConfig{PollInterval: time.Second, TrialHours: 2.0 / 3600}),
		withMeterInterval(200*time.Millisecond))
	home := t.TempDir()
	p := e.startLogin(e.userCmd(home, nil, "login", e.http.URL))
	if !strings.Contains(p.linkLine, e.http.URL+"/ui/device?code="+p.code) {
		t.Errorf("login printed no link to the approval page; stderr:\n%s", p.stderr.String())
	}
	var req api.DeviceRequest
	e.must(http.StatusOK, "GET", "/v1/device/requests/"+p.code, nil, &req)
	if req.TrialRequested || !strings.Contains(req.ClientName, "@") {
		t.Errorf("device request %+v", req)
	}
	e.must(http.StatusNoContent, "POST", "/v1/device/approve",
		api.DeviceApproveRequest{UserCode: p.code, KeyName: "laptop", DailyLimitMicros: 5_000_000}, nil)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("login exited %d:\n%s", code, p.stderr.String())
	}
	url, key := readUserConfig(t, home)
	if url != e.http.URL || !strings.HasPrefix(key, "wr_") {
		t.Errorf("config file holds url %q key %q", url, key)
	}
	out, err := e.userCmd(home, nil, "sandbox", "run", "--", "python3", "-c", "print(6*7)").Output()
	if err != nil || string(out) != "42\n" {
		t.Fatalf("sandbox run with the saved key: %q %v", out, err)
	}
	// logout forgets the connection: the next command has no server.
	if out, err := e.userCmd(home, nil, "logout").CombinedOutput(); err != nil || !strings.Contains(string(out), "logged out") {
		t.Errorf("logout: %v %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(home, ".config", "withruntime", "config.json")); !os.IsNotExist(err) {
		t.Errorf("config file still there after logout: %v", err)
	}
	// Approving a used code again: 409 that says so.
	status, body := e.do("POST", "/v1/device/approve", api.DeviceApproveRequest{UserCode: p.code, KeyName: "again", DailyLimitMicros: 1})
	if status != http.StatusConflict {
		t.Errorf("approving a used code: %d %s, want 409", status, body)
	}

	// First run with --trial: login, then the command.
	home2 := t.TempDir()
	p2 := e.startLogin(e.userCmd(home2, []string{"WITHRUNTIME_URL=" + e.http.URL},
		"sandbox", "run", "--trial", "--", "python3", "-c", "print(6 * 7)"))
	e.must(http.StatusOK, "GET", "/v1/device/requests/"+p2.code, nil, &req)
	if !req.TrialRequested || req.TrialHours != 2.0/3600 {
		t.Errorf("trial device request %+v", req)
	}
	e.must(http.StatusNoContent, "POST", "/v1/device/approve",
		api.DeviceApproveRequest{UserCode: p2.code, KeyName: "trial", DailyLimitMicros: 5_000_000, Trial: true}, nil)
	if code := p2.wait(t, 60*time.Second); code != 0 || p2.stdout.String() != "42\n" {
		t.Fatalf("sandbox run --trial exited %d with %q:\n%s", code, p2.stdout.String(), p2.stderr.String())
	}
	_, trialKey := readUserConfig(t, home2)
	as := func(method, path string, body any) outcome {
		t.Helper()
		return e.try(method, path, body, "Authorization", "Bearer "+trialKey)
	}
	// Use up the 2 sandbox-seconds.
	o := as("POST", "/v1/sandboxes", api.CreateSandboxRequest{})
	if o.status != http.StatusCreated {
		t.Fatalf("trial create: %v", o)
	}
	var sb api.Sandbox
	_ = json.Unmarshal(o.body, &sb)
	time.Sleep(2500 * time.Millisecond)
	as("DELETE", "/v1/sandboxes/"+sb.ID, nil)
	o = as("GET", "/v1/usage", nil)
	var rep api.UsageReport
	_ = json.Unmarshal(o.body, &rep)
	if rep.Trial == nil || rep.Trial.LeftHours != 0 || rep.Trial.UsedHours < 2.0/3600 {
		t.Errorf("usage of a used-up trial key: %s", o.body)
	}
	o = as("POST", "/v1/sandboxes", api.CreateSandboxRequest{})
	if o.status != http.StatusTooManyRequests || !strings.Contains(string(o.body), "trial") {
		t.Errorf("create past the trial: %v, want 429 saying the trial is used up", o)
	}
	if code := e.userCmd(home2, []string{"WITHRUNTIME_URL=" + e.http.URL}, "sandbox", "run", "--trial", "--", "true").Run(); code == nil {
		t.Errorf("sandbox run --trial past the trial succeeded")
	}
}
