package itest

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/server"
)

// withNetworkSlots sets how many sandbox networks the server keeps prepared.
func withNetworkSlots(n int) option {
	return func(c *server.Config) { c.Pool.NetworkSlots = n }
}

// namespaces maps the server's network namespace names to their inodes
// (a namespace's identity while it exists).
func namespaces(t *testing.T, cfg server.EgressConfig) map[string]uint64 {
	t.Helper()
	nc := netnsOf(cfg)
	out := map[string]uint64{}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), nc.NamePrefix) {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join("/run/netns", e.Name()), &st); err == nil {
			out[e.Name()] = st.Ino
		}
	}
	return out
}

// TestNetworkSlotNotReused (issue 18): a create takes a network prepared
// ahead (its namespace existed before the request), and that network was
// never any other sandbox's: root in an earlier sandbox, which set up a
// listener and tried to change its network, leaves nothing that the next
// sandbox gets. The next sandbox's namespace is another one, the earlier
// one is removed after its delete, and the new sandbox's own policy holds.
func TestNetworkSlotNotReused(t *testing.T) {
	t.Parallel()
	in := newFakeInternet(t)
	e := newEnv(t, withInternet(in), withNetworkSlots(2))
	nc := netnsOf(e.egress)
	waitFor(t, 30*time.Second, "two prepared networks", func() bool { return len(namespaces(t, e.egress)) >= 2 })

	before := namespaces(t, e.egress)
	a := e.create(api.CreateSandboxRequest{Network: &api.NetworkPolicy{Internet: true}})
	if _, ok := before[nc.NamePrefix+a.ID]; !ok {
		t.Errorf("sandbox %s did not take a prepared network (namespaces before its create: %v)", a.ID, before)
	}
	// Root inside a: a listener on every address, attempts to change the
	// interface, its address and routes (refused or confined to gVisor's
	// own network stack; nothing may outlive the sandbox).
	attack := `python3 - <<'EOF'
import socket, fcntl, struct, os, subprocess
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080)); s.listen(8)
for req, data in ((0x8916, struct.pack("16sH2s4s8s", b"eth0", socket.AF_INET, b"\0\0", socket.inet_aton("203.0.113.9"), b"\0"*8)),
                  (0x8914, struct.pack("16sH", b"eth0", 0))):
    try:
        fcntl.ioctl(s.fileno(), req, data)
        print("ioctl", hex(req), "accepted")
    except OSError as e:
        print("ioctl", hex(req), "refused", e.errno)
if os.fork() == 0:
    os.setsid()
    n = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2): os.dup2(n, fd)
    while True:
        try: s.accept()[0].close()
        except Exception: pass
print("listening")
EOF`
	if res := e.exec(a.ID, agentapi.ExecRequest{Command: attack, User: "root", TimeoutSeconds: 30}); !strings.Contains(res.Stdout, "listening") {
		t.Fatalf("attack in a: %+v", res)
	}
	during := namespaces(t, e.egress)
	aIno, ok := during[nc.NamePrefix+a.ID]
	if !ok {
		t.Fatalf("sandbox %s's namespace not found: %v", a.ID, during)
	}
	aAddr := strings.TrimSpace(e.sh(a.ID, `python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("192.0.2.1", 9)); print(s.getsockname()[0])'`).Stdout)
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+a.ID, nil, nil)

	asked := time.Now()
	b := e.create(api.CreateSandboxRequest{Network: &api.NetworkPolicy{Allow: []string{inetAPI}}})
	// Its record, lease and billing start at the create, not when its
	// network was prepared.
	if b.CreatedAt.Before(asked.Add(-time.Second)) {
		t.Errorf("sandbox %s created at %s, before its create was asked for (%s)", b.ID, b.CreatedAt, asked)
	}
	bIno, ok := during[nc.NamePrefix+b.ID]
	if !ok {
		t.Errorf("sandbox %s's namespace did not exist while %s ran: not a prepared one", b.ID, a.ID)
	}
	if bIno == aIno {
		t.Fatalf("sandbox %s got the namespace %s ran in (inode %d)", b.ID, a.ID, aIno)
	}
	waitFor(t, 10*time.Second, "a's namespace to be removed", func() bool {
		_, ok := namespaces(t, e.egress)[nc.NamePrefix+a.ID]
		return !ok
	})
	if missing := hasNetwork(e.egress, b.ID); len(missing) > 0 {
		t.Errorf("b's network: %v", missing)
	}
	ps := e.probes(b.ID, [][2]string{
		{"allowed", curl("http://" + inetAPI + "/")},
		{"denied", curl("http://" + inetOther + "/")},
		{"a_listener", `python3 -c 'import socket; socket.create_connection(("` + aAddr + `", 8080), timeout=2); print("connected")'`},
		{"own_8080", `python3 -c 'import socket; socket.create_connection(("127.0.0.1", 8080), timeout=2); print("connected")'`},
	})
	expectOK(t, ps, "allowed", "200")
	expectBlocked(t, ps, "denied")
	for _, n := range []string{"a_listener", "own_8080"} {
		if p := ps[n]; p.rc == 0 || strings.Contains(p.out, "connected") {
			t.Errorf("%s: %+v: a listener of the earlier sandbox answers in the new one", n, p)
		}
	}
	if res := e.sh(b.ID, `ip -4 addr 2>/dev/null || cat /proc/net/dev`); strings.Contains(res.Stdout, "203.0.113.9") {
		t.Errorf("the address root set in a shows in b: %s", res.Stdout)
	}
}

// TestPoolFollowsBurst (issue 18): a burst of creates larger than the warm
// pool grows it (health's size goes up, never past max, and that many are
// booted ready), and once the rate window has passed without creates it
// shrinks back to its floor. Every create of the burst succeeds.
func TestPoolFollowsBurst(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) {
		c.Pool = sandbox.PoolConfig{Size: 1, Max: 3, RateWindow: 20 * time.Second}
	})
	e.waitPoolReady(1)
	health := func() api.PoolStatus {
		var h api.Health
		e.must(http.StatusOK, "GET", "/v1/health", nil, &h)
		return h.Pool["base"]
	}
	if p := health(); p.Size != 1 || p.Min != 1 || p.Max != 3 {
		t.Fatalf("pool before the burst: %+v, want size 1, min 1, max 3", p)
	}
	var wg sync.WaitGroup
	ids := make([]string, 5)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = e.create(api.CreateSandboxRequest{TimeoutSeconds: 120}).ID
		}()
	}
	wg.Wait()
	if p := health(); p.Size != 3 {
		t.Errorf("pool right after a burst of 5: %+v, want size 3 (its max)", p)
	}
	peak := 0
	waitFor(t, 2*time.Minute, "the pool to grow to 3 ready", func() bool {
		p := health()
		peak = max(peak, p.Ready)
		if p.Ready > p.Max {
			t.Fatalf("pool holds %d ready, more than its max %d", p.Ready, p.Max)
		}
		return p.Ready == 3 || (p.Size == 1 && peak == 3)
	})
	if peak != 3 {
		t.Errorf("the pool never held 3 ready (peak %d)", peak)
	}
	waitFor(t, time.Minute, "the pool to shrink back to 1", func() bool {
		p := health()
		return p.Size == 1 && p.Ready == 1
	})
	// The sandboxes it dropped are gone from the host.
	waitFor(t, 30*time.Second, "the dropped pooled sandboxes to be destroyed", func() bool {
		return len(sandboxDirs(e.dataDir)) == len(ids)+1
	})
	for _, id := range ids {
		e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+id, nil, nil)
	}
}

// TestCloseAfterDeletesLeavesNothing (issue 18): networks of deleted
// sandboxes are removed in the background and prepared networks wait for
// creates, yet a server closed right after a burst of deletes leaves no
// namespace, veth or rules: Close waits for the teardown and removes the
// prepared ones.
func TestCloseAfterDeletesLeavesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withNetworkSlots(4))
	var wg sync.WaitGroup
	ids := make([]string, 4)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = e.create(api.CreateSandboxRequest{TimeoutSeconds: 120}).ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+id, nil, nil)
		}()
	}
	wg.Wait()
	e.http.Close()
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	e.detached = true // closed here; checked here
	if left := networkLeftovers(e.egress); len(left) > 0 {
		t.Errorf("left after Close: %v", left)
	}
	e.assertNoLeaks(ids...)
	destroyEgressTable(t, e.egress)
}

// TestCrashLeavesNoPreparedNetworks (issue 18): prepared networks that a
// killed server left (they belong to no sandbox record) are removed by the
// next server on the data directory.
func TestCrashLeavesNoPreparedNetworks(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "wr-slotcrash-")
	if err != nil {
		t.Fatal(err)
	}
	var names server.EgressConfig
	server.EgressNames(&names, dir)
	t.Cleanup(func() { sweep(t, dir, names) })
	s := startServe(t, dir, "--pool-size", "0", "--network-slots", "3")
	waitFor(t, 30*time.Second, "three prepared networks", func() bool { return len(namespaces(t, names)) == 3 })
	s.kill()
	if n := len(namespaces(t, names)); n != 3 {
		t.Fatalf("%d prepared networks after the kill, want the 3 left behind", n)
	}
	s = startServe(t, dir, "--pool-size", "0", "--network-slots", "0")
	for _, l := range networkLeftovers(names) {
		if !strings.HasPrefix(l, "nftables table") { // the running server's own
			t.Errorf("a prepared network of the killed server is left after the restart: %s", l)
		}
	}
	s.stop()
	s.assertNoLeaks()
}
