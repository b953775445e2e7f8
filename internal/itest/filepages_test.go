package itest

// Big directories and big files (issue 24, F3 and F8b), with real
// sandboxes: a directory of 60,000 entries listed page by page, through the
// API, the Go SDK, the tool and the E2B facade; a 100 MiB file downloaded in
// ranges and resumed with curl -C -, through the API and the E2B facade.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/compat/e2b/envd/filesystempb"
	"withruntime.dev/runtime/internal/compat/e2b/envd/filesystempb/filesystempbconnect"
	withruntime "withruntime.dev/runtime/sdk/go"
	"withruntime.dev/runtime/sdk/go/tools"
)

// e2bFileSandbox is a sandbox made through the E2B facade: its Runtime id,
// and the facade and access token of its data plane.
type e2bFileSandbox struct {
	id    string
	sb    e2bSandbox
	front *e2bFront
}

// newE2BFileSandbox creates a sandbox of a 30-minute lease through the E2B
// facade's control plane, as the e2b SDKs do.
func newE2BFileSandbox(t *testing.T, e *env) *e2bFileSandbox {
	t.Helper()
	f := newE2BFront(e)
	status, data := f.control("POST", "/sandboxes", map[string]any{"templateID": "base", "timeout": 1800})
	var sb e2bSandbox
	if status != http.StatusCreated || json.Unmarshal(data, &sb) != nil || sb.EnvdAccessToken == "" {
		t.Fatalf("E2B create: %d %s", status, data)
	}
	id := sb.SandboxID
	if !strings.HasPrefix(id, "sbx_") {
		id = "sbx_" + id
	}
	return &e2bFileSandbox{id: id, sb: sb, front: f}
}

// envdHeaders are the headers of an e2b SDK's data-plane request.
func (s *e2bFileSandbox) envdHeaders(h http.Header) {
	h.Set("X-Access-Token", s.sb.EnvdAccessToken)
	h.Set("E2b-Sandbox-Id", s.sb.SandboxID)
	h.Set("E2b-Sandbox-Port", "49983")
}

// TestFileListPages: 60,000 files in one directory are listed page by page
// with no entry lost or repeated, also while entries come and go between
// pages; the tool shows 500 of them and says there are 60,000; the Go SDK's
// List and E2B's ListDir give all of them.
func TestFileListPages(t *testing.T) {
	e := newEnv(t)
	es := newE2BFileSandbox(t, e)
	id := es.id
	const n = 60000
	mk := e.exec(id, agentapi.ExecRequest{TimeoutSeconds: 600,
		Command: fmt.Sprintf(`python3 -c "import os; os.makedirs('many'); [open('many/f%%05d' %% i, 'w').close() for i in range(%d)]"`, n)})
	if mk.ExitCode != 0 {
		t.Fatalf("making %d files: %+v", n, mk)
	}
	base := "/v1/sandboxes/" + id + "/files/list?path=many"
	page := func(limit int, cursor string) agentapi.FileList {
		t.Helper()
		q := base
		if limit > 0 {
			q += fmt.Sprintf("&limit=%d", limit)
		}
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		var l agentapi.FileList
		start := time.Now()
		e.must(http.StatusOK, "GET", q, nil, &l)
		t.Logf("page of %d entries (limit %d) in %s", len(l.Entries), limit, time.Since(start).Round(time.Millisecond))
		return l
	}

	// The tool, before anything changes: 500 entries and the total.
	sbx, err := e.sdkClient().Connect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	ts := tools.ForSandbox(sbx)
	res := sdkCall(t, ts, "runtime_list_files", `{"path": "many"}`)
	lines := strings.Split(res.Text, "\n")
	out, _ := res.Data.(*tools.ListOutput)
	if res.IsError || !strings.HasPrefix(res.Text, "/workspace/many: 60000 entries; the first 500 (by name) are shown\n") ||
		len(lines) != 502 || !strings.HasSuffix(lines[1], "  f00000") || !strings.HasSuffix(lines[500], "  f00499") ||
		lines[501] != "[... 59500 more entries not shown; use runtime_exec with ls or find to see them ...]" ||
		out == nil || len(out.Entries) != 500 || out.Total != n || !out.Truncated {
		t.Fatalf("runtime_list_files of %d entries: %d lines, %.300q ... %q, data %+v", n, len(lines), res.Text, lines[len(lines)-1], out != nil)
	}
	// The Go SDK's List follows every page.
	all, err := sbx.Files().List(context.Background(), "many", 1)
	if err != nil || len(all) != n || all[0].Name != "f00000" || all[n-1].Name != fmt.Sprintf("f%05d", n-1) {
		t.Fatalf("SDK List: %d entries, %v", len(all), err)
	}
	// E2B's ListDir returns every entry in one answer, as envd does.
	fs := filesystempbconnect.NewFilesystemClient(http.DefaultClient, es.front.url, connect.WithProtoJSON())
	lreq := connect.NewRequest(&filesystempb.ListDirRequest{Path: "/workspace/many", Depth: 1})
	es.envdHeaders(lreq.Header())
	lresp, err := fs.ListDir(context.Background(), lreq)
	if err != nil || len(lresp.Msg.GetEntries()) != n || lresp.Msg.GetEntries()[n-1].GetName() != fmt.Sprintf("f%05d", n-1) {
		t.Fatalf("E2B ListDir of %d entries: %v", n, err)
	}

	// Page by page, the first page of the default size.
	first := page(0, "")
	if len(first.Entries) != agentapi.ListDefaultLimit || !first.Truncated || first.Next == "" || first.Total == nil || *first.Total != n {
		t.Fatalf("first page: %d entries, truncated %v, total %v", len(first.Entries), first.Truncated, first.Total)
	}
	// Between pages: an entry before the cursor and one after it appear,
	// one not yet listed goes. Only the one after the cursor is listed.
	if r := e.sh(id, "touch many/a_new many/g_new && rm many/f59999"); r.ExitCode != 0 {
		t.Fatalf("changing the directory: %+v", r)
	}
	names := []string{}
	for _, fi := range first.Entries {
		names = append(names, fi.Name)
	}
	pages, cursor := 1, first.Next
	for limit := agentapi.ListMaxLimit; ; limit = agentapi.ListMaxLimit - pages { // varied page sizes
		l := page(limit, cursor)
		pages++
		for _, fi := range l.Entries {
			names = append(names, fi.Name)
		}
		if !l.Truncated {
			break
		}
		cursor = l.Next
	}
	want := []string{}
	for i := range n - 1 {
		want = append(want, fmt.Sprintf("f%05d", i))
	}
	want = append(want, "g_new")
	if !slices.Equal(names, want) {
		seen := map[string]int{}
		for _, nm := range names {
			seen[nm]++
		}
		var dup []string
		for nm, c := range seen {
			if c > 1 {
				dup = append(dup, nm)
			}
		}
		t.Fatalf("%d pages gave %d names (want %d), sorted %v, repeated %v, a_new %d, f59999 %d",
			pages, len(names), len(want), slices.IsSorted(names), dup, seen["a_new"], seen["f59999"])
	}
	t.Logf("%d entries in %d pages, none lost or repeated", len(names), pages)
}

// sha256Hex is the hex SHA-256 of b.
func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestFileRanges: a 100 MiB file comes in ranges (206 with Content-Range,
// Accept-Ranges on every download), a download cut short resumes with
// curl -C - and with the Go SDK's OpenRange to the right SHA-256, a range
// past the end is 416 with bytes */SIZE, a malformed one the whole file;
// the E2B facade's GET /files does the same.
func TestFileRanges(t *testing.T) {
	e := newEnv(t)
	es := newE2BFileSandbox(t, e)
	id := es.id
	const size = 100 << 20
	mk := e.exec(id, agentapi.ExecRequest{TimeoutSeconds: 300,
		Command: "head -c 104857600 /dev/urandom > big.bin && sha256sum big.bin | cut -c1-64 && tail -c +1001 big.bin | head -c 1000 | sha256sum | cut -c1-64"})
	sums := strings.Fields(mk.Stdout)
	if mk.ExitCode != 0 || len(sums) != 2 {
		t.Fatalf("making big.bin: %+v", mk)
	}
	whole, part := sums[0], sums[1]
	fileURL := e.http.URL + "/v1/sandboxes/" + id + "/files?path=big.bin"
	get := func(u string, hdr func(http.Header)) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", u, nil)
		hdr(req.Header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	for _, plane := range []struct {
		name string
		url  string
		hdr  func(h http.Header, rng string)
	}{
		{"API", fileURL, func(h http.Header, rng string) {
			h.Set("Authorization", "Bearer "+e.key)
			if rng != "" {
				h.Set("Range", rng)
			}
		}},
		{"E2B", es.front.url + "/files?path=" + url.QueryEscape("/workspace/big.bin"), func(h http.Header, rng string) {
			es.envdHeaders(h)
			if rng != "" {
				h.Set("Range", rng)
			}
		}},
	} {
		with := func(rng string) func(http.Header) { return func(h http.Header) { plane.hdr(h, rng) } }
		resp, body := get(plane.url, with("bytes=1000-1999"))
		if resp.StatusCode != http.StatusPartialContent || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 1000-1999/%d", size) ||
			len(body) != 1000 || sha256Hex(body) != part || resp.Header.Get("Accept-Ranges") != "bytes" {
			t.Errorf("%s: bytes=1000-1999: %d, Content-Range %q, %d bytes", plane.name, resp.StatusCode, resp.Header.Get("Content-Range"), len(body))
		}
		resp, body = get(plane.url, with(fmt.Sprintf("bytes=%d-", size)))
		if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes */%d", size) {
			t.Errorf("%s: a range past the end: %d, Content-Range %q: %s", plane.name, resp.StatusCode, resp.Header.Get("Content-Range"), body)
		}
		resp, body = get(plane.url, with("bytes=oops"))
		if resp.StatusCode != http.StatusOK || len(body) != size || sha256Hex(body) != whole || resp.Header.Get("Accept-Ranges") != "bytes" {
			t.Errorf("%s: a malformed Range: %d, %d bytes", plane.name, resp.StatusCode, len(body))
		}
		resp, body = get(plane.url, with("bytes=-10"))
		if resp.StatusCode != http.StatusPartialContent || len(body) != 10 || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes %d-%d/%d", size-10, size-1, size) {
			t.Errorf("%s: the last 10 bytes: %d, %q", plane.name, resp.StatusCode, resp.Header.Get("Content-Range"))
		}
	}

	// A download cut short at 30 MiB, resumed by curl -C - on the host.
	local := filepath.Join(t.TempDir(), "big.bin")
	_, head := get(fileURL, func(h http.Header) {
		h.Set("Authorization", "Bearer "+e.key)
		h.Set("Range", "bytes=0-31457279")
	})
	if err := os.WriteFile(local, head, 0o600); err != nil || len(head) != 30<<20 {
		t.Fatalf("the first 30 MiB: %d bytes, %v", len(head), err)
	}
	curl := exec.Command("curl", "-sS", "-f", "-C", "-", "-o", local, "-w", "%{http_code}", "-H", "Authorization: Bearer "+e.key, fileURL)
	var stderr bytes.Buffer
	curl.Stderr = &stderr
	code, err := curl.Output()
	if err != nil || string(code) != "206" {
		t.Fatalf("curl -C -: %v, status %s: %s", err, code, stderr.String())
	}
	got, _ := os.ReadFile(local)
	if len(got) != size || sha256Hex(got) != whole {
		t.Fatalf("resumed by curl: %d bytes, sha256 %s, want %s", len(got), sha256Hex(got), whole)
	}
	// curl -C - on the whole file: nothing left to fetch (416), the file unchanged.
	curl = exec.Command("curl", "-sS", "-C", "-", "-o", local, "-w", "%{http_code}", "-H", "Authorization: Bearer "+e.key, fileURL)
	if code, err := curl.Output(); err != nil || string(code) != "416" {
		t.Errorf("curl -C - on a complete file: %v, status %s", err, code)
	}

	// The Go SDK resumes the same way.
	sbx, err := e.sdkClient().Connect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.Write(got[:12345])
	rc, err := sbx.Files().OpenRange(context.Background(), "big.bin", int64(buf.Len()), -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(&buf, rc); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if buf.Len() != size || sha256Hex(buf.Bytes()) != whole {
		t.Fatalf("resumed by OpenRange: %d bytes", buf.Len())
	}
	if _, err := sbx.Files().OpenRange(context.Background(), "big.bin", size+1, -1); !errors.Is(err, withruntime.ErrRangeNotSatisfiable) {
		t.Errorf("OpenRange past the end: %v", err)
	}
}
