package itest

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	withruntime "withruntime.dev/runtime/sdk/go"
)

// pauseFiles pauses sandbox id with its files alone and checks the answer.
func (e *env) pauseFiles(id string) api.Sandbox {
	e.t.Helper()
	var sb api.Sandbox
	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+id+"/pause", api.PauseRequest{Mode: "filesystem"}, &sb)
	if sb.State != "paused" || sb.ImageMode != "filesystem" || sb.PausedAt == nil || sb.ImageBytes <= 0 {
		e.t.Fatalf("after a filesystem pause: %+v, want paused, imageMode filesystem, with an image", sb)
	}
	return sb
}

// sandboxRunning reports whether a runsc-sandbox process of sandbox id
// (gVisor's kernel, which holds its memory) runs on the host.
func sandboxRunning(id string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if strings.HasPrefix(string(b), "runsc-sandbox\x00") && strings.Contains(string(b), "/"+id+"/bundle") {
			return true
		}
	}
	return false
}

// TestPauseFilesystem: a filesystem pause keeps the files of the root
// filesystem (written, changed, deleted) and nothing else: while paused no
// process of the sandbox runs on the host (its memory is freed); the
// resume boots it fresh with the same id, its files, environment, memory
// and disk, without its processes (a background sleep, a listening
// server) or /tmp. The fresh sandbox pauses again both ways, and its
// files survive a second filesystem pause (the layer it booted with is in
// the next archive). A lease-end pause with pauseMode filesystem does the
// same, and a request resumes it (autoResume).
func TestPauseFilesystem(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{Env: map[string]string{"FOO": "bar"}, MemoryMiB: 384, DiskMiB: 512, TimeoutSeconds: 600})
	if sb.PauseMode != "full" {
		t.Errorf("create: pauseMode %q, want full by default", sb.PauseMode)
	}
	res := e.rootSh(sb.ID, "echo kept > /workspace/a.txt && mkdir -p /opt/app && head -c 3000000 /dev/urandom > /opt/app/blob && "+
		"sha256sum /opt/app/blob | cut -c1-64 && rm /etc/issue && echo gone > /tmp/t && (setsid sleep 1000 >/dev/null 2>&1 &)")
	if res.ExitCode != 0 {
		t.Fatalf("setup: %+v", res)
	}
	sum := strings.TrimSpace(res.Stdout)
	bootBefore := e.sh(sb.ID, "cat /proc/sys/kernel/random/boot_id").Stdout
	e.startCounter(sb.ID)
	if !sandboxRunning(sb.ID) {
		t.Fatalf("no runsc-sandbox process of %s before the pause", sb.ID)
	}

	start := time.Now()
	p := e.pauseFiles(sb.ID)
	t.Logf("filesystem pause: %v, image %d bytes", time.Since(start), p.ImageBytes)
	if p.ImageBytes < 3000000 || p.ImageBytes > 64<<20 {
		t.Errorf("image of 3 MB of files: %d bytes", p.ImageBytes)
	}
	if sandboxRunning(sb.ID) {
		t.Errorf("the sandbox's runsc-sandbox process runs while it is paused with its files alone")
	}
	if cgs := cgroupsOf(sb.ID); len(cgs) > 0 {
		t.Errorf("the sandbox's cgroups (its memory) are held while it is paused with its files alone: %v", cgs)
	}
	if got := e.get(sb.ID); got.State != "paused" || got.ImageMode != "filesystem" {
		t.Errorf("GET while paused: %+v", got)
	}
	// Not autoResume: requests are refused.
	status, data := e.do("POST", "/v1/sandboxes/"+sb.ID+"/exec", agentapi.ExecRequest{Command: "true"})
	if status != http.StatusConflict || errorCode(t, data) != "sandbox_paused" {
		t.Fatalf("exec while paused: %d %s, want 409 sandbox_paused", status, data)
	}

	start = time.Now()
	r := e.resume(sb.ID)
	t.Logf("resume from files: %v", time.Since(start))
	if r.ID != sb.ID || r.ImageMode != "" || r.MemoryMiB != 384 || r.DiskMiB != 512 {
		t.Errorf("after the resume: %+v", r)
	}
	check := func(when string) {
		t.Helper()
		got := e.rootSh(sb.ID, "cat /workspace/a.txt; sha256sum /opt/app/blob | cut -c1-64; test -e /etc/issue && echo issue; "+
			"test -e /tmp/t && echo tmp; pgrep -x sleep >/dev/null && echo sleeping; curl -s -m 2 localhost:8000/ && echo counting; echo env=$FOO; echo ok")
		want := "kept\n" + sum + "\nenv=bar\nok\n"
		if got.Stdout != want {
			t.Errorf("%s: %q, want %q (stderr %q)", when, got.Stdout, want, got.Stderr)
		}
	}
	check("after the resume from files")
	if after := e.sh(sb.ID, "cat /proc/sys/kernel/random/boot_id").Stdout; after == bootBefore || after == "" {
		t.Errorf("boot_id after the resume from files: %q, before %q: want a new one (a fresh boot)", after, bootBefore)
	}

	// It writes on, then pauses whole and resumes.
	if res := e.sh(sb.ID, "echo second > /workspace/b.txt && (setsid sleep 2000 >/dev/null 2>&1 &)"); res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	e.pause(sb.ID)
	e.resume(sb.ID)
	if got := e.sh(sb.ID, "cat /workspace/b.txt; pgrep -x sleep >/dev/null && echo sleeping").Stdout; got != "second\nsleeping\n" {
		t.Errorf("after a full pause of the files-booted sandbox: %q", got)
	}
	// A second filesystem pause keeps the files of both rounds.
	e.pauseFiles(sb.ID)
	e.resume(sb.ID)
	check("after a second filesystem pause")
	if got := e.sh(sb.ID, "cat /workspace/b.txt; pgrep -x sleep >/dev/null && echo sleeping").Stdout; got != "second\n" {
		t.Errorf("after the second filesystem pause: %q, want the second round's file and no process", got)
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
	if left := e.leftovers(sb.ID); len(left) > 0 {
		t.Errorf("left on the host: %v", left)
	}

	// The lease end pauses with the files alone; a request resumes it.
	ls := e.create(api.CreateSandboxRequest{TimeoutSeconds: 5, OnLeaseEnd: "pause", PauseMode: "filesystem"})
	if ls.PauseMode != "filesystem" || !ls.AutoResume {
		t.Fatalf("create: %+v, want pauseMode filesystem with autoResume", ls)
	}
	e.sh(ls.ID, "echo at-lease-end > /workspace/f && (setsid sleep 1000 >/dev/null 2>&1 &)")
	var paused api.Sandbox
	waitFor(t, 30*time.Second, "the lease end to pause the sandbox", func() bool {
		paused = e.get(ls.ID)
		return paused.State != "running"
	})
	if paused.State != "paused" || paused.ImageMode != "filesystem" {
		t.Fatalf("at its lease end: %+v, want paused with its files", paused)
	}
	// The record says paused once the image is complete; the sandbox is
	// stopped right after.
	waitFor(t, 10*time.Second, "the lease-end filesystem pause to stop the sandbox's process", func() bool {
		return !sandboxRunning(ls.ID)
	})
	if got := e.sh(ls.ID, "cat /workspace/f; pgrep -x sleep || echo no-sleep"); got.Stdout != "at-lease-end\nno-sleep\n" {
		t.Errorf("exec on the paused sandbox: %+v", got)
	}
	// set-timeout changes the mode back.
	var st api.Sandbox
	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+ls.ID+"/timeout", api.SetTimeoutRequest{TimeoutSeconds: 60, PauseMode: "full"}, &st)
	if st.PauseMode != "full" {
		t.Errorf("after set-timeout pauseMode full: %+v", st)
	}
	e.expectError(http.StatusBadRequest, "bad_request", "POST", "/v1/sandboxes/"+ls.ID+"/pause", map[string]any{"mode": "memory"})
	e.expectError(http.StatusBadRequest, "bad_request", "POST", "/v1/sandboxes", map[string]any{"pauseMode": "disk"})
}

// TestPauseFilesystemHostile: root in a sandbox plants what would escape if
// the host unpacked its files — a symlink to a host file holding a secret,
// a symlinked host directory, device nodes for a host disk and for kernel
// memory, a setuid-root copy of cat — and pauses with its files alone, then
// resumes. The host file and directory are untouched, the device nodes
// are gone, the links resolve inside the sandbox, the setuid file is
// gVisor root's only. A sparse file far past the disk is refused (409
// naming it) as the stream passes the disk size, nothing is kept, and the
// sandbox runs on. Another tenant's key cannot see, pause or resume it
// (404).
func TestPauseFilesystemHostile(t *testing.T) {
	e := newEnv(t)
	hostDir := filepath.Join(e.dataDir, "host-only")
	if err := os.MkdirAll(hostDir, 0o700); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(hostDir, "secret")
	if err := os.WriteFile(secret, []byte("HOST-SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ta, tb := e.asTenant("fs-pause-a"), e.asTenant("fs-pause-b")
	a := ta.create(api.CreateSandboxRequest{DiskMiB: 64, MemoryMiB: 2048, TimeoutSeconds: 600})

	// The sparse file first: refused, nothing kept, it runs on.
	if res := ta.rootSh(a.ID, "truncate -s 1536M /root/sparse && du -k /root/sparse"); res.ExitCode != 0 {
		t.Fatalf("sparse file: %+v", res)
	}
	status, data := ta.do("POST", "/v1/sandboxes/"+a.ID+"/pause", api.PauseRequest{Mode: "filesystem"})
	t.Logf("filesystem pause with a 1.5 GiB sparse file on a 64 MiB disk: %d %s", status, data)
	if status != http.StatusConflict || !strings.Contains(string(data), "sparse file") {
		t.Fatalf("a 1.5 GiB archive of a 64 MiB disk: %d %s, want 409 naming the sparse file", status, data)
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, "gvisor", "sandboxes", a.ID, "images")); err == nil {
		t.Errorf("the refused pause left an images directory")
	}
	if got := ta.sh(a.ID, "echo alive").Stdout; got != "alive\n" {
		t.Fatalf("the sandbox after the refused pause: %q", got)
	}
	if got := ta.get(a.ID); got.State != "running" {
		t.Fatalf("after the refused pause: %+v", got)
	}
	ta.rootSh(a.ID, "rm /root/sparse")

	plant := ta.rootSh(a.ID, strings.Join([]string{
		"ln -s " + secret + " /workspace/secret",
		"ln -s " + hostDir + " /workspace/hostdir",
		"ln -s / /workspace/root",
		"mknod /workspace/sda b 8 0; echo mknod-b=$?",
		"mknod /workspace/kmem c 1 2; echo mknod-c=$?",
		"cp /bin/cat /workspace/suidcat && chmod 4755 /workspace/suidcat",
		"echo root-only > /root/private && chmod 600 /root/private",
		"ls -la /workspace",
	}, "; "))
	t.Logf("planted: %s %s", plant.Stdout, plant.Stderr)

	// Another tenant: 404 for everything about it.
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/sandboxes/" + a.ID, nil},
		{"POST", "/v1/sandboxes/" + a.ID + "/pause", api.PauseRequest{Mode: "filesystem"}},
		{"POST", "/v1/sandboxes/" + a.ID + "/resume", nil},
	} {
		if status, data := tb.do(c.method, c.path, c.body); status != http.StatusNotFound {
			t.Errorf("B: %s %s: %d %s, want 404", c.method, c.path, status, data)
		}
	}
	ta.pauseFiles(a.ID)
	imgDir := filepath.Join(e.dataDir, "gvisor", "sandboxes", a.ID, "images", "current")
	entries, err := os.ReadDir(imgDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ent := range entries {
		names = append(names, ent.Name())
	}
	if !slices.Equal(names, []string{"rootfs-upper.tar"}) {
		t.Errorf("image directory holds %v", names)
	}
	if status, data := tb.do("POST", "/v1/sandboxes/"+a.ID+"/resume", nil); status != http.StatusNotFound {
		t.Errorf("B resumes A's paused sandbox: %d %s, want 404", status, data)
	}
	var list api.SandboxList
	tb.must(http.StatusOK, "GET", "/v1/sandboxes?state=paused", nil, &list)
	if len(list.Sandboxes) != 0 {
		t.Errorf("B lists paused sandboxes: %+v", list.Sandboxes)
	}
	ta.resume(a.ID)

	for _, c := range []struct{ user, cmd, mustNot string }{
		{"root", "cat /workspace/secret; cat /workspace/hostdir/secret; cat /workspace/root" + secret, "HOST-SECRET"},
		{"root", "ls -la /workspace/hostdir/ " + hostDir + " 2>&1", "secret"},
		{"root", "ls /workspace/sda /workspace/kmem 2>&1 | grep -v 'No such'", "/workspace/"},
		{"user", "/workspace/suidcat " + secret + " 2>&1", "HOST-SECRET"},
		{"root", "find / -xdev -name 'rootfs-upper*' 2>/dev/null", "/"},
	} {
		res := ta.exec(a.ID, agentapi.ExecRequest{Command: c.cmd, User: c.user})
		if strings.Contains(res.Stdout+res.Stderr, c.mustNot) {
			t.Errorf("after the resume, as %s, %q: %q %q contains %q", c.user, c.cmd, res.Stdout, res.Stderr, c.mustNot)
		}
	}
	res := ta.sh(a.ID, "readlink /workspace/secret; stat -c %a /workspace/suidcat; /workspace/suidcat /root/private")
	if res.Stdout != secret+"\n4755\nroot-only\n" {
		t.Errorf("after the resume: %q %q", res.Stdout, res.Stderr)
	}
	after, _ := os.ReadDir(hostDir)
	if len(after) != 1 || after[0].Name() != "secret" {
		t.Errorf("the host directory now holds %v", after)
	}
	if data, _ := os.ReadFile(secret); string(data) != "HOST-SECRET\n" {
		t.Errorf("the host secret now reads %q", data)
	}
}

// TestForkFilesystem: a fork in mode filesystem is one files-only snapshot
// and count fresh boots: each copy has the source's files and none of its
// processes, writes of its own, and the snapshot is gone afterwards (not
// kept). The source runs on with its processes.
func TestForkFilesystem(t *testing.T) {
	e := newEnv(t)
	src := e.create(api.CreateSandboxRequest{TimeoutSeconds: 600})
	e.startCounter(src.ID)
	e.sh(src.ID, "echo shared > /workspace/f")
	start := time.Now()
	var fr api.ForkResult
	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+src.ID+"/fork", api.ForkRequest{Count: 3, Mode: "filesystem", Env: map[string]string{"FORKED": "yes"}}, &fr)
	t.Logf("files-only fork of 3: %s", time.Since(start))
	if fr.SnapshotKept || fr.Snapshot.Mode != "filesystem" || len(fr.Sandboxes) != 3 {
		t.Fatalf("fork: %+v", fr)
	}
	for i, f := range fr.Sandboxes {
		if f.Sandbox == nil || f.Error != nil {
			t.Fatalf("fork %d failed: %+v", i, f.Error)
		}
		got := e.sh(f.Sandbox.ID, "cat /workspace/f; curl -s -m 2 localhost:8000/ || echo no-server; echo $FORKED").Stdout
		if got != "shared\nno-server\nyes\n" {
			t.Errorf("fork %d: %q", i, got)
		}
	}
	e.sh(fr.Sandboxes[0].Sandbox.ID, "echo mine > /workspace/f")
	if got := e.sh(fr.Sandboxes[1].Sandbox.ID, "cat /workspace/f").Stdout; got != "shared\n" {
		t.Errorf("a sibling saw the first fork's write: %q", got)
	}
	if got := e.count(src.ID); got == "" {
		t.Errorf("the source's server after the fork: %q", got)
	}
	status, _ := e.do("GET", "/v1/snapshots/"+fr.Snapshot.ID, nil)
	if status != http.StatusNotFound || slices.Contains(e.snapshotImages(), fr.Snapshot.ID) {
		t.Errorf("the fork's snapshot was kept: GET %d, images %v", status, e.snapshotImages())
	}
	e.expectError(http.StatusBadRequest, "bad_request", "POST", "/v1/sandboxes/"+src.ID+"/fork", map[string]any{"count": 1, "mode": "memory"})
}

// TestPauseFilesystemCLIAndSDK: `withruntime sandbox pause --filesystem`
// and the Go SDK's PauseFiles.
func TestPauseFilesystemCLIAndSDK(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	e.sh(sb.ID, "echo kept > /workspace/f && (setsid sleep 1000 >/dev/null 2>&1 &)")
	if r := e.cli(nil, "sandbox", "pause", "--filesystem", sb.ID); r.code != 0 || !strings.Contains(r.stdout, sb.ID+" paused (files") {
		t.Fatalf("sandbox pause --filesystem: %+v", r)
	}
	if got := e.get(sb.ID); got.ImageMode != "filesystem" {
		t.Errorf("after the CLI's pause: %+v", got)
	}
	if r := e.cli(nil, "sandbox", "resume", sb.ID); r.code != 0 {
		t.Fatalf("sandbox resume: %+v", r)
	}
	if got := e.sh(sb.ID, "cat /workspace/f; pgrep -x sleep || echo none").Stdout; got != "kept\nnone\n" {
		t.Errorf("after the CLI's pause and resume: %q", got)
	}
	c := e.sdkClient()
	ctx := context.Background()
	sbx, err := c.Connect(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sbx.Run(ctx, "echo sdk > /workspace/g"); err != nil {
		t.Fatal(err)
	}
	if err := sbx.PauseFiles(ctx); err != nil || sbx.Info().State != "paused" || sbx.Info().ImageMode != withruntime.PauseFilesystem {
		t.Fatalf("SDK PauseFiles: %v %+v", err, sbx.Info())
	}
	if err := sbx.Resume(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if res, err := sbx.Run(ctx, "cat /workspace/f /workspace/g"); err != nil || res.Stdout != "kept\nsdk\n" {
		t.Errorf("after PauseFiles and Resume: %+v %v", res, err)
	}
}

// TestPausedFilesystemSurvivesRestart: a sandbox paused with its files
// alone is listed by the next server on the same data directory (its image
// found again) and resumes there with its files.
func TestPausedFilesystemSurvivesRestart(t *testing.T) {
	dataDir, err := os.MkdirTemp("/tmp", "wr-pause-files-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	a := newEnv(t, withDataDir(dataDir))
	sb := a.create(api.CreateSandboxRequest{})
	a.sh(sb.ID, "echo kept > /workspace/f")
	a.pauseFiles(sb.ID)
	a.detach()
	b := newEnv(t, withDataDir(dataDir))
	var list api.SandboxList
	b.must(http.StatusOK, "GET", "/v1/sandboxes?state=paused", nil, &list)
	if len(list.Sandboxes) != 1 || list.Sandboxes[0].ID != sb.ID || list.Sandboxes[0].ImageMode != "filesystem" {
		t.Fatalf("paused sandboxes after the restart: %+v", list.Sandboxes)
	}
	b.resume(sb.ID)
	if got := b.sh(sb.ID, "cat /workspace/f").Stdout; got != "kept\n" {
		t.Fatalf("after a restart and resume: %q", got)
	}
}

// TestPauseFilesystemImageSize: a sandbox holding 200 MiB of Python
// objects in memory and 20 MB of files: its full pause image holds both,
// its filesystem pause image the files alone (measured and logged, with
// the pause and resume times of each).
func TestPauseFilesystemImageSize(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{MemoryMiB: 1024, TimeoutSeconds: 600})
	var p agentapi.Process
	e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+sb.ID+"/processes", agentapi.ExecRequest{
		Command: `python3 -c 'import os, time; x = [os.urandom(1 << 20) for _ in range(200)]; open("/tmp/ready", "w").write("1"); time.sleep(3600)'`,
	}, &p)
	if res := e.sh(sb.ID, "head -c 20000000 /dev/urandom > /workspace/files && for i in $(seq 300); do test -e /tmp/ready && exit 0; sleep 0.1; done; exit 1"); res.ExitCode != 0 {
		t.Fatalf("setup: %+v", res)
	}
	start := time.Now()
	full := e.pause(sb.ID)
	pauseFull := time.Since(start)
	start = time.Now()
	e.resume(sb.ID)
	resumeFull := time.Since(start)
	start = time.Now()
	files := e.pauseFiles(sb.ID)
	pauseFiles := time.Since(start)
	start = time.Now()
	e.resume(sb.ID)
	resumeFiles := time.Since(start)
	t.Logf("full pause: image %d MiB, pause %v, resume %v; filesystem pause: image %d MiB, pause %v, resume %v",
		full.ImageBytes>>20, pauseFull, resumeFull, files.ImageBytes>>20, pauseFiles, resumeFiles)
	if full.ImageBytes < 200<<20 || files.ImageBytes < 19<<20 || files.ImageBytes > 40<<20 {
		t.Errorf("images: full %d bytes (want ≥ 200 MiB), files %d bytes (want about 20 MB)", full.ImageBytes, files.ImageBytes)
	}
	if got := e.sh(sb.ID, "wc -c < /workspace/files; test -e /tmp/ready && echo ready").Stdout; got != "20000000\n" {
		t.Errorf("after the filesystem resume: %q, want the files alone", got)
	}
}

// TestPauseFilesystemBilledAndCounted: a sandbox paused with its files
// alone is billed its image at the storage price and no CPU or memory, as
// a full pause's, and counts in its key's paused quota: a second pause past
// a quota of one is 429 and that sandbox runs on.
func TestPauseFilesystemBilledAndCounted(t *testing.T) {
	e := newEnv(t, withMeterInterval(300*time.Millisecond), withStoragePrice(3.6e9)) // 1e6 µ$ per GiB-second
	var k api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: "fs-paused-quota", DailyLimitMicros: 1 << 40, PausedQuota: 1}, &k)
	te := e.as(k.Secret)
	a := te.create(api.CreateSandboxRequest{})
	b := te.create(api.CreateSandboxRequest{})
	te.sh(a.ID, "head -c 8000000 /dev/urandom > /workspace/blob")
	paused := te.pauseFiles(a.ID)
	time.Sleep(time.Second)
	before := te.sandboxRow(a.ID)
	time.Sleep(2 * time.Second)
	after := te.sandboxRow(a.ID)
	if after.CPUSeconds != before.CPUSeconds || after.GiBSeconds != before.GiBSeconds {
		t.Errorf("billed CPU or memory while paused with its files: before %+v, after %+v", before, after)
	}
	want := float64(paused.ImageBytes) / (1 << 30) * 2
	if grown := after.StorageGiBSeconds - before.StorageGiBSeconds; grown < want*0.4 || grown > want*1.8 {
		t.Errorf("storage billed over 2 s paused: %.5f GiB-s, want about %.5f (image %d bytes)", grown, want, paused.ImageBytes)
	}
	status, data := te.do("POST", "/v1/sandboxes/"+b.ID+"/pause", api.PauseRequest{Mode: "filesystem"})
	if status != http.StatusTooManyRequests || errorCode(t, data) != "quota_exceeded" {
		t.Errorf("a second filesystem pause past a paused quota of 1: %d %s, want 429 quota_exceeded", status, data)
	}
	if got := te.get(b.ID); got.State != "running" {
		t.Errorf("after the refused pause: %+v", got)
	}
}
