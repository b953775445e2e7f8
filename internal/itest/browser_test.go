package itest

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/server"
)

// ScreenshotsEnv names a directory where TestDashboardBrowser saves PNG
// screenshots of the main pages (scripts/screenshots.sh sets it to
// docs/screenshots).
const screenshotsEnv = "WITHRUNTIME_SCREENSHOTS"

// findChromium is the Debian chromium (scripts/install.sh installs it).
func findChromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("WITHRUNTIME_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Fatal("chromium not found: install it with `apt-get install -y chromium` (scripts/install.sh does) or set WITHRUNTIME_CHROMIUM")
	return ""
}

// headless is a headless Chromium tab, with the page's log collected.
type headless struct {
	t    *testing.T
	ctx  context.Context
	mu   sync.Mutex
	logs []string
	dir  string // screenshots (empty: none)
}

func newHeadless(t *testing.T) *headless {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(findChromium(t)), chromedp.NoSandbox,
		chromedp.Headless, chromedp.WindowSize(1280, 860), chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	h := &headless{t: t, ctx: ctx, dir: os.Getenv(screenshotsEnv)}
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*cdplog.EventEntryAdded); ok && e.Entry != nil {
			h.mu.Lock()
			h.logs = append(h.logs, string(e.Entry.Level)+" "+string(e.Entry.Source)+": "+e.Entry.Text)
			h.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	return h
}

// do runs actions with a deadline.
func (h *headless) do(what string, d time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		html, _ := chromedp.Run(h.ctx, chromedp.OuterHTML(chromedp.CSS("main")))
		h.t.Fatalf("browser: %s: %v\npage:\n%s", what, err, html)
	}
}

func (h *headless) text(sel string) string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		h.t.Fatalf("browser: text of %s: %v", sel, err)
	}
	return s
}

// shot saves a screenshot of the page as name.png when screenshots are on.
func (h *headless) shot(name string) {
	h.t.Helper()
	if h.dir == "" {
		return
	}
	png, err := chromedp.Run(h.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		h.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(h.dir, 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.dir, name+".png"), png, 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// TestDashboardBrowser drives the dashboard in headless Chromium: sign in
// with a key; a sandbox created through the API appears in the live list
// within 2 s; its page opens and kills it. `withruntime login` (the built
// binary) prints a link and a code; the browser approves it with a name and
// a daily limit; that CLI then runs `sandbox run -- python3 -c
// 'print(6*7)'` with its new key and prints 42; the key is revoked in the
// dashboard and the CLI's next call is refused. No page breaks the CSP.
func TestDashboardBrowser(t *testing.T) {
	e := newEnv(t, withLogin(server.LoginConfig{PollInterval: time.Second, TrialHours: 50}), withMeterInterval(time.Second))
	b := newHeadless(t)
	base := e.http.URL

	// Something to look at on the usage page and in the list.
	warm := e.create(api.CreateSandboxRequest{Metadata: map[string]string{"project": "docs", "run": "warm-up"}})
	e.sh(warm.ID, "python3 -c 'sum(range(3_000_000))'")
	e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+warm.ID+"/processes",
		agentapi.ExecRequest{Command: "python3 -m http.server 8000 --directory /workspace"}, nil)

	b.do("sign in", 20*time.Second,
		chromedp.Navigate(base+"/ui/login"),
		chromedp.WaitVisible(chromedp.CSS("#key")))
	b.shot("login")
	b.do("sign in", 20*time.Second,
		chromedp.SendKeys(chromedp.CSS("#key"), e.key),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("table.list")))

	sb := e.create(api.CreateSandboxRequest{Metadata: map[string]string{"project": "demo", "agent": "browser-test"}})
	created := time.Now()
	b.do("see the new sandbox in the live list", 2*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`a.sbx[href="/ui/sandboxes/`+sb.ID+`"]`)))
	t.Logf("the sandbox appeared in the list %s after its create answered", time.Since(created).Round(time.Millisecond))
	b.shot("sandboxes")

	b.do("open the sandbox page", 10*time.Second,
		chromedp.Navigate(base+"/ui/sandboxes/"+warm.ID),
		chromedp.WaitVisible(chromedp.CSS("#kill")))
	b.shot("sandbox")
	b.do("open the new sandbox from the list", 10*time.Second,
		chromedp.Navigate(base+"/ui/sandboxes"),
		chromedp.Click(chromedp.CSS(`a.sbx[href="/ui/sandboxes/`+sb.ID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#kill")))
	b.do("kill it", 20*time.Second,
		chromedp.Click(chromedp.CSS("#kill")),
		chromedp.WaitVisible(chromedp.CSS("#end-reason")))
	if got := b.text("#state"); got != "stopped" {
		t.Errorf("after kill the page says %q, want stopped", got)
	}
	var after api.Sandbox
	e.must(http.StatusOK, "GET", "/v1/sandboxes/"+sb.ID, nil, &after)
	if after.State != "stopped" {
		t.Errorf("the API says %s after the dashboard's kill", after.State)
	}

	// Device login: the CLI prints the link; the browser approves.
	home := t.TempDir()
	p := e.startLogin(e.userCmd(home, nil, "login", base))
	link := p.linkLine
	if !strings.HasPrefix(link, base+"/ui/device?code=") {
		t.Fatalf("login printed no approval link; stderr:\n%s", p.stderr.String())
	}
	b.do("open the approval link", 10*time.Second,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS("#approve")))
	if got := b.text("#user-code"); got != p.code {
		t.Errorf("approval page shows code %q, the CLI %q", got, p.code)
	}
	b.do("fill the approval", 10*time.Second,
		chromedp.SetValue(chromedp.CSS("#key-name"), "browser-login"),
		chromedp.SetValue(chromedp.CSS("#key-limit"), "3.50"))
	b.shot("device")
	b.do("approve", 10*time.Second,
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS("#device-done")))
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("withruntime login exited %d:\n%s", code, p.stderr.String())
	}
	if _, key := readUserConfig(t, home); !strings.HasPrefix(key, "wr_") {
		t.Fatalf("login saved key %q", key)
	}
	var out, errb strings.Builder
	run := e.userCmd(home, nil, "sandbox", "run", "--", "python3", "-c", "print(6*7)")
	run.Stdout, run.Stderr = &out, &errb
	if err := run.Run(); err != nil || out.String() != "42\n" {
		t.Fatalf("sandbox run with the approved key: %v %q\n%s", err, out.String(), errb.String())
	}

	// Revoke the key in the dashboard: the CLI's next call is refused.
	var keys api.KeyList
	e.must(http.StatusOK, "GET", "/v1/keys", nil, &keys)
	var newKey api.Key
	for _, k := range keys.Keys {
		if k.Name == "browser-login" {
			newKey = k
		}
	}
	if newKey.ID == "" || newKey.DailyLimitMicros != 3_500_000 {
		t.Fatalf("approved key %+v, want name browser-login with a $3.50 daily limit", newKey)
	}
	b.do("open keys", 10*time.Second,
		chromedp.Navigate(base+"/ui/keys"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-key="`+newKey.ID+`"] button`)))
	b.shot("keys")
	b.do("revoke", 10*time.Second,
		chromedp.Click(chromedp.CSS(`tr[data-key="`+newKey.ID+`"] button`)),
		chromedp.WaitVisible(chromedp.CSS("p.flash")))
	refused := e.userCmd(home, nil, "sandbox", "run", "--", "true")
	var rerr strings.Builder
	refused.Stderr = &rerr
	if err := refused.Run(); err == nil || !strings.Contains(rerr.String(), "revoked") {
		t.Errorf("the CLI's call after the revoke: %v, stderr %q; want it refused as revoked", err, rerr.String())
	}

	// The other pages render (and the usage charts draw).
	time.Sleep(1500 * time.Millisecond) // a metering tick for the charts
	b.do("usage", 20*time.Second,
		chromedp.Navigate(base+"/ui/usage"),
		chromedp.WaitVisible(chromedp.CSS(".chart .uplot")))
	b.shot("usage")
	b.do("secrets", 10*time.Second, chromedp.Navigate(base+"/ui/secrets"), chromedp.WaitVisible(chromedp.CSS("table.list")))
	b.do("templates", 10*time.Second, chromedp.Navigate(base+"/ui/templates"), chromedp.WaitVisible(chromedp.CSS("table.list")))
	b.shot("templates")

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.logs {
		if strings.Contains(l, "Content Security Policy") || strings.HasPrefix(l, "error javascript") {
			t.Errorf("browser log: %s", l)
		}
	}
}
