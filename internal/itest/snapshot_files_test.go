package itest

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/sandbox"
)

// TestSnapshotFilesystem: a files-only snapshot is taken while the source
// runs on (a command in flight finishes, its background process lives);
// a sandbox created from it boots fresh with the files written and the
// deletions made (an overlay whiteout), without the source's processes or
// /tmp, with the create's env, memory and a larger disk; a smaller disk is
// refused. The copy can be paused and resumed (its layer's archive is its
// own), snapshotted whole, and outlives the snapshot's delete.
func TestSnapshotFilesystem(t *testing.T) {
	e := newEnv(t)
	src := e.create(api.CreateSandboxRequest{MemoryMiB: 256, DiskMiB: 512, TimeoutSeconds: 600})
	res := e.rootSh(src.ID, "echo kept > /workspace/a.txt && mkdir -p /opt/app && head -c 3000000 /dev/urandom > /opt/app/blob && "+
		"sha256sum /opt/app/blob | cut -c1-64 && rm /etc/issue && echo gone > /tmp/t && (setsid sleep 1000 >/dev/null 2>&1 &)")
	if res.ExitCode != 0 {
		t.Fatalf("setup: %+v", res)
	}
	sum := strings.TrimSpace(res.Stdout)

	// A command in flight at the snapshot is not interrupted.
	var wg sync.WaitGroup
	var inflight agentapi.ExecResult
	wg.Add(1)
	go func() {
		defer wg.Done()
		inflight = e.sh(src.ID, "sleep 2; echo done")
	}()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	sn := e.snapshot(src.ID, api.CreateSnapshotRequest{Mode: "filesystem", Name: "files"})
	took := time.Since(start)
	wg.Wait()
	if inflight.ExitCode != 0 || inflight.Stdout != "done\n" {
		t.Errorf("the command in flight: %+v", inflight)
	}
	if sn.Mode != "filesystem" || sn.Bytes < 3000000 || sn.Template != "base" || sn.DiskMiB != 512 {
		t.Errorf("snapshot: %+v", sn)
	}
	t.Logf("files-only snapshot: %d bytes in %v", sn.Bytes, took)
	if got := e.sh(src.ID, "pgrep -x sleep >/dev/null && cat /workspace/a.txt").Stdout; got != "kept\n" {
		t.Errorf("the source after the snapshot: %q", got)
	}

	for _, c := range []struct {
		req  api.CreateSandboxRequest
		want string
	}{
		{api.CreateSandboxRequest{Snapshot: sn.ID, DiskMiB: 256}, "512 MiB or more"},
		// 3 MiB of files: 2 × 3 + 128 MiB at boot.
		{api.CreateSandboxRequest{Snapshot: sn.ID, MemoryMiB: 128}, "134 MiB or more"},
		{api.CreateSandboxRequest{Snapshot: sn.ID, Template: "code-interpreter"}, "omit template"},
	} {
		status, data := e.do("POST", "/v1/sandboxes", c.req)
		if status != http.StatusBadRequest || !strings.Contains(string(data), c.want) {
			t.Errorf("create %+v: %d %s, want 400 naming %q", c.req, status, data, c.want)
		}
	}

	start = time.Now()
	cp := e.create(api.CreateSandboxRequest{Snapshot: "files", MemoryMiB: 512, DiskMiB: 1024, Env: map[string]string{"FROM": "create"}})
	t.Logf("create from the files-only snapshot: %v", time.Since(start))
	if cp.MemoryMiB != 512 || cp.DiskMiB != 1024 || cp.Template != "base" {
		t.Errorf("copy: %+v", cp)
	}
	check := func(id string) {
		t.Helper()
		got := e.rootSh(id, "cat /workspace/a.txt; sha256sum /opt/app/blob | cut -c1-64; test -e /etc/issue && echo issue; "+
			"test -e /tmp/t && echo tmp; pgrep -x sleep && echo sleeping; echo env=$FROM; echo ok")
		want := "kept\n" + sum + "\nenv=create\nok\n"
		if got.Stdout != want {
			t.Errorf("sandbox %s: %q, want %q (stderr %q)", id, got.Stdout, want, got.Stderr)
		}
	}
	check(cp.ID)
	// Writes in the copy are its own.
	if res := e.rootSh(cp.ID, "echo copy > /workspace/a.txt"); res.ExitCode != 0 {
		t.Fatalf("write in the copy: %+v", res)
	}
	if got := e.sh(src.ID, "cat /workspace/a.txt").Stdout; got != "kept\n" {
		t.Errorf("the source saw the copy's write: %q", got)
	}

	// The snapshot deleted, the copy runs on, pauses and resumes.
	e.must(http.StatusNoContent, "DELETE", "/v1/snapshots/"+sn.ID, nil, nil)
	if imgs := e.snapshotImages(); slices.Contains(imgs, sn.ID) {
		t.Errorf("images after the delete: %v", imgs)
	}
	e.pause(cp.ID)
	e.resume(cp.ID)
	if got := e.sh(cp.ID, "cat /workspace/a.txt /opt/app/blob | wc -c").Stdout; got != "3000005\n" {
		t.Errorf("after pause and resume: %q", got)
	}
	// A full snapshot of it restores.
	full := e.snapshot(cp.ID, api.CreateSnapshotRequest{})
	again := e.create(api.CreateSandboxRequest{Snapshot: full.ID})
	if got := e.sh(again.ID, "cat /workspace/a.txt").Stdout; got != "copy\n" {
		t.Errorf("a full snapshot of the files-booted sandbox: %q", got)
	}
	for _, id := range []string{src.ID, cp.ID, again.ID} {
		e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+id, nil, nil)
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/snapshots/"+full.ID, nil, nil)
}

// TestSnapshotFilesystemVolume: a sandbox that mounts a volume may take a
// files-only snapshot; the volume's files are not in it, and a sandbox
// created from it may mount the volume itself.
func TestSnapshotFilesystemVolume(t *testing.T) {
	e := newEnv(t)
	var vol api.Volume
	e.must(http.StatusCreated, "POST", "/v1/volumes", api.CreateVolumeRequest{Name: "snapvol", SizeMiB: 64}, &vol)
	src := e.create(api.CreateSandboxRequest{Volumes: []api.VolumeMount{{Name: "snapvol", Path: "/data"}}})
	if res := e.sh(src.ID, "echo in-volume > /data/v.txt && echo in-root > /workspace/r.txt"); res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	sn := e.snapshot(src.ID, api.CreateSnapshotRequest{Mode: "filesystem"})
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+src.ID, nil, nil)
	bare := e.create(api.CreateSandboxRequest{Snapshot: sn.ID})
	if got := e.sh(bare.ID, "cat /workspace/r.txt; ls -A /data 2>/dev/null | wc -l").Stdout; got != "in-root\n0\n" {
		t.Errorf("without the volume: %q, want the root's file and no volume file", got)
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+bare.ID, nil, nil)
	with := e.create(api.CreateSandboxRequest{Snapshot: sn.ID, Volumes: []api.VolumeMount{{Name: "snapvol", Path: "/data"}}})
	if got := e.sh(with.ID, "cat /workspace/r.txt /data/v.txt").Stdout; got != "in-root\nin-volume\n" {
		t.Errorf("with the volume: %q", got)
	}
	// A full snapshot cannot carry volumes into a create.
	plain := e.create(api.CreateSandboxRequest{})
	full := e.snapshot(plain.ID, api.CreateSnapshotRequest{})
	status, data := e.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{Snapshot: full.ID, Volumes: []api.VolumeMount{{Name: "snapvol", Path: "/data"}}})
	if status != http.StatusBadRequest || !strings.Contains(string(data), "filesystem") {
		t.Errorf("volumes with a full snapshot: %d %s", status, data)
	}
}

// TestSnapshotFilesystemHostile: root in a sandbox plants what would
// escape if the host unpacked its files — a symlink to a host path that
// holds a secret, a symlinked directory, device nodes for a host disk and
// for kernel memory, a setuid-root copy of cat — then takes a files-only
// snapshot, restored into another sandbox. The secret is never read, the
// device nodes are gone, the setuid file reads as root inside only, the
// host directory is untouched, and the image holds just the archive and
// its note, named nowhere inside.
func TestSnapshotFilesystemHostile(t *testing.T) {
	e := newEnv(t)
	hostDir := filepath.Join(e.dataDir, "host-only")
	if err := os.MkdirAll(hostDir, 0o700); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(hostDir, "secret")
	if err := os.WriteFile(secret, []byte("HOST-SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := e.create(api.CreateSandboxRequest{})
	plant := e.rootSh(a.ID, strings.Join([]string{
		"ln -s " + secret + " /workspace/secret",
		"ln -s " + hostDir + " /workspace/hostdir",
		"ln -s / /workspace/root",
		"mknod /workspace/sda b 8 0; echo mknod-b=$?",
		"mknod /workspace/kmem c 1 2; echo mknod-c=$?",
		"cp /bin/cat /workspace/suidcat && chmod 4755 /workspace/suidcat",
		"echo root-only > /root/private && chmod 600 /root/private",
		"ls -la /workspace",
	}, "; "))
	t.Logf("planted in A: %s %s", plant.Stdout, plant.Stderr)
	sn := e.snapshot(a.ID, api.CreateSnapshotRequest{Mode: "filesystem"})

	// The image: the archive and its note, nothing else.
	imgDir := filepath.Join(e.dataDir, "gvisor", "snapshots", sn.ID)
	entries, err := os.ReadDir(imgDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ent := range entries {
		names = append(names, ent.Name())
	}
	if !slices.Equal(names, []string{"rootfs-upper.tar", "snapshot.json"}) {
		t.Errorf("image directory holds %v", names)
	}

	b := e.create(api.CreateSandboxRequest{Snapshot: sn.ID})
	for _, c := range []struct{ user, cmd, mustNot string }{
		{"root", "cat /workspace/secret; cat /workspace/hostdir/secret; cat /workspace/root" + secret, "HOST-SECRET"},
		{"root", "ls -la /workspace/hostdir/ " + hostDir + " 2>&1", "secret"},
		{"root", "ls /workspace/sda /workspace/kmem 2>&1 | grep -v 'No such'", "/workspace/"},
		{"user", "/workspace/suidcat " + secret + " 2>&1", "HOST-SECRET"},
		{"root", "find / -xdev -name 'rootfs-upper*' 2>/dev/null; find / -xdev -name 'snapshot.json' 2>/dev/null", "/"},
	} {
		res := e.exec(b.ID, agentapi.ExecRequest{Command: c.cmd, User: c.user})
		if strings.Contains(res.Stdout+res.Stderr, c.mustNot) {
			t.Errorf("in B, as %s, %q: %q %q contains %q", c.user, c.cmd, res.Stdout, res.Stderr, c.mustNot)
		}
	}
	// What the files are inside B: the links are links (resolving inside
	// B), the setuid bit is kept and gives gVisor's root inside B only.
	res := e.sh(b.ID, "readlink /workspace/secret; stat -c %a /workspace/suidcat; /workspace/suidcat /root/private")
	if res.Stdout != secret+"\n4755\nroot-only\n" {
		t.Errorf("in B: %q %q", res.Stdout, res.Stderr)
	}
	// The host directory is as it was.
	after, _ := os.ReadDir(hostDir)
	if len(after) != 1 || after[0].Name() != "secret" {
		t.Errorf("the host directory now holds %v", after)
	}
	if data, _ := os.ReadFile(secret); string(data) != "HOST-SECRET\n" {
		t.Errorf("the host secret now reads %q", data)
	}
}

// TestSnapshotRetention: under serve --snapshot-retention, a snapshot's
// record says when it expires, and it is deleted then (record, image and
// billing), while a sandbox made from it runs on.
func TestSnapshotRetention(t *testing.T) {
	e := newEnv(t, withLimits(func(l *sandbox.Limits) { l.SnapshotRetention = 4 * time.Second }))
	src := e.create(api.CreateSandboxRequest{})
	e.sh(src.ID, "echo x > /workspace/x")
	sn := e.snapshot(src.ID, api.CreateSnapshotRequest{Mode: "filesystem"})
	if sn.ExpiresAt == nil || !sn.ExpiresAt.Equal(sn.CreatedAt.Add(4*time.Second)) {
		t.Fatalf("expiresAt %v, want createdAt %v + 4s", sn.ExpiresAt, sn.CreatedAt)
	}
	cp := e.create(api.CreateSandboxRequest{Snapshot: sn.ID})
	waitFor(t, 20*time.Second, "the expired snapshot's deletion", func() bool {
		status, _ := e.do("GET", "/v1/snapshots/"+sn.ID, nil)
		return status == http.StatusNotFound
	})
	if gone := time.Since(*sn.ExpiresAt); gone < 0 {
		t.Errorf("deleted %v before its expiry", -gone)
	}
	if slices.Contains(e.snapshotImages(), sn.ID) {
		t.Errorf("its image is still on the host")
	}
	if got := e.sh(cp.ID, "cat /workspace/x").Stdout; got != "x\n" {
		t.Errorf("the sandbox made from it: %q", got)
	}
}

// TestSnapshotFilesystemSparse: a sparse file far larger than the sandbox's
// disk (gVisor archives it whole) does not make the host write an archive
// past the disk size: the snapshot is refused as it streams, nothing is
// left under the snapshots directory, and the sandbox runs on.
func TestSnapshotFilesystemSparse(t *testing.T) {
	e := newEnv(t)
	a := e.create(api.CreateSandboxRequest{DiskMiB: 64, MemoryMiB: 2048})
	if res := e.rootSh(a.ID, "truncate -s 1536M /root/sparse && du -k /root/sparse"); res.ExitCode != 0 {
		t.Fatalf("sparse file: %+v", res)
	}
	status, data := e.do("POST", "/v1/sandboxes/"+a.ID+"/snapshots", api.CreateSnapshotRequest{Mode: "filesystem"})
	t.Logf("files-only snapshot with a 1.5 GiB sparse file on a 64 MiB disk: %d %s", status, data)
	if status != http.StatusConflict || !strings.Contains(string(data), "sparse file") {
		t.Fatalf("a 1.5 GiB archive of a 64 MiB disk: %d %s, want 409 naming the sparse file", status, data)
	}
	entries, _ := os.ReadDir(filepath.Join(e.dataDir, "gvisor", "snapshots"))
	for _, en := range entries {
		t.Errorf("left under snapshots: %s", en.Name())
	}
	if got := e.sh(a.ID, "echo alive").Stdout; got != "alive\n" {
		t.Errorf("the sandbox after the refused snapshot: %q", got)
	}
}
