package itest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/store"
	withruntime "withruntime.dev/runtime/sdk/go"
)

// Host disk and per-key quotas (internal/sandbox/quota.go; README, "Keys"
// and "Disk and quotas"; ARCHITECTURE, resource model).

// quotaKey creates a key as req asks and returns it (with its secret).
func (e *env) quotaKey(req api.CreateKeyRequest) api.Key {
	e.t.Helper()
	var k api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", req, &k)
	return k
}

// as returns e acting with the key whose secret is secret.
func (e *env) as(secret string) *env {
	te := *e
	te.key = secret
	return &te
}

// refusal sends a request that must fail with status and code, and
// returns its message, which must hold every one of want.
func (e *env) refusal(status int, code, method, path string, body any, want ...string) string {
	e.t.Helper()
	got, data := e.do(method, path, body)
	e.checkErrorBody(method+" "+path, got, data, status, code)
	var eb agentapi.ErrorBody
	_ = json.Unmarshal(data, &eb)
	for _, w := range want {
		if !strings.Contains(eb.Error.Message, w) {
			e.t.Errorf("%s %s: message %q does not say %q", method, path, eb.Error.Message, w)
		}
	}
	return eb.Error.Message
}

// fill writes mib MiB of bytes that are not zeros (an image saves every
// such page; zero pages it skips) to /workspace/big in sandbox id, quickly:
// one random 16 MiB chunk again and again.
func (e *env) fill(id string, mib int) {
	e.t.Helper()
	cmd := fmt.Sprintf(`python3 -c "
import os
c = os.urandom(16 << 20)
with open('/workspace/big', 'wb') as f:
    for _ in range(%d): f.write(c)
os.sync()
print('ok')"`, mib/16)
	if res := e.sh(id, cmd); res.Stdout != "ok\n" {
		e.t.Fatalf("writing %d MiB: %+v", mib, res)
	}
}

// imagesDir is where the driver writes a sandbox's pause image.
func (e *env) imagesDir(id string) string {
	return filepath.Join(e.dataDir, "gvisor", "sandboxes", id, "images")
}

// TestKeyDiskQuota: a tenant key's disk quota counts its sandboxes'
// diskMiB and its pause images, and at a pause the image to be (memory in
// use and the blocks its files take): a create or pause past it is 507
// disk_quota_exceeded, naming the quota, its value, the use and how to
// raise it, and the pause leaves the sandbox running untouched with
// nothing written. The key's record shows the quotas that bind it.
func TestKeyDiskQuota(t *testing.T) {
	e := newEnv(t)
	k := e.quotaKey(api.CreateKeyRequest{Name: "disk", DailyLimitMicros: 50_000_000, DiskQuotaMiB: 3500})
	if k.DiskQuotaMiB != 3500 || k.SandboxesQuota != sandbox.DefaultKeySandboxes || k.PausedQuota != sandbox.DefaultKeyPaused {
		t.Errorf("created key %+v: want its disk quota and the server's defaults for the others", k)
	}
	admin := e.quotaKey(api.CreateKeyRequest{Name: "admin"})
	var keys api.KeyList
	e.must(http.StatusOK, "GET", "/v1/keys", nil, &keys)
	for _, l := range keys.Keys {
		switch l.ID {
		case k.ID:
			if l.DiskQuotaMiB != 3500 || l.SandboxesQuota != sandbox.DefaultKeySandboxes {
				t.Errorf("listed tenant key %+v: want its quotas", l)
			}
		case admin.ID:
			if l.DiskQuotaMiB != 0 || l.SandboxesQuota != 0 || l.PausedQuota != 0 {
				t.Errorf("listed administrator's key %+v: want no quotas (only the server-wide caps bind it)", l)
			}
		}
	}

	te := e.as(k.Secret)
	sb := te.create(api.CreateSandboxRequest{DiskMiB: 2048})
	te.refusal(http.StatusInsufficientStorage, api.CodeDiskQuota, "POST", "/v1/sandboxes", api.CreateSandboxRequest{DiskMiB: 2048},
		"disk quota", "3500 MiB", "holds 2048 MiB", "--disk-quota-mib")

	// 1,504 MiB of files: with its 2048 MiB of diskMiB the image cannot fit.
	te.fill(sb.ID, 1504)
	te.refusal(http.StatusInsufficientStorage, api.CodeDiskQuota, "POST", "/v1/sandboxes/"+sb.ID+"/pause", nil,
		"disk quota", "3500 MiB", "pause image", "--disk-quota-mib")
	if _, err := os.Lstat(e.imagesDir(sb.ID)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused pause left %s: %v", e.imagesDir(sb.ID), err)
	}
	if got := te.get(sb.ID); got.State != "running" {
		t.Fatalf("after a refused pause: %+v, want running", got)
	}
	if res := te.sh(sb.ID, "stat -c %s /workspace/big"); res.Stdout != "1577058304\n" {
		t.Fatalf("the file after a refused pause: %+v", res)
	}
	// An idle sandbox's small image fits, and then counts.
	idle := te.create(api.CreateSandboxRequest{DiskMiB: 512})
	paused := te.pause(idle.ID)
	imageMiB := (paused.ImageBytes + 1<<20 - 1) >> 20
	left := 3500 - 2048 - 512 - imageMiB
	te.refusal(http.StatusInsufficientStorage, api.CodeDiskQuota, "POST", "/v1/sandboxes", api.CreateSandboxRequest{DiskMiB: left + 1},
		fmt.Sprintf("holds %d MiB (2560 MiB of sandboxes' diskMiB, %d MiB of pause images and snapshots)", 2560+imageMiB, imageMiB))
	// The SDK's sentinel for the quota codes.
	c, err := withruntime.NewClient(withruntime.WithBaseURL(e.http.URL), withruntime.WithAPIKey(k.Secret))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(t.Context(), withruntime.Options{DiskMiB: 2048}); !errors.Is(err, withruntime.ErrQuota) {
		t.Errorf("SDK create past the disk quota: %v, want ErrQuota", err)
	}
	te.create(api.CreateSandboxRequest{DiskMiB: left})
}

// TestPauseRefusedForHostDisk: on a host whose free space less the reserve
// (serve --disk-reserve-mib, here all but 2.5 GiB of the real free space,
// so nothing fills the disk) cannot take a sandbox's image, its pause is
// 507 no_space before anything is written: no image directory, the
// sandbox running with its files. A create whose diskMiB does not fit is
// refused the same way; a pause whose image fits goes through.
func TestPauseRefusedForHostDisk(t *testing.T) {
	unix.Sync() // blocks freed by earlier tests are free now, not during this one
	var st unix.Statfs_t
	if err := unix.Statfs(os.TempDir(), &st); err != nil {
		t.Fatal(err)
	}
	availMiB := int64(st.Bavail) * st.Bsize >> 20
	if availMiB < 8<<10 {
		t.Skipf("only %d MiB free on the host", availMiB)
	}
	e := newEnv(t, withLimits(func(l *sandbox.Limits) { l.DiskReserveMiB = availMiB - 2560 }))
	sb := e.create(api.CreateSandboxRequest{DiskMiB: 2048})
	idle := e.create(api.CreateSandboxRequest{DiskMiB: 16})
	e.refusal(http.StatusInsufficientStorage, agentapi.CodeNoSpace, "POST", "/v1/sandboxes", api.CreateSandboxRequest{DiskMiB: 4096},
		"host disk", "--disk-reserve-mib", "diskMiB of 4096")
	e.fill(sb.ID, 2000)
	e.refusal(http.StatusInsufficientStorage, agentapi.CodeNoSpace, "POST", "/v1/sandboxes/"+sb.ID+"/pause", nil,
		"host disk", "--disk-reserve-mib", "pause image")
	if _, err := os.Lstat(e.imagesDir(sb.ID)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused pause left %s: %v", e.imagesDir(sb.ID), err)
	}
	if got := e.get(sb.ID); got.State != "running" {
		t.Fatalf("after a refused pause: %+v, want running", got)
	}
	if res := e.sh(sb.ID, "stat -c %s /workspace/big && echo alive"); res.Stdout != "2097152000\nalive\n" {
		t.Fatalf("after a refused pause: %+v", res)
	}
	e.pause(idle.ID)
	e.resume(idle.ID)
}

// TestPausedHoldSlots: paused sandboxes count against --max-sandboxes
// (README, Capacity): with two of two held, one of them paused, a create
// is 503 unavailable and says so; a resume needs no new slot; deleting the
// paused one frees its slot.
func TestPausedHoldSlots(t *testing.T) {
	e := newEnv(t, withLimits(func(l *sandbox.Limits) { l.MaxSandboxes = 2 }))
	a := e.create(api.CreateSandboxRequest{})
	e.create(api.CreateSandboxRequest{})
	e.pause(a.ID)
	e.refusal(http.StatusServiceUnavailable, agentapi.CodeUnavailable, "POST", "/v1/sandboxes", api.CreateSandboxRequest{},
		"maximum of 2 sandboxes", "1 running, 1 paused")
	e.resume(a.ID)
	e.refusal(http.StatusServiceUnavailable, agentapi.CodeUnavailable, "POST", "/v1/sandboxes", api.CreateSandboxRequest{},
		"maximum of 2 sandboxes", "2 running, 0 paused")
	e.pause(a.ID)
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+a.ID, nil, nil)
	e.create(api.CreateSandboxRequest{})
}

// TestKeyCountQuotas: a tenant key's sandboxes quota counts its running
// and paused sandboxes, its paused quota its paused ones; past either the
// answer is 429 quota_exceeded naming the quota, its value, the use and
// how to raise it. The server's default (serve --key-sandboxes-quota)
// binds tenant keys without a quota of their own, and not an
// administrator's key.
func TestKeyCountQuotas(t *testing.T) {
	e := newEnv(t, withLimits(func(l *sandbox.Limits) { l.KeyQuotas = store.KeyQuotas{Sandboxes: 1} }))
	def := e.as(e.quotaKey(api.CreateKeyRequest{Name: "default", DailyLimitMicros: 50_000_000}).Secret)
	def.create(api.CreateSandboxRequest{})
	def.refusal(http.StatusTooManyRequests, api.CodeQuotaExceeded, "POST", "/v1/sandboxes", api.CreateSandboxRequest{},
		"sandboxes quota", "may hold 1 sandbox at once", "holds 1", "--sandboxes-quota", "--key-sandboxes-quota")
	e.create(api.CreateSandboxRequest{}) // the administrator's key is not bound by the default
	e.create(api.CreateSandboxRequest{})

	// A key's own quotas, from the CLI (keys create; keys ls shows them).
	made := e.cli(nil, "keys", "create", "own", "--daily-limit-usd", "50", "--sandboxes-quota", "3", "--paused-quota", "1")
	if made.code != 0 || !strings.HasPrefix(made.stdout, "wr_") {
		t.Fatalf("keys create with quotas: %+v", made)
	}
	if ls := e.cli(nil, "keys", "ls"); !strings.Contains(ls.stdout, "  3 sandboxes, 1 paused\n") || !strings.Contains(ls.stdout, "  1 sandbox\n") {
		t.Errorf("keys ls does not show the quotas (its own, and the server's default of 1 sandbox): %+v", ls)
	}
	own := e.as(strings.TrimSpace(made.stdout))
	x := own.create(api.CreateSandboxRequest{})
	y := own.create(api.CreateSandboxRequest{})
	own.pause(x.ID)
	own.refusal(http.StatusTooManyRequests, api.CodeQuotaExceeded, "POST", "/v1/sandboxes/"+y.ID+"/pause", nil,
		"paused sandboxes quota", "may keep 1 sandbox paused and keeps 1", "--paused-quota")
	if got := own.get(y.ID); got.State != "running" {
		t.Fatalf("after a refused pause: %+v, want running", got)
	}
	own.create(api.CreateSandboxRequest{})
	own.refusal(http.StatusTooManyRequests, api.CodeQuotaExceeded, "POST", "/v1/sandboxes", api.CreateSandboxRequest{},
		"sandboxes quota", "may hold 3 sandboxes at once", "holds 3")
	if res := own.cli(nil, "sandbox", "create"); res.code == 0 || !strings.Contains(res.stderr, "sandboxes quota") {
		t.Errorf("sandbox create past the quota: %+v, want a failure naming the sandboxes quota", res)
	}
	own.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+x.ID, nil, nil) // a paused one frees its place
	own.create(api.CreateSandboxRequest{})
}
