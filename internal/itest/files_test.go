package itest

// The files API through the server: exact bytes both ways, relative paths,
// directory trees, and uploads that stream instead of being buffered.

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	randv2 "math/rand/v2"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// getFile downloads a file through the API.
func (e *env) getFile(id, path string) []byte {
	e.t.Helper()
	status, data := e.do("GET", "/v1/sandboxes/"+id+"/files?path="+path, nil)
	if status != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, status, data)
	}
	return data
}

// entryPaths lists the paths of a directory listing.
func (e *env) entryPaths(id, query string) []string {
	e.t.Helper()
	var list agentapi.FileList
	e.must(http.StatusOK, "GET", "/v1/sandboxes/"+id+"/files/list?"+query, nil, &list)
	paths := []string{}
	for _, ent := range list.Entries {
		paths = append(paths, ent.Path)
	}
	return paths
}

func TestFiles(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	id, sbx := sb.ID, "/v1/sandboxes/"+sb.ID

	// Binary round trip: every byte exact, as seen from inside too.
	bin := []byte{0x00, 0x01, 0x02, 0x03, 0xff, 0xfe, 0xfd, 0xaa, 0xbb, 0xcc}
	var fi agentapi.FileInfo
	e.must(200, "PUT", sbx+"/files?path=/workspace/bin.dat", bin, &fi)
	if fi.Size != 10 || fi.Type != "file" || fi.Path != "/workspace/bin.dat" || fi.Name != "bin.dat" || fi.Mode != "0644" || fi.Uid != 1000 {
		t.Errorf("written file: %+v", fi)
	}
	if res := e.sh(id, "stat -c %s bin.dat; od -An -tx1 bin.dat"); res.Stdout != "10\n 00 01 02 03 ff fe fd aa bb cc\n" {
		t.Errorf("inside: %+v", res)
	}
	req, _ := http.NewRequest("GET", e.http.URL+sbx+"/files?path=bin.dat", nil)
	req.Header.Set("Authorization", "Bearer "+e.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, bin) || resp.Header.Get("Content-Type") != "application/octet-stream" || resp.ContentLength != 10 {
		t.Errorf("read back % x (Content-Type %q, length %d)", got, resp.Header.Get("Content-Type"), resp.ContentLength)
	}

	// 64 KiB of random bytes: same SHA-256 inside and on the way back.
	rnd := make([]byte, 64<<10)
	_, _ = rand.Read(rnd)
	sum := sha256.Sum256(rnd)
	e.must(200, "PUT", sbx+"/files?path=rand.bin", rnd, nil)
	if res := e.sh(id, "sha256sum rand.bin"); res.Stdout != hex.EncodeToString(sum[:])+"  rand.bin\n" {
		t.Errorf("sha256 inside: %q, want %x", res.Stdout, sum)
	}
	if got := e.getFile(id, "rand.bin"); !bytes.Equal(got, rnd) {
		t.Errorf("64 KiB read back differs (%d bytes)", len(got))
	}
	// Replacing a file keeps its mode; an empty upload is an empty file.
	e.sh(id, "chmod 600 rand.bin")
	e.must(200, "PUT", sbx+"/files?path=rand.bin", []byte{}, &fi)
	if fi.Size != 0 || fi.Mode != "0600" {
		t.Errorf("replaced with empty: %+v", fi)
	}
	if got := e.getFile(id, "rand.bin"); len(got) != 0 {
		t.Errorf("empty file read back %d bytes", len(got))
	}

	// Relative paths resolve under /workspace, everywhere.
	e.must(200, "PUT", sbx+"/files?path=rel/dir/a.txt", "rel\n", &fi)
	if fi.Path != "/workspace/rel/dir/a.txt" {
		t.Errorf("relative PUT: %+v", fi)
	}
	if res := e.sh(id, "cat /workspace/rel/dir/a.txt; stat -c %U /workspace/rel /workspace/rel/dir /workspace/rel/dir/a.txt"); res.Stdout != "rel\nuser\nuser\nuser\n" {
		t.Errorf("relative file inside: %+v", res)
	}
	e.must(200, "GET", sbx+"/files/stat?path=./rel/../rel/dir/a.txt", nil, &fi)
	if fi.Path != "/workspace/rel/dir/a.txt" || fi.Size != 4 {
		t.Errorf("relative stat: %+v", fi)
	}
	if got := e.entryPaths(id, "path=rel"); strings.Join(got, " ") != "/workspace/rel/dir" {
		t.Errorf("relative list: %v", got)
	}
	e.must(200, "POST", sbx+"/files/mkdir", agentapi.MkdirRequest{Path: "rel/m"}, &fi)
	if fi.Path != "/workspace/rel/m" || fi.Type != "dir" || fi.Uid != 1000 {
		t.Errorf("relative mkdir: %+v", fi)
	}
	if res := e.exec(id, agentapi.ExecRequest{Command: "pwd", Cwd: "rel/dir"}); res.Stdout != "/workspace/rel/dir\n" {
		t.Errorf("relative cwd: %+v", res)
	}
	e.must(200, "POST", sbx+"/files/rename", agentapi.RenameRequest{From: "rel/dir/a.txt", To: "rel/b.txt"}, &fi)
	if fi.Path != "/workspace/rel/b.txt" {
		t.Errorf("relative rename: %+v", fi)
	}
	e.must(204, "DELETE", sbx+"/files?path=rel&recursive=true", nil, nil)
	if res := e.sh(id, "test -e /workspace/rel"); res.ExitCode != 1 {
		t.Errorf("relative delete left /workspace/rel: %+v", res)
	}
	if got := e.entryPaths(id, ""); strings.Join(got, " ") != "/workspace/bin.dat /workspace/rand.bin" {
		t.Errorf("workspace: %v", got)
	}

	// A tree: mkdir, list by depth, stat, rename, remove.
	e.must(200, "POST", sbx+"/files/mkdir", agentapi.MkdirRequest{Path: "tree/a/b/c", Parents: true}, nil)
	e.must(200, "POST", sbx+"/files/mkdir", agentapi.MkdirRequest{Path: "tree/a/b", Parents: true}, nil)
	e.expectError(409, "conflict", "POST", sbx+"/files/mkdir", agentapi.MkdirRequest{Path: "tree/a"})
	e.expectError(404, "not_found", "POST", sbx+"/files/mkdir", agentapi.MkdirRequest{Path: "tree2/x"})
	for path, content := range map[string]string{"tree/a/f1": "1", "tree/a/b/f2": "22", "tree/a/b/c/f3": "333"} {
		e.must(200, "PUT", sbx+"/files?path="+path, content, nil)
	}
	for depth, want := range map[int]string{
		1: "a",
		2: "a a/b a/f1",
		3: "a a/b a/b/c a/b/f2 a/f1",
		4: "a a/b a/b/c a/b/c/f3 a/b/f2 a/f1",
	} {
		got := e.entryPaths(id, fmt.Sprintf("path=tree&depth=%d", depth))
		for i := range got {
			got[i] = strings.TrimPrefix(got[i], "/workspace/tree/")
		}
		if strings.Join(got, " ") != want {
			t.Errorf("list depth %d: %v, want %s", depth, got, want)
		}
	}
	e.expectError(400, "bad_request", "GET", sbx+"/files/list?path=tree&depth=11", nil)
	e.expectError(400, "bad_request", "GET", sbx+"/files/list?path=tree/a/f1", nil)
	e.must(200, "GET", sbx+"/files/stat?path=tree/a/b/f2", nil, &fi)
	if fi.Type != "file" || fi.Size != 2 || fi.Name != "f2" || fi.ModTime.IsZero() || time.Since(fi.ModTime) > time.Minute {
		t.Errorf("stat file: %+v", fi)
	}
	e.must(200, "GET", sbx+"/files/stat?path=tree/a", nil, &fi)
	if fi.Type != "dir" || fi.Mode != "0755" || fi.Uid != 1000 || fi.Gid != 1000 {
		t.Errorf("stat dir: %+v", fi)
	}
	e.must(200, "POST", sbx+"/files/rename", agentapi.RenameRequest{From: "tree/a/b", To: "tree/moved"}, &fi)
	if fi.Type != "dir" || fi.Path != "/workspace/tree/moved" {
		t.Errorf("rename dir: %+v", fi)
	}
	e.expectError(404, "not_found", "GET", sbx+"/files/stat?path=tree/a/b", nil)
	if got := string(e.getFile(id, "tree/moved/c/f3")); got != "333" {
		t.Errorf("moved file: %q", got)
	}
	e.must(200, "POST", sbx+"/files/rename", agentapi.RenameRequest{From: "tree/a/f1", To: "tree/moved/f2"}, nil)
	if got := string(e.getFile(id, "tree/moved/f2")); got != "1" {
		t.Errorf("file replaced by rename: %q", got)
	}
	e.expectError(409, "conflict", "DELETE", sbx+"/files?path=tree", nil)
	e.must(204, "DELETE", sbx+"/files?path=tree/moved/c/f3", nil, nil)
	e.must(204, "DELETE", sbx+"/files?path=tree/moved/c", nil, nil)
	e.must(204, "DELETE", sbx+"/files?path=tree&recursive=true", nil, nil)
	e.expectError(404, "not_found", "GET", sbx+"/files/stat?path=tree", nil)
	e.expectError(400, "bad_request", "DELETE", sbx+"/files?path=/workspace&recursive=true", nil)
}

// gatedReader produces size pseudo-random bytes, hashing them. After
// gateAt bytes it closes reached and blocks until gate is closed.
type gatedReader struct {
	left, gateAt int64
	sent         int64
	rng          *randv2.ChaCha8
	sum          hash.Hash
	reached      chan struct{}
	gate         chan struct{}
	once         sync.Once
}

func (g *gatedReader) Read(p []byte) (int, error) {
	if g.left <= 0 {
		return 0, io.EOF
	}
	if g.sent >= g.gateAt {
		g.once.Do(func() { close(g.reached) })
		<-g.gate
	}
	n := min(int64(len(p)), g.left)
	if g.sent < g.gateAt {
		n = min(n, g.gateAt-g.sent)
	}
	_, _ = g.rng.Read(p[:n])
	g.sum.Write(p[:n])
	g.left -= n
	g.sent += n
	return int(n), nil
}

// heapPeak samples the Go heap in use until stop is called and returns
// the highest sample.
func heapPeak() (stop func() uint64) {
	done := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var ms runtime.MemStats
		var top uint64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			top = max(top, ms.HeapInuse)
			select {
			case <-done:
				peak <- top
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { close(done); return <-peak }
}

// TestFilesLargeUploadStreams uploads 100 MiB and checks that the server
// streams it: bytes reach the sandbox while the client still holds the
// rest back, the Go heap (server and client share this process) stays far
// below the file's size, and the file arrives exact. The download streams
// the same way.
func TestFilesLargeUploadStreams(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	id, sbx := sb.ID, "/v1/sandboxes/"+sb.ID
	e.must(200, "POST", sbx+"/files/mkdir", agentapi.MkdirRequest{Path: "stream"}, nil)

	const size = 100 << 20
	const gateAt = 16 << 20
	src := &gatedReader{left: size, gateAt: gateAt, rng: randv2.NewChaCha8([32]byte{1, 2, 3}),
		sum: sha256.New(), reached: make(chan struct{}), gate: make(chan struct{})}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	stopHeap := heapPeak()

	type answer struct {
		status int
		body   []byte
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("PUT", e.http.URL+sbx+"/files?path=stream/big.bin", src)
		req.ContentLength = size
		req.Header.Set("Authorization", "Bearer "+e.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- answer{status: resp.StatusCode, body: body}
	}()
	select {
	case <-src.reached:
	case a := <-done:
		t.Fatalf("the upload ended before the client sent %d bytes: %+v", gateAt, a)
	case <-time.After(30 * time.Second):
		t.Fatal("the client did not get to send 16 MiB in 30 s")
	}
	// The client holds the rest back: the sandbox must already have most
	// of what was sent, in the upload's temporary file.
	var inside int64
	func() {
		defer close(src.gate)
		waitFor(t, 15*time.Second, "uploaded bytes to reach the sandbox mid-upload", func() bool {
			out := e.sh(id, "find /workspace/stream -type f -printf '%s\\n'").Stdout
			inside = 0
			for _, f := range strings.Fields(out) {
				n, _ := strconv.ParseInt(f, 10, 64)
				inside += n
			}
			return inside >= 8<<20
		})
	}()
	t.Logf("mid-upload, %d MiB of the %d MiB sent were in the sandbox", inside>>20, gateAt>>20)
	var a answer
	select {
	case a = <-done:
	case <-time.After(120 * time.Second):
		t.Fatal("the 100 MiB upload did not finish in 120 s")
	}
	if a.err != nil || a.status != 200 {
		t.Fatalf("upload: %d %s %v", a.status, a.body, a.err)
	}
	var fi agentapi.FileInfo
	if err := json.Unmarshal(a.body, &fi); err != nil || fi.Size != size || fi.Path != "/workspace/stream/big.bin" {
		t.Fatalf("uploaded file: %s", a.body)
	}
	want := hex.EncodeToString(src.sum.Sum(nil))
	if res := e.exec(id, agentapi.ExecRequest{Command: "sha256sum stream/big.bin; ls -A stream", TimeoutSeconds: 60}); res.Stdout != want+"  stream/big.bin\nbig.bin\n" {
		t.Errorf("inside: %q, want sha256 %s and only big.bin", res.Stdout, want)
	}

	// Download it, hashing as it streams.
	req, _ := http.NewRequest("GET", e.http.URL+sbx+"/files?path=stream/big.bin", nil)
	req.Header.Set("Authorization", "Bearer "+e.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	resp.Body.Close()
	if err != nil || n != size || hex.EncodeToString(h.Sum(nil)) != want || resp.ContentLength != size {
		t.Errorf("download: %d bytes (Content-Length %d), err %v, sha256 %x", n, resp.ContentLength, err, h.Sum(nil))
	}

	peak := stopHeap()
	t.Logf("Go heap in use: %d MiB before, %d MiB at the peak", base>>20, peak>>20)
	if peak > base+48<<20 {
		t.Errorf("the Go heap grew by %d MiB while moving a 100 MiB file: something buffers it", (peak-base)>>20)
	}
}
