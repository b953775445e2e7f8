package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/coder/websocket"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/sdk/go/wire"
)

// dashTerm is the dashboard's answer to POST /ui/sandboxes/{id}/terminal.
type dashTerm struct {
	Pid   int    `json:"pid"`
	URL   string `json:"url"`
	Error string `json:"error"`
}

// openTerminal asks the dashboard for a terminal in sandbox id (form: the
// CSRF token is added unless form has one).
func (b *browser) openTerminal(id string, form url.Values, hdr ...string) (int, dashTerm) {
	b.t.Helper()
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", b.csrf)
	}
	resp, body := b.req("POST", "/ui/sandboxes/"+id+"/terminal", form, hdr...)
	var ans dashTerm
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal([]byte(body), &ans); err != nil {
			b.t.Fatalf("terminal answer %q: %v", body, err)
		}
	}
	return resp.StatusCode, ans
}

// dialTerminal opens the dashboard's terminal WebSocket at path with the
// jar's cookies and Origin this dashboard's, as the page does; hdr
// overrides headers ("" removes one). It returns the connection (nil when
// refused) and the handshake's HTTP status.
func (b *browser) dialTerminal(path string, hdr ...string) (*websocket.Conn, int) {
	b.t.Helper()
	h := http.Header{"Origin": {b.base}}
	var cookies []string
	for _, c := range b.cookies {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	if len(cookies) > 0 {
		h.Set("Cookie", strings.Join(cookies, "; "))
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			h.Del(hdr[i])
		} else {
			h.Set(hdr[i], hdr[i+1])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(b.base, "http")+path, &websocket.DialOptions{HTTPHeader: h})
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	if err != nil {
		return nil, status
	}
	ws.SetReadLimit(1 << 20)
	b.t.Cleanup(func() { ws.CloseNow() })
	return ws, status
}

// readUntil reads the terminal's output until it holds want.
func readUntil(t *testing.T, ws *websocket.Conn, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out strings.Builder
	for !strings.Contains(out.String(), want) {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("terminal output never showed %q (%v); got %q", want, err, out.String())
		}
		if typ == websocket.MessageBinary {
			out.Write(data)
		}
	}
	return out.String()
}

// TestDashboardTerminal: the sandbox page's terminal in headless Chromium
// (typing `echo hi` shows `hi`; the window's size reaches `stty size` and
// follows a resize; 24-bit colour renders; `exit 3` is shown; no CSP
// violation; a process the API started on a terminal opens from the process
// list with its recent output), and its WebSocket's guards over plain HTTP: the ticket needs
// the session's CSRF token and a same-origin post; a WebSocket from another
// origin is refused (403); a ticket opens one connection, for its own
// session, sandbox and process only (403 otherwise); another key's session
// gets 404 for the sandbox, whatever ticket it holds; an administrator's
// session, which sees every sandbox, gets 403 for a tenant's.
func TestDashboardTerminal(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{Metadata: map[string]string{"project": "terminal"}})
	t.Run("browser", func(t *testing.T) { testDashboardTerminalBrowser(t, e, sb.ID) })
	t.Run("guards", func(t *testing.T) { testDashboardTerminalGuards(t, e, sb.ID) })
}

// rowsJS is the terminal's screen as text, one line per row.
const rowsJS = `(() => { const r = document.querySelector("#terminal .xterm-rows"); return r ? Array.from(r.children, c => c.textContent.replace(/\s+$/, "")).join("\n") : ""; })()`

func testDashboardTerminalBrowser(t *testing.T, e *env, id string) {
	b := newHeadless(t)
	base := e.http.URL
	b.do("sign in", 20*time.Second,
		chromedp.Navigate(base+"/ui/login"),
		chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), e.key),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("table.list")))
	b.do("open the sandbox page", 10*time.Second,
		chromedp.Navigate(base+"/ui/sandboxes/"+id),
		chromedp.WaitVisible(chromedp.CSS("#term-open")))
	start := time.Now()
	b.do("open a terminal", 30*time.Second,
		chromedp.Click(chromedp.CSS("#term-open")),
		chromedp.Poll[chromedp.Void](`document.getElementById("term-status").textContent.startsWith("Connected to process")`,
			chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Poll[chromedp.Void](`/[$#]\s*$/m.test(`+rowsJS+`)`, chromedp.WithPollingTimeout(30*time.Second)))
	t.Logf("click to the shell's prompt: %s", time.Since(start).Round(time.Millisecond))

	// Keys typed go to the shell; its output is on the screen.
	typeLine := func(what, line string) {
		t.Helper()
		b.do(what, 10*time.Second, chromedp.Focus(chromedp.CSS("#terminal .xterm-helper-textarea")), typeKeys(line+"\r"))
	}
	screenHas := func(what, re string) string {
		t.Helper()
		var got string
		ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
		defer cancel()
		got, err := chromedp.Run(ctx, chromedp.Poll[string](`(() => { const s = `+rowsJS+`; return new RegExp(`+strconv.Quote(re)+`, "m").test(s) ? s : ""; })()`,
			chromedp.WithPollingTimeout(15*time.Second)))
		if err != nil {
			screen, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](rowsJS))
			t.Fatalf("%s: the terminal never showed /%s/ (%v); screen:\n%s", what, re, err, screen)
		}
		return got
	}
	typeLine("type echo hi", "echo hi")
	screenHas("echo hi", `^hi$`)

	// The page's size reaches the terminal: stty size, then a narrower
	// window and stty size again.
	typeLine("stty size", `echo "size1 $(stty size)"`)
	m := regexp.MustCompile(`(?m)^size1 (\d+) (\d+)$`).FindStringSubmatch(screenHas("stty size", `^size1 \d+ \d+$`))
	rows, cols := atoi(m[1]), atoi(m[2])
	if cols < 40 || rows < 10 {
		t.Errorf("the terminal is %d x %d; the fit addon should fill the 1280 px page", cols, rows)
	}
	b.do("a narrower window", 10*time.Second, chromedp.EmulateViewport(700, 860))
	b.do("wait for the fit", 10*time.Second, chromedp.Poll[chromedp.Void](
		`document.querySelector("#terminal .xterm-screen").getBoundingClientRect().width < 700`, chromedp.WithPollingTimeout(10*time.Second)))
	typeLine("stty size again", `echo "size2 $(stty size)"`)
	m = regexp.MustCompile(`(?m)^size2 (\d+) (\d+)$`).FindStringSubmatch(screenHas("stty size after the resize", `^size2 \d+ \d+$`))
	if c2 := atoi(m[2]); c2 >= cols || c2 < 10 {
		t.Errorf("after the window narrowed from 1280 to 700 px, stty says %s columns (was %d)", m[2], cols)
	} else {
		t.Logf("stty size: %d x %d, then %s x %s after the resize", rows, cols, m[1], m[2])
	}

	b.do("the window as it was", 10*time.Second, chromedp.EmulateViewport(1280, 860))

	// 24-bit colour: xterm.js sets it as a style attribute, which
	// terminal.js applies through the CSSOM (no CSP violation below).
	typeLine("a red word", `printf '\033[38;2;255;0;0mRED\033[0m\n'`)
	screenHas("the red word", `^RED$`)
	color, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](
		`(() => { for (const s of document.querySelectorAll("#terminal .xterm-rows span")) if (s.textContent === "RED") return getComputedStyle(s).color; return ""; })()`))
	if err != nil || color != "rgb(255, 0, 0)" {
		t.Errorf("the red word's colour is %q (%v), want rgb(255, 0, 0)", color, err)
	}

	// The exit is shown, with its code.
	typeLine("exit 3", "exit 3")
	b.do("the exit", 15*time.Second, chromedp.Poll[chromedp.Void](
		`document.getElementById("term-status").textContent.includes("exited with code 3")`, chromedp.WithPollingTimeout(15*time.Second)))
	screenHas("the exit on the screen", `exited with code 3\]$`)
	b.shot("terminal")

	// A process that the API started on a terminal is opened from the
	// process list: its recent output is replayed.
	p := e.startTerminal(id, agentapi.ExecRequest{Command: "echo attach-$((40+2)); exec sleep 600"}, wire.PtySize{Cols: 80, Rows: 24})
	attach := fmt.Sprintf(`button.term-attach[data-pid="%d"]`, p.Pid)
	b.do("open the page again", 10*time.Second,
		chromedp.Navigate(base+"/ui/sandboxes/"+id),
		chromedp.WaitVisible(chromedp.CSS(attach)))
	b.do("open the process's terminal", 20*time.Second,
		chromedp.Click(chromedp.CSS(attach)),
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.getElementById("term-status").textContent === "Connected to process %d."`, p.Pid),
			chromedp.WithPollingTimeout(20*time.Second)))
	screenHas("the replay", `^attach-42$`)

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.logs {
		if strings.Contains(l, "Content Security Policy") || strings.HasPrefix(l, "error javascript") {
			t.Errorf("browser log: %s", l)
		}
	}
}

// typeKeys types s as a keyboard does: for each character one keyDown that
// carries its text (the browser makes keydown, keypress and input of it)
// and one keyUp. (chromedp.SendKeys sends a separate "char" event too,
// which xterm.js takes as a second key press.)
func typeKeys(s string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for _, r := range s {
			down := input.DispatchKeyEventParams{Type: kb.KeyDown, Key: string(r), Text: string(r), UnmodifiedText: string(r)}
			if k, ok := kb.Keys[r]; ok {
				down.Key, down.Code, down.WindowsVirtualKeyCode, down.NativeVirtualKeyCode = k.Key, k.Code, k.Windows, k.Native
				if k.Shift {
					down.Modifiers = int64(kb.ModifierShift)
				}
			}
			up := down
			up.Type, up.Text, up.UnmodifiedText = kb.KeyUp, "", ""
			for _, ev := range []input.DispatchKeyEventParams{down, up} {
				if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, ev); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func testDashboardTerminalGuards(t *testing.T, e *env, id string) {
	admin := e.browser()
	admin.signIn(e.key)
	size := url.Values{"cols": {"80"}, "rows": {"24"}}

	// The ticket's POST has the checks of every dashboard form.
	if st, _ := admin.openTerminal(id, url.Values{"csrf": {"forged"}, "cols": {"80"}, "rows": {"24"}}); st != http.StatusForbidden {
		t.Errorf("a terminal without the session's CSRF token: %d, want 403", st)
	}
	if st, _ := admin.openTerminal(id, url.Values{"cols": {"80"}, "rows": {"24"}}, "Origin", "https://evil.example"); st != http.StatusForbidden {
		t.Errorf("a terminal asked for from another site: %d, want 403", st)
	}
	if st, ans := admin.openTerminal(id, url.Values{"cols": {"0"}, "rows": {"24"}}); st != http.StatusBadRequest || !strings.Contains(ans.Error, "cols") {
		t.Errorf("a terminal of 0 columns: %d %q, want 400 naming cols", st, ans.Error)
	}

	// A ticket opens its terminal once.
	st, term := admin.openTerminal(id, size)
	if st != http.StatusOK || term.Pid == 0 || !strings.Contains(term.URL, "?ticket=") {
		t.Fatalf("open a terminal: %d %+v", st, term)
	}
	ws, st := admin.dialTerminal(term.URL)
	if ws == nil {
		t.Fatalf("the terminal's WebSocket: %d", st)
	}
	if err := ws.Write(context.Background(), websocket.MessageBinary, []byte("echo guards-$((6*7))\r")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, ws, "guards-42")
	ws.Close(websocket.StatusNormalClosure, "")
	if _, st := admin.dialTerminal(term.URL); st != http.StatusForbidden {
		t.Errorf("a ticket used twice: %d, want 403", st)
	}

	// A cross-origin page is refused before its ticket is looked at: the
	// same ticket then works from the right origin.
	_, again := admin.openTerminal(id, url.Values{"pid": {strconv.Itoa(term.Pid)}})
	if again.Pid != term.Pid {
		t.Fatalf("connect to process %d again: %+v", term.Pid, again)
	}
	for _, hdr := range [][]string{{"Origin", "http://evil.example"}, {"Origin", "null"}, {"Sec-Fetch-Site", "cross-site"}, {"Sec-Fetch-Site", "same-site"}} {
		if ws, st := admin.dialTerminal(again.URL, hdr...); ws != nil || st != http.StatusForbidden {
			t.Errorf("a terminal WebSocket with %s: %s: %d, want 403", hdr[0], hdr[1], st)
		}
	}
	if ws, st := admin.dialTerminal(again.URL, "Sec-Fetch-Site", "same-origin"); ws == nil {
		t.Errorf("the ticket after the cross-origin refusals: %d, want it to work", st)
	} else {
		ws.Close(websocket.StatusNormalClosure, "")
	}

	// A ticket is for its sandbox and process only, and is spent by trying.
	other := e.create(api.CreateSandboxRequest{})
	_, t2 := admin.openTerminal(id, url.Values{"pid": {strconv.Itoa(term.Pid)}})
	elsewhere := strings.Replace(t2.URL, "/sandboxes/"+id+"/", "/sandboxes/"+other.ID+"/", 1)
	if _, st := admin.dialTerminal(elsewhere); st != http.StatusForbidden {
		t.Errorf("a ticket used for another sandbox: %d, want 403", st)
	}
	if _, st := admin.dialTerminal(t2.URL); st != http.StatusForbidden {
		t.Errorf("a ticket after it was tried on another sandbox: %d, want 403", st)
	}
	_, t3 := admin.openTerminal(id, url.Values{"pid": {strconv.Itoa(term.Pid)}})
	otherPid := strings.Replace(t3.URL, fmt.Sprintf("/processes/%d/", term.Pid), fmt.Sprintf("/processes/%d/", term.Pid+1), 1)
	if _, st := admin.dialTerminal(otherPid); st != http.StatusForbidden {
		t.Errorf("a ticket used for another process: %d, want 403", st)
	}
	noTicket := strings.Split(t3.URL, "?")[0]
	if _, st := admin.dialTerminal(noTicket); st != http.StatusForbidden {
		t.Errorf("a terminal WebSocket without a ticket: %d, want 403", st)
	}

	// A ticket is for its session: not another session of the same key,
	// nor no session.
	_, t4 := admin.openTerminal(id, url.Values{"pid": {strconv.Itoa(term.Pid)}})
	second := e.browser()
	second.signIn(e.key)
	if _, st := second.dialTerminal(t4.URL); st != http.StatusForbidden {
		t.Errorf("a ticket used by another session: %d, want 403", st)
	}
	_, t5 := admin.openTerminal(id, url.Values{"pid": {strconv.Itoa(term.Pid)}})
	if _, st := e.browser().dialTerminal(t5.URL); st != http.StatusForbidden {
		t.Errorf("a ticket used without a session: %d, want 403", st)
	}

	// Another key's session: 404 for the sandbox, to start a terminal, to
	// connect to one, and on the WebSocket with any ticket.
	var tk api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: "terminal-tenant", DailyLimitMicros: 1_000_000}, &tk)
	tenant := e.browser()
	tenant.signIn(tk.Secret)
	if st, ans := tenant.openTerminal(id, url.Values{"cols": {"80"}, "rows": {"24"}}); st != http.StatusNotFound {
		t.Errorf("another key starting a terminal: %d %+v, want 404", st, ans)
	}
	if st, ans := tenant.openTerminal(id, url.Values{"pid": {strconv.Itoa(term.Pid)}}); st != http.StatusNotFound {
		t.Errorf("another key connecting to a terminal: %d %+v, want 404", st, ans)
	}
	_, t6 := admin.openTerminal(id, url.Values{"pid": {strconv.Itoa(term.Pid)}})
	if _, st := tenant.dialTerminal(t6.URL); st != http.StatusNotFound {
		t.Errorf("another key's session with the owner's ticket: %d, want 404", st)
	}
	var own api.Sandbox
	if st, data := e.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{}, "Authorization", "Bearer "+tk.Secret); st != http.StatusCreated ||
		json.Unmarshal(data, &own) != nil {
		t.Fatalf("the tenant's sandbox: %d %s", st, data)
	}
	st, mine := tenant.openTerminal(own.ID, url.Values{"cols": {"80"}, "rows": {"24"}})
	if st != http.StatusOK {
		t.Fatalf("the tenant's terminal in its own sandbox: %d %+v", st, mine)
	}
	hijack := strings.Replace(mine.URL, "/sandboxes/"+own.ID+"/", "/sandboxes/"+id+"/", 1)
	if _, st := tenant.dialTerminal(hijack); st != http.StatusNotFound {
		t.Errorf("another key's session with its own ticket on the owner's sandbox: %d, want 404", st)
	}
	if ws, st := admin.dialTerminal(t6.URL); ws == nil { // the owner's ticket was not spent by the tenant's try
		t.Errorf("the owner's ticket after another key's try: %d", st)
	}

	// An administrator's key sees the tenant's sandbox, but the dashboard
	// opens terminals only in the key's own: no terminal on the page, 403
	// to start one, to connect to one, and on the WebSocket.
	if _, page := admin.req("GET", "/ui/sandboxes/"+own.ID, nil); !strings.Contains(page, `id="term-not-own"`) || strings.Contains(page, `id="term-open"`) {
		t.Errorf("the administrator's page of a tenant's sandbox offers a terminal")
	}
	if st, ans := admin.openTerminal(own.ID, url.Values{"cols": {"80"}, "rows": {"24"}}); st != http.StatusForbidden || !strings.Contains(ans.Error, "another key") {
		t.Errorf("an administrator starting a terminal in a tenant's sandbox: %d %+v, want 403", st, ans)
	}
	if st, ans := admin.openTerminal(own.ID, url.Values{"pid": {strconv.Itoa(mine.Pid)}}); st != http.StatusForbidden {
		t.Errorf("an administrator connecting to a tenant's terminal: %d %+v, want 403", st, ans)
	}
	_, t7 := admin.openTerminal(id, url.Values{"pid": {strconv.Itoa(term.Pid)}})
	intoTenant := strings.Replace(t7.URL, "/sandboxes/"+id+"/processes/"+strconv.Itoa(term.Pid)+"/", "/sandboxes/"+own.ID+"/processes/"+strconv.Itoa(mine.Pid)+"/", 1)
	if _, st := admin.dialTerminal(intoTenant); st != http.StatusForbidden {
		t.Errorf("an administrator's WebSocket into a tenant's terminal: %d, want 403", st)
	}
	if ws, st := tenant.dialTerminal(mine.URL); ws == nil { // the tenant's own terminal works
		t.Errorf("the tenant's own terminal: %d", st)
	}
}
