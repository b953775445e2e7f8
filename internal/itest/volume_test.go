package itest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
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

	b := e.create(withVolumes(api.VolumeMount{Name: "work", Path: "/workspace/w"}))
	if got := e.sh(b.ID, "cat /workspace/w/note; sha256sum /workspace/w/sub/blob | cut -c1-64"); got.Stdout != "hello\n"+sum+"\n" {
		t.Fatalf("a later sandbox reads %+v, want hello and %s", got, sum)
	}
	// Two live sandboxes share: each sees the other's writes at once.
	c := e.create(withVolumes(api.VolumeMount{Name: "work", Path: "/data"}))
	e.sh(b.ID, "echo from-b > /workspace/w/shared")
	if got := e.sh(c.ID, "cat /data/shared; echo from-c >> /data/shared"); got.Stdout != "from-b\n" {
		t.Fatalf("sandbox c reads %+v", got)
	}
	if got := e.sh(b.ID, "cat /workspace/w/shared"); got.Stdout != "from-b\nfrom-c\n" {
		t.Fatalf("sandbox b reads back %+v", got)
	}
	// Read-only.
	ro := e.create(withVolumes(api.VolumeMount{Name: "work", Path: "/ro", ReadOnly: true}))
	got := e.exec(ro.ID, agentapi.ExecRequest{Command: "cat /ro/note && touch /ro/x", User: "root"})
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
