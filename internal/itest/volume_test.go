package itest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/server"
	"withruntime.dev/runtime/internal/store"
	withruntime "withruntime.dev/runtime/sdk/go"
)

// createVolume makes a volume with the env's key.
func (e *env) createVolume(name string, sizeMiB int64) api.Volume {
	e.t.Helper()
	var v api.Volume
	e.must(http.StatusCreated, "POST", "/v1/volumes", api.CreateVolumeRequest{Name: name, SizeMiB: sizeMiB}, &v)
	return v
}

func withVolumes(vols ...api.VolumeMount) api.CreateSandboxRequest {
	return api.CreateSandboxRequest{Volumes: vols}
}

// TestVolumeOutlivesSandboxes: a file written to a volume in one sandbox is
// read by a sandbox created after the first was deleted; two live sandboxes
// see each other's writes; a read-only mount refuses writes with EROFS; the
// volume's use is listed; a delete is refused while a sandbox mounts it.
func TestVolumeOutlivesSandboxes(t *testing.T) {
	e := newEnv(t)
	v := e.createVolume("work", 64)
	if v.State != "ready" || v.SizeMiB != 64 || v.CapacityBytes <= 32<<20 || v.CapacityBytes > 64<<20 || len(v.MountedBy) != 0 {
		t.Fatalf("new volume: %+v", v)
	}
	a := e.create(withVolumes(api.VolumeMount{Name: "work", Path: "/data"}))
	if len(a.Volumes) != 1 || a.Volumes[0].Path != "/data" {
		t.Fatalf("create answer's volumes: %+v", a.Volumes)
	}
	res := e.sh(a.ID, "id -u; stat -c '%u %a' /data; echo hello > /data/note && mkdir -p /data/sub && head -c 3000000 /dev/urandom > /data/sub/blob && sha256sum /data/sub/blob | cut -c1-64")
	lines := strings.Fields(res.Stdout)
	if res.ExitCode != 0 || len(lines) != 4 || lines[0] != "1000" || lines[1] != "1000" {
		t.Fatalf("writing as the sandbox user: %+v", res)
	}
	sum := lines[3]
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+a.ID, nil, nil)

	b := e.create(withVolumes(api.VolumeMount{Name: "work", Path: "/mnt"}))
	if got := e.sh(b.ID, "cat /mnt/note; sha256sum /mnt/sub/blob | cut -c1-64"); got.Stdout != "hello\n"+sum+"\n" {
		t.Fatalf("a later sandbox reads %+v, want hello and %s", got, sum)
	}
	// Two live sandboxes share: each sees the other's writes at once.
	c := e.create(withVolumes(api.VolumeMount{Name: "work", Path: "/data"}))
	e.sh(b.ID, "echo from-b > /mnt/shared")
	if got := e.sh(c.ID, "cat /data/shared; echo from-c >> /data/shared"); got.Stdout != "from-b\n" {
		t.Fatalf("sandbox c reads %+v", got)
	}
	if got := e.sh(b.ID, "cat /mnt/shared"); got.Stdout != "from-b\nfrom-c\n" {
		t.Fatalf("sandbox b reads back %+v", got)
	}
	// Read-only.
	ro := e.create(withVolumes(api.VolumeMount{Name: "work", Path: "/srv", ReadOnly: true}))
	got := e.exec(ro.ID, agentapi.ExecRequest{Command: "cat /srv/note && touch /srv/x", User: "root"})
	if got.ExitCode == 0 || !strings.Contains(got.Stderr, "Read-only file system") || got.Stdout != "hello\n" {
		t.Fatalf("read-only mount: %+v, want the read and EROFS", got)
	}
	var listed api.VolumeList
	e.must(http.StatusOK, "GET", "/v1/volumes", nil, &listed)
	if len(listed.Volumes) != 1 || listed.Volumes[0].UsedBytes < 3_000_000 || len(listed.Volumes[0].MountedBy) != 3 {
		t.Fatalf("listed: %+v", listed)
	}
	var sb api.Sandbox
	e.must(http.StatusOK, "GET", "/v1/sandboxes/"+ro.ID, nil, &sb)
	if len(sb.Volumes) != 1 || !sb.Volumes[0].ReadOnly || sb.Volumes[0].Name != "work" {
		t.Fatalf("GET sandbox volumes: %+v", sb.Volumes)
	}
	status, body := e.do("DELETE", "/v1/volumes/work", nil)
	if status != http.StatusConflict || !strings.Contains(string(body), b.ID) || !strings.Contains(string(body), ro.ID) {
		t.Fatalf("delete while mounted: %d %s, want 409 naming the sandboxes", status, body)
	}
	for _, id := range []string{b.ID, c.ID, ro.ID} {
		e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+id, nil, nil)
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/volumes/work", nil, nil)
	e.must(http.StatusNotFound, "GET", "/v1/volumes/work", nil, nil)
}

// TestVolumeQuotaAndTenants: a write past the size stops with ENOSPC inside
// and the host's disk takes no more than the size; another key can
// neither see, mount nor delete the volume (404 as if missing); bad
// requests are refused with what to fix.
func TestVolumeQuotaAndTenants(t *testing.T) {
	e := newEnv(t)
	e.createVolume("small", 32)
	sb := e.create(withVolumes(api.VolumeMount{Name: "small", Path: "/data"}))
	res := e.sh(sb.ID, "dd if=/dev/zero of=/data/fill bs=1M count=64 2>&1; echo exit=$?; ls -l /data/fill | awk '{print $5}'")
	if !strings.Contains(res.Stdout, "No space left on device") || !strings.Contains(res.Stdout, "exit=1") {
		t.Fatalf("dd past the size: %+v, want ENOSPC", res)
	}
	var v api.Volume
	e.must(http.StatusOK, "GET", "/v1/volumes/small", nil, &v)
	if v.UsedBytes > 32<<20 || v.UsedBytes < 20<<20 {
		t.Fatalf("after filling: %+v", v)
	}
	// On the host the volume takes no more than its size, full as it is.
	var img syscall.Stat_t
	if err := syscall.Stat(filepath.Join(e.dataDir, "gvisor", "volumes", v.ID, "volume.img"), &img); err != nil {
		t.Fatal(err)
	}
	if used := img.Blocks * 512; used > 32<<20 {
		t.Fatalf("the full 32 MiB volume takes %d bytes of the host's disk", used)
	} else {
		t.Logf("the full 32 MiB volume takes %.1f MiB of the host's disk", float64(used)/(1<<20))
	}

	var tenant api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: "other", DailyLimitMicros: 5_000_000}, &tenant)
	as := func(method, path string, body any) (int, []byte) {
		return e.do(method, path, body, "Authorization", "Bearer "+tenant.Secret)
	}
	if st, body := as("GET", "/v1/volumes/small", nil); st != http.StatusNotFound {
		t.Fatalf("another key's GET: %d %s", st, body)
	}
	if st, body := as("DELETE", "/v1/volumes/small", nil); st != http.StatusNotFound {
		t.Fatalf("another key's DELETE: %d %s", st, body)
	}
	if st, body := as("POST", "/v1/sandboxes", withVolumes(api.VolumeMount{Name: "small", Path: "/data"})); st != http.StatusNotFound {
		t.Fatalf("another key mounting it: %d %s", st, body)
	}
	var list api.VolumeList
	st, body := as("GET", "/v1/volumes", nil)
	if err := json.Unmarshal(body, &list); st != http.StatusOK || err != nil || len(list.Volumes) != 0 {
		t.Fatalf("another key's list: %d %s", st, body)
	}
	// The other key may have its own "small": names are per key.
	if st, body := as("POST", "/v1/volumes", api.CreateVolumeRequest{Name: "small", SizeMiB: 16}); st != http.StatusCreated {
		t.Fatalf("another key's own volume of the same name: %d %s", st, body)
	}
	if st, body := as("DELETE", "/v1/volumes/small", nil); st != http.StatusNoContent {
		t.Fatalf("another key deleting its own: %d %s", st, body)
	}

	for _, c := range []struct {
		body any
		want int
	}{
		{api.CreateVolumeRequest{Name: "small", SizeMiB: 32}, http.StatusConflict},
		{api.CreateVolumeRequest{Name: "bad name", SizeMiB: 32}, http.StatusBadRequest},
		{api.CreateVolumeRequest{Name: "x", SizeMiB: 1}, http.StatusBadRequest},
		{map[string]any{"name": "x"}, http.StatusBadRequest},
		{map[string]any{"name": "x", "sizeMiB": 32, "size": 1}, http.StatusBadRequest},
	} {
		if st, body := e.do("POST", "/v1/volumes", c.body); st != c.want {
			t.Errorf("POST /v1/volumes %+v: %d %s, want %d", c.body, st, body, c.want)
		}
	}
	for _, c := range []struct {
		mounts []api.VolumeMount
		want   int
	}{
		{[]api.VolumeMount{{Name: "nope", Path: "/data"}}, http.StatusNotFound},
		{[]api.VolumeMount{{Name: "small", Path: "data"}}, http.StatusBadRequest},
		{[]api.VolumeMount{{Name: "small", Path: "/"}}, http.StatusBadRequest},
		{[]api.VolumeMount{{Name: "small", Path: "/proc/x"}}, http.StatusBadRequest},
		{[]api.VolumeMount{{Name: "small", Path: "/run/withruntime"}}, http.StatusBadRequest},
		{[]api.VolumeMount{{Name: "small", Path: "/data/../etc"}}, http.StatusBadRequest},
		{[]api.VolumeMount{{Name: "small", Path: "/a"}, {Name: "small", Path: "/b"}}, http.StatusBadRequest},
	} {
		if st, body := e.do("POST", "/v1/sandboxes", withVolumes(c.mounts...)); st != c.want {
			t.Errorf("create with %+v: %d %s, want %d", c.mounts, st, body, c.want)
		}
	}
}

// TestVolumeHostileRoot: root inside a sandbox cannot leave its volume or
// use it against the host or a later tenant: links resolve inside the
// sandbox (a symbolic link to / or up and out names the sandbox's own
// files, a hard link to a file outside the volume is refused), no device
// node can be made on it, a setuid file on it runs with its caller's ids
// (nosuid; the same file on the sandbox's own disk does get root), and
// another key's volume is not reachable.
func TestVolumeHostileRoot(t *testing.T) {
	e := newEnv(t)
	v := e.createVolume("hostile", 32)
	// What the host has beside the volume's files: the filesystem's root
	// above the data directory, and the server's data directory.
	mnt := filepath.Join(e.dataDir, "gvisor", "volumes", v.ID, "mnt")
	if err := os.WriteFile(filepath.Join(mnt, "host-secret"), []byte("HOSTSECRET-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dataDir, "host-secret"), []byte("HOSTSECRET-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Another key's volume, with a marker in it.
	var tenant api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: "b", DailyLimitMicros: 5_000_000}, &tenant)
	asB := func(method, path string, body any, out any) {
		t.Helper()
		st, data := e.do(method, path, body, "Authorization", "Bearer "+tenant.Secret)
		if st/100 != 2 {
			t.Fatalf("%s %s as key b: %d %s", method, path, st, data)
		}
		if out != nil {
			_ = json.Unmarshal(data, out)
		}
	}
	var bv api.Volume
	asB("POST", "/v1/volumes", api.CreateVolumeRequest{Name: "b-data", SizeMiB: 16}, &bv)
	var bsb api.Sandbox
	asB("POST", "/v1/sandboxes", withVolumes(api.VolumeMount{Name: "b-data", Path: "/data"}), &bsb)
	var bres agentapi.ExecResult
	asB("POST", "/v1/sandboxes/"+bsb.ID+"/exec", agentapi.ExecRequest{Command: "echo TENANTB-MARKER > /data/m"}, &bres)
	asB("DELETE", "/v1/sandboxes/"+bsb.ID, nil, nil)

	a := e.create(withVolumes(api.VolumeMount{Name: "hostile", Path: "/data"}))
	root := func(cmd string) agentapi.ExecResult {
		t.Helper()
		return e.exec(a.ID, agentapi.ExecRequest{Command: cmd, User: "root"})
	}
	hostMnt := mnt
	res := root(strings.Join([]string{
		"ln -s / /data/rootlink", "ln -s ../../../.. /data/up", "ln -s " + hostMnt + "/host-secret /data/hostlink",
		"ln -s " + e.dataDir + "/host-secret /data/hostlink2",
		"ln /etc/passwd /data/pw 2>&1; echo hardlink-out=$?",
		"ln /run/withruntime/host/withruntime-agent /data/agent 2>&1; echo hardlink-agent=$?",
		"echo in > /data/inside && ln /data/inside /data/inside2; echo hardlink-in=$?",
		"mknod /data/mem c 1 1 2>&1; echo mknod-char=$?",
		"mknod /data/disk b 8 0 2>&1; echo mknod-block=$?",
		"cp /usr/bin/id /data/suid-id && chmod 4755 /data/suid-id && cp /usr/bin/id /usr/local/bin/suid-id && chmod 4755 /usr/local/bin/suid-id; echo suid=$?",
	}, "; "))
	t.Logf("root inside: %s", res.Stdout)
	for _, want := range []string{"hardlink-in=0", "suid=0"} {
		if !strings.Contains(res.Stdout, want) {
			t.Fatalf("setting up: %+v, want %s", res, want)
		}
	}
	for _, refused := range []string{"hardlink-out=0", "hardlink-agent=0", "mknod-char=0", "mknod-block=0"} {
		if strings.Contains(res.Stdout, refused) {
			t.Errorf("root inside was allowed: %s (%+v)", refused, res)
		}
	}
	// Links resolve inside the sandbox, whoever follows them later.
	b := e.create(withVolumes(api.VolumeMount{Name: "hostile", Path: "/data"}))
	got := e.exec(b.ID, agentapi.ExecRequest{User: "root", Command: "cmp /data/rootlink/etc/hostname /etc/hostname && echo own-file; cat /data/up/host-secret /data/hostlink /data/hostlink2 /data/../host-secret 2>/dev/null; " +
		"grep -rsl -e HOSTSECRET -e TENANTB-MARKER /data /workspace /run /mnt /home /tmp /root /srv /opt /media; true"})
	if got.Stdout != "own-file\n" {
		t.Errorf("following the links from a later sandbox: %+v, want only its own /etc/hostname", got)
	}
	// setuid: nosuid on the volume, honoured on the sandbox's own disk.
	if got := e.sh(b.ID, "/data/suid-id -u; /usr/local/bin/suid-id -u 2>/dev/null || echo not-here"); !strings.HasPrefix(got.Stdout, "1000\n") {
		t.Errorf("a setuid file on the volume run by the sandbox user: %+v, want uid 1000 (nosuid)", got)
	}
	if got := e.sh(a.ID, "/data/suid-id -u; /usr/local/bin/suid-id -u"); got.Stdout != "1000\n0\n" {
		t.Errorf("setuid on the volume vs on the sandbox's disk: %+v, want 1000 then 0", got)
	}
	// On the host: no device node, and the files are where they should be.
	data := filepath.Join(mnt, "data")
	_ = filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&(fs.ModeDevice|fs.ModeCharDevice) != 0 {
			t.Errorf("a device node on the host: %s", p)
		}
		return nil
	})
	if target, err := os.Readlink(filepath.Join(data, "rootlink")); err != nil || target != "/" {
		t.Errorf("the link on the host: %q %v", target, err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "host-secret")); err != nil {
		t.Errorf("the host's file beside the data: %v", err)
	}
	// Root inside cannot grow the volume past its size either.
	if got := root("fallocate -l 64M /data/big 2>&1; dd if=/dev/zero of=/data/big2 bs=1M count=64 2>&1 | tail -1"); !strings.Contains(got.Stdout, "No space left") {
		t.Errorf("root filling the volume: %+v, want ENOSPC", got)
	}
}

// TestVolumeSurvivesPauseAndRestart: a sandbox mounting a volume is paused
// (its volume's files are not in its image: a write made meanwhile by
// another sandbox is what it reads after its resume); `withruntime serve`
// is killed with SIGKILL while sandboxes mount the volume, and the next
// server adopts them and mounts the volume for new ones (the same
// filesystem: what each writes the other reads); a graceful stop while a
// sandbox still mounts it, and a third server, likewise. Nothing is lost.
func TestVolumeSurvivesPauseAndRestart(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "wr-vol-")
	if err != nil {
		t.Fatal(err)
	}
	var names server.EgressConfig
	server.EgressNames(&names, dir)
	t.Cleanup(func() { sweep(t, dir, names) })

	s1 := startServe(t, dir)
	var v api.Volume
	s1.must(http.StatusCreated, "POST", "/v1/volumes", api.CreateVolumeRequest{Name: "keep", SizeMiB: 64}, &v)
	a := s1.create(withVolumes(api.VolumeMount{Name: "keep", Path: "/data"}))
	s1.sh(a.ID, "echo from-a > /data/a && head -c 1000000 /dev/urandom > /data/blob && sha256sum /data/blob > /workspace/sum")
	s1.pause(a.ID)
	b := s1.create(withVolumes(api.VolumeMount{Name: "keep", Path: "/data"}))
	s1.sh(b.ID, "echo from-b-while-a-paused > /data/b")
	s1.resume(a.ID)
	if got := s1.sh(a.ID, "cat /data/a /data/b; sha256sum -c /workspace/sum --status && echo sum-ok"); got.Stdout != "from-a\nfrom-b-while-a-paused\nsum-ok\n" {
		t.Fatalf("after the resume: %+v", got)
	}

	s1.kill()
	s2 := startServe(t, dir)
	if got := s2.sh(a.ID, "echo after-crash >> /data/a; cat /data/b"); got.Stdout != "from-b-while-a-paused\n" {
		t.Fatalf("an adopted sandbox reads %+v", got)
	}
	c := s2.create(withVolumes(api.VolumeMount{Name: "keep", Path: "/data"}))
	if got := s2.sh(c.ID, "cat /data/a; echo from-c > /data/c"); got.Stdout != "from-a\nafter-crash\n" {
		t.Fatalf("a sandbox made after the crash reads %+v", got)
	}
	if got := s2.sh(a.ID, "cat /data/c"); got.Stdout != "from-c\n" {
		t.Fatalf("the adopted sandbox reads the new one's write: %+v", got)
	}
	s2.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+b.ID, nil, nil)
	s2.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+c.ID, nil, nil)

	// A graceful stop unmounts the host's mount while a still mounts it.
	s2.stop()
	s3 := startServe(t, dir)
	d := s3.create(withVolumes(api.VolumeMount{Name: "keep", Path: "/data"}))
	s3.sh(d.ID, "echo from-d > /data/d")
	if got := s3.sh(a.ID, "cat /data/d; echo from-a-again > /data/a2"); got.Stdout != "from-d\n" {
		t.Fatalf("after a graceful restart, a reads %+v", got)
	}
	if got := s3.sh(d.ID, "cat /data/a2"); got.Stdout != "from-a-again\n" {
		t.Fatalf("after a graceful restart, d reads %+v", got)
	}
	var got api.Volume
	s3.must(http.StatusOK, "GET", "/v1/volumes/keep", nil, &got)
	if got.State != "ready" || len(got.MountedBy) != 2 || got.UsedBytes < 1_000_000 {
		t.Fatalf("the volume after restarts: %+v", got)
	}
	for _, id := range []string{a.ID, d.ID} {
		s3.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+id, nil, nil)
	}
	s3.must(http.StatusNoContent, "DELETE", "/v1/volumes/keep", nil, nil)
	s3.stop()
	if m := mountsUnder(dir); len(m) != 0 {
		t.Errorf("mounts left under the data directory: %v", m)
	}
	if out, _ := exec.Command("losetup", "-j", filepath.Join(dir, "gvisor", "volumes", v.ID, "volume.img")).Output(); len(out) > 0 {
		t.Errorf("loop device left: %s", out)
	}
}

// TestVolumeQuotaAndBilling: a volume's size counts in its key's disk
// quota (with sandboxes' diskMiB) from its create to its delete, and is
// billed at the storage price under its id.
func TestVolumeQuotaAndBilling(t *testing.T) {
	e := newEnv(t, withMeterInterval(time.Second))
	var k api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: "q", DailyLimitMicros: 5_000_000, DiskQuotaMiB: 150}, &k)
	as := func(method, path string, body any) (int, []byte) {
		return e.do(method, path, body, "Authorization", "Bearer "+k.Secret)
	}
	var v api.Volume
	st, body := as("POST", "/v1/volumes", api.CreateVolumeRequest{Name: "q1", SizeMiB: 100})
	if st != http.StatusCreated || json.Unmarshal(body, &v) != nil {
		t.Fatalf("a volume within the quota: %d %s", st, body)
	}
	if st, body := as("POST", "/v1/volumes", api.CreateVolumeRequest{Name: "q2", SizeMiB: 64}); st != http.StatusInsufficientStorage || errorCode(t, body) != "disk_quota_exceeded" || !strings.Contains(string(body), "100 MiB of volumes") {
		t.Fatalf("a second volume past the quota: %d %s", st, body)
	}
	if st, body := as("POST", "/v1/sandboxes", api.CreateSandboxRequest{DiskMiB: 64}); st != http.StatusInsufficientStorage {
		t.Fatalf("a sandbox past the quota the volume holds: %d %s", st, body)
	}
	time.Sleep(2500 * time.Millisecond) // two samples or so
	if st, body := as("DELETE", "/v1/volumes/q1", nil); st != http.StatusNoContent {
		t.Fatalf("delete: %d %s", st, body)
	}
	if st, body := as("POST", "/v1/sandboxes", api.CreateSandboxRequest{DiskMiB: 64}); st != http.StatusCreated {
		t.Fatalf("a sandbox once the volume is gone: %d %s", st, body)
	}
	var rep api.UsageReport
	st, body = as("GET", "/v1/usage?groupBy=sandbox", nil)
	if st != http.StatusOK || json.Unmarshal(body, &rep) != nil {
		t.Fatalf("usage: %d %s", st, body)
	}
	for _, r := range rep.Rows {
		if r.Group != v.ID {
			continue
		}
		// 100 MiB for 2.5 s or more: about 0.24 GiB-s; billed nothing else.
		if r.StorageGiBSeconds < 0.2 || r.StorageGiBSeconds > 1 || r.CPUSeconds != 0 || r.GiBSeconds != 0 || r.CostMicros < 0 {
			t.Fatalf("the volume's usage: %+v", r)
		}
		return
	}
	t.Fatalf("no usage row for volume %s: %s", v.ID, body)
}

// TestVolumeCLIAndSDK: the CLI makes, lists and removes volumes and mounts
// them with sandbox create --volume NAME:PATH[:ro]; the Go SDK does the
// same with Client.CreateVolume and Options.Volumes.
func TestVolumeCLIAndSDK(t *testing.T) {
	e := newEnv(t)
	if r := e.cli(nil, "volume", "create", "clivol", "--size-mib", "32"); r.code != 0 || r.stdout != "clivol\n" {
		t.Fatalf("volume create: %+v", r)
	}
	if r := e.cli(nil, "volume", "create", "x"); r.code == 0 || !strings.Contains(r.stderr, "--size-mib is required") {
		t.Fatalf("volume create without a size: %+v", r)
	}
	r := e.cli(nil, "sandbox", "create", "--volume", "clivol:/data", "--volume", "clivol2:/x:rx")
	if r.code == 0 || !strings.Contains(r.stderr, "ro (read-only) or rw") {
		t.Fatalf("a bad --volume: %+v", r)
	}
	r = e.cli(nil, "sandbox", "create", "--volume", "clivol:/data:ro")
	if r.code != 0 {
		t.Fatalf("sandbox create --volume: %+v", r)
	}
	id := strings.TrimSpace(r.stdout)
	if got := e.exec(id, agentapi.ExecRequest{Command: "touch /data/x", User: "root"}); !strings.Contains(got.Stderr, "Read-only") {
		t.Fatalf("a :ro mount: %+v", got)
	}
	if r := e.cli(nil, "volume", "ls"); r.code != 0 || !strings.Contains(r.stdout, "clivol") || !strings.Contains(r.stdout, id) {
		t.Fatalf("volume ls: %+v", r)
	}
	if r := e.cli(nil, "volume", "rm", "clivol"); r.code == 0 || !strings.Contains(r.stderr, id) {
		t.Fatalf("volume rm while mounted: %+v", r)
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+id, nil, nil)
	if r := e.cli(nil, "volume", "rm", "clivol"); r.code != 0 {
		t.Fatalf("volume rm: %+v", r)
	}

	c, err := withruntime.NewClient(withruntime.WithBaseURL(e.http.URL), withruntime.WithAPIKey(e.key))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.CreateVolume(ctx, "sdkvol", 32); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateVolume(ctx, "sdkvol", 32); !errors.Is(err, withruntime.ErrConflict) {
		t.Fatalf("a second volume of one name: %v, want ErrConflict", err)
	}
	sb, err := c.Create(ctx, withruntime.Options{Volumes: []withruntime.VolumeMount{{Name: "sdkvol", Path: "/data"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, withruntime.ExecRequest{Command: "echo sdk > /data/f"}); err != nil {
		t.Fatal(err)
	}
	vf := c.VolumeFiles("sdkvol")
	rc, err := vf.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "sdk\n" {
		t.Fatalf("VolumeFiles.Open: %q", data)
	}
	if _, err := vf.Write(ctx, "g", strings.NewReader("via sdk")); err != nil {
		t.Fatal(err)
	}
	if res, err := sb.Exec(ctx, withruntime.ExecRequest{Command: "cat /data/g"}); err != nil || res.Stdout != "via sdk" {
		t.Fatalf("the sandbox reads the SDK's upload: %+v %v", res, err)
	}
	if page, err := vf.ListPage(ctx, "", withruntime.ListOptions{}); err != nil || len(page.Entries) != 2 {
		t.Fatalf("VolumeFiles.ListPage: %+v %v", page, err)
	}
	if err := c.DeleteVolume(ctx, "sdkvol"); !errors.Is(err, withruntime.ErrConflict) || !strings.Contains(err.Error(), sb.ID()) {
		t.Fatalf("delete while mounted: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	v, err := c.Volume(ctx, "sdkvol")
	if err != nil || v.UsedBytes == 0 || len(v.MountedBy) != 0 {
		t.Fatalf("Volume: %+v %v", v, err)
	}
	if err := c.DeleteVolume(ctx, "sdkvol"); err != nil {
		t.Fatal(err)
	}
	if vols, err := c.Volumes(ctx); err != nil || len(vols) != 0 {
		t.Fatalf("Volumes after the delete: %+v %v", vols, err)
	}
	if _, err := c.Volume(ctx, "sdkvol"); !errors.Is(err, withruntime.ErrNotFound) {
		t.Fatalf("Volume after the delete: %v", err)
	}
}

// TestVolumeFilesWithoutSandbox: a volume's files are uploaded, listed and
// downloaded through the API with no sandbox running; a sandbox sees the
// upload and the API sees what the sandbox wrote; links a sandbox left
// never lead the host out of the volume (a download through one is
// refused, an upload replaces the link), a full volume is 507, another key
// gets 404.
func TestVolumeFilesWithoutSandbox(t *testing.T) {
	e := newEnv(t)
	e.createVolume("files", 32)
	base := "/v1/volumes/files/files"
	var fi agentapi.FileInfo
	e.must(http.StatusOK, "PUT", base+"?path=in/deep/a.txt", "from the api\n", &fi)
	if fi.Path != "/in/deep/a.txt" || fi.Uid != 1000 || fi.Size != 13 || fi.Type != "file" {
		t.Fatalf("upload: %+v", fi)
	}
	sb := e.create(withVolumes(api.VolumeMount{Name: "files", Path: "/data"}))
	if got := e.sh(sb.ID, "cat /data/in/deep/a.txt; stat -c %U /data/in /data/in/deep/a.txt; echo from the sandbox > /data/b.txt"); got.Stdout != "from the api\nuser\nuser\n" {
		t.Fatalf("the sandbox reads: %+v", got)
	}
	if st, body := e.do("GET", base+"?path=/b.txt", nil); st != http.StatusOK || string(body) != "from the sandbox\n" {
		t.Fatalf("download: %d %q", st, body)
	}
	if st, body := e.do("GET", base+"?path=b.txt", nil, "Range", "bytes=5-7"); st != http.StatusPartialContent || string(body) != "the" {
		t.Fatalf("ranged download: %d %q", st, body)
	}
	var list agentapi.FileList
	e.must(http.StatusOK, "GET", "/v1/volumes/files/files/list", nil, &list)
	if len(list.Entries) != 2 || list.Entries[0].Path != "/b.txt" || list.Entries[1].Path != "/in" || list.Entries[1].Type != "dir" {
		t.Fatalf("list: %+v", list)
	}
	e.must(http.StatusOK, "GET", "/v1/volumes/files/files/list?limit=1", nil, &list)
	if !list.Truncated || len(list.Entries) != 1 {
		t.Fatalf("a page of 1: %+v", list)
	}
	e.must(http.StatusOK, "GET", "/v1/volumes/files/files/list?limit=1&cursor="+list.Next, nil, &list)
	if list.Truncated || len(list.Entries) != 1 || list.Entries[0].Path != "/in" {
		t.Fatalf("the next page: %+v", list)
	}

	// Links left by root inside the sandbox.
	hostFile := filepath.Join(e.dataDir, "host-file")
	if err := os.WriteFile(hostFile, []byte("host\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.exec(sb.ID, agentapi.ExecRequest{User: "root", Command: "ln -s " + hostFile + " /data/abs; ln -s ../../../../../../.. /data/up; ln -s .. /data/parent; ln -s /etc /data/etc"})
	for _, p := range []string{"abs", "up" + hostFile, "parent/host-file", "etc/passwd", "../host-file", "/../../host-file"} {
		st, body := e.do("GET", base+"?path="+p, nil)
		if st == http.StatusOK || strings.Contains(string(body), "host\n") || strings.Contains(string(body), "root:") {
			t.Errorf("download of %s through a link: %d %q", p, st, body)
		}
	}
	if st, body := e.do("PUT", base+"?path=abs", "replaced\n"); st != http.StatusOK {
		t.Fatalf("upload onto a link: %d %s", st, body)
	}
	if got, _ := os.ReadFile(hostFile); string(got) != "host\n" {
		t.Fatalf("the host's file after an upload onto a link to it: %q", got)
	}
	if got := e.sh(sb.ID, "cat /data/abs"); got.Stdout != "replaced\n" {
		t.Fatalf("the link was not replaced: %+v", got)
	}
	for _, p := range []string{"up/x", "etc/x", "parent/x"} {
		if st, body := e.do("PUT", base+"?path="+p, "x"); st != http.StatusBadRequest {
			t.Errorf("upload through a link out (%s): %d %s", p, st, body)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, "x")); err == nil {
		t.Error("an upload went out of the volume")
	}

	// Full, bad paths, other keys.
	if st, body := e.do("PUT", base+"?path=big", strings.Repeat("x", 40<<20)); st != http.StatusInsufficientStorage || errorCode(t, body) != "no_space" {
		t.Fatalf("an upload past the size: %d %s", st, body)
	}
	if got := e.sh(sb.ID, "ls -a /data | grep -c upload"); got.Stdout != "0\n" {
		t.Fatalf("a failed upload left its temporary file: %+v", got)
	}
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", base, http.StatusBadRequest},
		{"GET", base + "?path=in", http.StatusBadRequest},
		{"GET", base + "?path=nope", http.StatusNotFound},
		{"GET", base + "?path=a%00b", http.StatusBadRequest},
		{"PUT", base + "?path=/", http.StatusBadRequest},
		{"PUT", base + "?path=in", http.StatusBadRequest},
		{"GET", base + "?path=" + strings.Repeat("n", 256), http.StatusBadRequest},
		{"GET", "/v1/volumes/nope/files?path=x", http.StatusNotFound},
		{"GET", "/v1/volumes/files/files/list?path=b.txt", http.StatusBadRequest},
		{"GET", "/v1/volumes/files/files/list?depth=2", http.StatusBadRequest},
	} {
		if st, body := e.do(c.method, c.path, "x"); st != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, st, body, c.want)
		}
	}
	var tenant api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: "t", DailyLimitMicros: 5_000_000}, &tenant)
	for _, m := range []string{"GET", "PUT"} {
		if st, body := e.do(m, base+"?path=b.txt", "x", "Authorization", "Bearer "+tenant.Secret); st != http.StatusNotFound {
			t.Errorf("another key's %s: %d %s", m, st, body)
		}
	}
}

// TestVolumeRecover: a restarted server removes what a dead one left of a
// volume's create (a record still creating, its files) and of a delete
// (a record deleting), and volumes on the host that no record knows; the
// ready ones stay, with their files.
func TestVolumeRecover(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "wr-volrec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	a := newEnv(t, withDataDir(dir))
	kept := a.createVolume("kept", 16)
	a.must(http.StatusOK, "PUT", "/v1/volumes/kept/files?path=f", "still here", nil)
	half := a.createVolume("half", 16)
	gone := a.createVolume("gone", 16)
	ctx := context.Background()
	st := a.srv.Store
	// As a dead server leaves them: "half" still being made, "gone" being
	// deleted, and a volume on the host with no record.
	if _, err := st.StartDeleteVolume(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	var key api.KeyList
	a.must(http.StatusOK, "GET", "/v1/keys", nil, &key)
	a.detach()
	// Flip "half" back to creating, and make an orphan, while no server runs.
	st2, err := store.Open(ctx, filepath.Join(dir, "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st2.DeleteVolumeRecord(ctx, half.ID); err != nil {
		t.Fatal(err)
	}
	v := store.Volume{ID: half.ID, KeyID: key.Keys[0].ID, Name: "half", SizeMiB: 16, State: store.VolumeCreating, CreatedAt: time.Now(), Driver: "gvisor"}
	if err := st2.InsertVolume(ctx, v); err != nil {
		t.Fatal(err)
	}
	st2.Close()
	orphan := filepath.Join(dir, "gvisor", "volumes", "vol_orphan")
	if err := os.MkdirAll(orphan, 0o700); err != nil {
		t.Fatal(err)
	}

	b := newEnv(t, withDataDir(dir))
	var list api.VolumeList
	b.must(http.StatusOK, "GET", "/v1/volumes", nil, &list)
	if len(list.Volumes) != 1 || list.Volumes[0].Name != "kept" || list.Volumes[0].State != "ready" {
		t.Fatalf("volumes after the restart: %+v", list)
	}
	if _, body := b.do("GET", "/v1/volumes/kept/files?path=f", nil); string(body) != "still here" {
		t.Fatalf("kept's file: %q", body)
	}
	for _, id := range []string{half.ID, gone.ID, "vol_orphan"} {
		if _, err := os.Stat(filepath.Join(dir, "gvisor", "volumes", id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("volume %s left on the host: %v", id, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "gvisor", "volumes", kept.ID, "volume.img")); err != nil {
		t.Errorf("kept's image: %v", err)
	}
}

// TestVolumeSnapshotRefused: a sandbox that mounts a volume cannot be
// snapshotted or forked (409 naming volumes): a restore keeps its source's
// mounts, so a copy would mount the volume where no record says so.
func TestVolumeSnapshotRefused(t *testing.T) {
	e := newEnv(t)
	e.must(http.StatusCreated, "POST", "/v1/volumes", api.CreateVolumeRequest{Name: "snapvol", SizeMiB: 16}, nil)
	sb := e.create(api.CreateSandboxRequest{Volumes: []api.VolumeMount{{Name: "snapvol", Path: "/data"}}})
	for _, path := range []string{"/snapshots", "/fork"} {
		var body any = api.CreateSnapshotRequest{}
		if path == "/fork" {
			body = api.ForkRequest{Count: 1}
		}
		st, data := e.do("POST", "/v1/sandboxes/"+sb.ID+path, body)
		if st != http.StatusConflict || !strings.Contains(string(data), "volumes") {
			t.Errorf("POST %s of a sandbox with a volume: %d %s, want 409 naming volumes", path, st, data)
		}
	}
}

// TestVolumePathNotInTemplate: a volume mounts only on a directory its
// template has. runsc's file proxy would make a missing mount point in the
// template every sandbox shares (a create at /workspace/w once left that
// directory in the base template for every sandbox after it; one at
// /usr/local/bin/python3 would break python3 for every tenant): such a
// create is a 400 and the template is untouched.
func TestVolumePathNotInTemplate(t *testing.T) {
	e := newEnv(t)
	e.must(http.StatusCreated, "POST", "/v1/volumes", api.CreateVolumeRequest{Name: "tpl", SizeMiB: 16}, nil)
	rootfs := filepath.Join(templatesDir, "base", "rootfs")
	for _, p := range []string{"/usr/local/bin/python3", "/workspace/w", "/home/user/newdir"} {
		st, body := e.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{Volumes: []api.VolumeMount{{Name: "tpl", Path: p}}})
		if st != http.StatusBadRequest || !strings.Contains(string(body), "not a directory of the sandbox's template") {
			t.Errorf("a volume at %s: %d %s, want 400", p, st, body)
		}
		if _, err := os.Lstat(filepath.Join(rootfs, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists in the base template after the create: %v", p, err)
		}
	}
	// Nothing holds the volume: no sandbox was left mounting it.
	e.must(http.StatusNoContent, "DELETE", "/v1/volumes/tpl", nil, nil)
	var list api.SandboxList
	e.must(http.StatusOK, "GET", "/v1/sandboxes", nil, &list)
	for _, sb := range list.Sandboxes {
		if sb.State != "stopped" {
			t.Errorf("a refused create left sandbox %s %s", sb.ID, sb.State)
		}
	}
}
