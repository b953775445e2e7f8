package agent

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

func q(path string) string { return url.QueryEscape(path) }

func TestFilesRoundTrip(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	var data []byte
	for i := range 300000 {
		data = append(data, byte(i*7), byte(i))
	}
	var fi agentapi.FileInfo
	a.call("PUT", "/files?path=bin/data.bin", data, 200, &fi)
	if fi.Type != "file" || fi.Size != int64(len(data)) || fi.Path != filepath.Join(a.workspace, "bin/data.bin") || fi.Mode != "0644" {
		t.Fatalf("put: %+v", fi)
	}
	resp := a.do(t.Context(), "GET", "/files?path="+q(fi.Path), nil)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, data) || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("get: status %d, %d bytes, equal %v", resp.StatusCode, len(got), bytes.Equal(got, data))
	}
	// Replacing keeps the existing mode.
	if err := os.Chmod(fi.Path, 0o600); err != nil {
		t.Fatal(err)
	}
	a.call("PUT", "/files?path=bin/data.bin", []byte{}, 200, &fi)
	if fi.Size != 0 || fi.Mode != "0600" {
		t.Fatalf("replace: %+v", fi)
	}
}

func TestPutAtomic(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	target := filepath.Join(a.workspace, "keep.txt")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"keep.txt", "fresh/dir/new.txt"} {
		// Promise 1000 bytes, send 10, hang up.
		conn, err := net.Dial("unix", a.socket)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "PUT /files?path=%s HTTP/1.1\r\nHost: agent\r\nContent-Length: 1000\r\n\r\n0123456789", q(path))
		time.Sleep(100 * time.Millisecond)
		conn.Close()
	}
	eventually(t, 2*time.Second, "upload cleaned up", func() bool {
		ents, _ := os.ReadDir(a.workspace)
		return len(ents) == 1 && ents[0].Name() == "keep.txt"
	})
	if data, _ := os.ReadFile(target); string(data) != "old" {
		t.Fatalf("target changed to %q", data)
	}
}

func TestPutChownsCreatedParents(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to chown to another user")
	}
	t.Parallel()
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	ws, err := os.MkdirTemp("", "agws")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	a := newTestAgent(t, Config{User: "nobody", Workspace: ws})
	a.call("PUT", "/files?path=new/a/b/c.txt", []byte("x"), 200, nil)
	for _, p := range []string{"new", "new/a", "new/a/b", "new/a/b/c.txt"} {
		st, err := os.Stat(filepath.Join(ws, p))
		if err != nil {
			t.Fatal(err)
		}
		if got := int(st.Sys().(*syscall.Stat_t).Uid); got != uid {
			t.Fatalf("%s owned by %d, want %d", p, got, uid)
		}
	}
	var mk agentapi.FileInfo
	a.call("POST", "/files/mkdir", agentapi.MkdirRequest{Path: "new/m/n", Parents: true}, 200, &mk)
	if mk.Uid != uid || mk.Type != "dir" {
		t.Fatalf("mkdir %+v", mk)
	}
	res := a.exec(agentapi.ExecRequest{Command: "id -u; rm -rf new && echo removed"})
	if res.Stdout != fmt.Sprintf("%d\nremoved\n", uid) || res.ExitCode != 0 {
		t.Fatalf("rm as user: %+v", res)
	}
}

func TestListDepth(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	for _, p := range []string{"b/c/d/e.txt", "a.txt", "b/z.txt"} {
		a.call("PUT", "/files?path="+q(p), []byte(p), 200, nil)
	}
	if err := os.Symlink("b", filepath.Join(a.workspace, "link")); err != nil {
		t.Fatal(err)
	}
	names := func(depth int) []string {
		var l agentapi.FileList
		a.call("GET", fmt.Sprintf("/files/list?depth=%d", depth), nil, 200, &l)
		var out []string
		for _, e := range l.Entries {
			rel, _ := filepath.Rel(a.workspace, e.Path)
			out = append(out, rel+":"+e.Type)
		}
		return out
	}
	if got := fmt.Sprint(names(1)); got != "[a.txt:file b:dir link:symlink]" {
		t.Fatalf("depth 1: %s", got)
	}
	if got := fmt.Sprint(names(2)); got != "[a.txt:file b:dir b/c:dir b/z.txt:file link:symlink]" {
		t.Fatalf("depth 2: %s", got)
	}
	if got := fmt.Sprint(names(10)); got != "[a.txt:file b:dir b/c:dir b/c/d:dir b/c/d/e.txt:file b/z.txt:file link:symlink]" {
		t.Fatalf("depth 10: %s", got)
	}
	a.apiErr("GET", "/files/list?depth=11", nil, 400, agentapi.CodeBadRequest)
	a.apiErr("GET", "/files/list?depth=0", nil, 400, agentapi.CodeBadRequest)
	a.apiErr("GET", "/files/list?path=a.txt", nil, 400, agentapi.CodeBadRequest)
	var st agentapi.FileInfo
	a.call("GET", "/files/stat?path=link", nil, 200, &st)
	if st.Type != "symlink" || st.Target != "b" {
		t.Fatalf("stat link: %+v", st)
	}
}

func TestFileErrors(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	a.call("PUT", "/files?path=d/f.txt", []byte("x"), 200, nil)
	for _, m := range []string{"GET /files", "PUT /files", "GET /files/stat", "GET /files/list", "DELETE /files"} {
		var method, route string
		fmt.Sscan(m, &method, &route)
		a.apiErr(method, route+"?path=a%00b", nil, 400, agentapi.CodeBadRequest)
	}
	a.apiErr("POST", "/files/mkdir", agentapi.MkdirRequest{Path: "a\x00b"}, 400, agentapi.CodeBadRequest)
	a.apiErr("GET", "/files?path=missing", nil, 404, agentapi.CodeNotFound)
	a.apiErr("GET", "/files?path=d", nil, 400, agentapi.CodeBadRequest)
	a.apiErr("GET", "/files", nil, 400, agentapi.CodeBadRequest)
	a.apiErr("PUT", "/files?path=d", []byte("x"), 400, agentapi.CodeBadRequest)
	a.apiErr("PUT", "/files?path=d/f.txt/g", []byte("x"), 400, agentapi.CodeBadRequest)
	a.apiErr("POST", "/files/mkdir", agentapi.MkdirRequest{Path: "d"}, 409, agentapi.CodeConflict)
	a.apiErr("POST", "/files/mkdir", agentapi.MkdirRequest{Path: "d/f.txt", Parents: true}, 409, agentapi.CodeConflict)
	a.apiErr("POST", "/files/mkdir", agentapi.MkdirRequest{Path: "x/y"}, 404, agentapi.CodeNotFound)
	a.call("POST", "/files/mkdir", agentapi.MkdirRequest{Path: "d", Parents: true}, 200, nil)
	a.apiErr("DELETE", "/files?path=d", nil, 409, agentapi.CodeConflict)
	a.apiErr("DELETE", "/files?path="+q(a.workspace), nil, 400, agentapi.CodeBadRequest)
	a.apiErr("DELETE", "/files?path=missing", nil, 404, agentapi.CodeNotFound)
	a.apiErr("POST", "/files/rename", agentapi.RenameRequest{From: "missing", To: "x"}, 404, agentapi.CodeNotFound)
	a.apiErr("POST", "/files/rename", agentapi.RenameRequest{From: a.workspace, To: a.workspace + "2"}, 400, agentapi.CodeBadRequest)

	var fi agentapi.FileInfo
	a.call("POST", "/files/rename", agentapi.RenameRequest{From: "d/f.txt", To: "e/g.txt"}, 200, &fi)
	if fi.Path != filepath.Join(a.workspace, "e/g.txt") || fi.Size != 1 {
		t.Fatalf("rename: %+v", fi)
	}
	a.apiErr("POST", "/files/rename", agentapi.RenameRequest{From: "e/g.txt", To: "d"}, 409, agentapi.CodeConflict)
	a.call("PUT", "/files?path=e/h.txt", []byte("y"), 200, nil)
	a.apiErr("POST", "/files/rename", agentapi.RenameRequest{From: "d", To: "e/h.txt"}, 400, agentapi.CodeBadRequest)
	a.call("DELETE", "/files?path=d", nil, 204, nil)
	a.call("DELETE", "/files?path=e&recursive=true", nil, 204, nil)
	if ents, _ := os.ReadDir(a.workspace); len(ents) != 0 {
		t.Fatalf("left over: %v", ents)
	}
}

// D5: writes refuse devices, FIFOs and sockets at the target, also behind
// symlinks, at once and without touching them; reads never wait on a FIFO.
func TestWritesRefuseSpecialFiles(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	ws := a.workspace
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o666))
	ln, err := net.Listen("unix", filepath.Join(ws, "sock"))
	must(err)
	defer ln.Close()
	must(os.Symlink("fifo", filepath.Join(ws, "to-fifo")))
	specials := []string{"fifo", "sock", "to-fifo"}
	if os.Geteuid() == 0 {
		// A null device of the test's own (1,3): never the host's /dev/null.
		must(syscall.Mknod(filepath.Join(ws, "null"), syscall.S_IFCHR|0o666, 1<<8|3))
		must(os.Symlink(filepath.Join(ws, "null"), filepath.Join(ws, "to-null")))
		specials = append(specials, "null", "to-null")
	}
	modes := map[string]os.FileMode{}
	for _, name := range specials {
		st, err := os.Lstat(filepath.Join(ws, name))
		must(err)
		modes[name] = st.Mode()
	}
	a.call("PUT", "/files?path=plain.txt", []byte("plain"), 200, nil)
	for _, name := range specials {
		t0 := time.Now()
		e := a.apiErr("PUT", "/files?path="+name, []byte("data"), 400, agentapi.CodeBadRequest)
		if !strings.Contains(e.Message, "not a regular file") || time.Since(t0) > time.Second {
			t.Errorf("PUT %s: %q after %v", name, e.Message, time.Since(t0))
		}
		a.apiErr("POST", "/files/mkdir", agentapi.MkdirRequest{Path: name}, 400, agentapi.CodeBadRequest)
		a.apiErr("POST", "/files/mkdir", agentapi.MkdirRequest{Path: name, Parents: true}, 400, agentapi.CodeBadRequest)
		a.apiErr("POST", "/files/rename", agentapi.RenameRequest{From: "plain.txt", To: name}, 400, agentapi.CodeBadRequest)
		a.apiErr("GET", "/files?path="+name, nil, 400, agentapi.CodeBadRequest)
		if st, err := os.Lstat(filepath.Join(ws, name)); err != nil || st.Mode() != modes[name] {
			t.Errorf("%s changed: %v, %v (was %v)", name, st.Mode(), err, modes[name])
		}
	}
	if ents, _ := filepath.Glob(filepath.Join(ws, ".*")); len(ents) > 0 {
		t.Errorf("temporary files left: %v", ents)
	}
}

// C23: names of up to 255 bytes (NAME_MAX) can be written, listed, read,
// renamed to and made as directories; temporary names take none of them.
// 256 bytes is refused with a message naming the limit.
func TestLongNames(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	for _, name := range []string{strings.Repeat("z", 255), strings.Repeat("é", 85)} {
		data := []byte("content of " + name)
		var fi agentapi.FileInfo
		a.call("PUT", "/files?path="+q(name), data, 200, &fi)
		if fi.Name != name || fi.Size != int64(len(data)) {
			t.Errorf("put %d-byte name: %+v", len(name), fi)
		}
		resp := a.do(t.Context(), "GET", "/files?path="+q(name), nil)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Equal(got, data) {
			t.Errorf("get %d-byte name: %d %q", len(name), resp.StatusCode, got)
		}
		var list agentapi.FileList
		a.call("GET", "/files/list", nil, 200, &list)
		found := false
		for _, e := range list.Entries {
			found = found || e.Name == name
		}
		if !found {
			t.Errorf("list lacks the %d-byte name: %+v", len(name), list.Entries)
		}
		a.call("PUT", "/files?path="+q(name), []byte("again"), 200, nil) // replace
		a.call("POST", "/files/rename", agentapi.RenameRequest{From: name, To: "d/" + name}, 200, &fi)
		a.call("POST", "/files/mkdir", agentapi.MkdirRequest{Path: "m/" + name, Parents: true}, 200, nil)
		a.call("DELETE", "/files?path=d&recursive=true", nil, 204, nil)
		a.call("DELETE", "/files?path=m&recursive=true", nil, 204, nil)
	}
	long := strings.Repeat("z", 256)
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"PUT", "/files?path=" + long, []byte("x")},
		{"GET", "/files?path=" + long, nil},
		{"POST", "/files/mkdir", agentapi.MkdirRequest{Path: long}},
		{"POST", "/files/rename", agentapi.RenameRequest{From: "x", To: long}},
	} {
		e := a.apiErr(c.method, c.path, c.body, 400, agentapi.CodeBadRequest)
		if !strings.Contains(e.Message, "255 bytes (NAME_MAX)") || !strings.Contains(e.Message, "256 bytes") {
			t.Errorf("%s %s: %q, want the limit named", c.method, c.path[:min(len(c.path), 40)], e.Message)
		}
	}
	if ents, _ := os.ReadDir(a.workspace); len(ents) != 0 {
		t.Errorf("left over: %v", ents)
	}
}
