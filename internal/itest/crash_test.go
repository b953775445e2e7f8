package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"withruntime.dev/runtime/internal/agent"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/egress/firewall"
	"withruntime.dev/runtime/internal/egress/netns"
	"withruntime.dev/runtime/internal/server"
	"withruntime.dev/runtime/internal/store"
)

// serveProc is a `withruntime serve` process, the built binary, on a data
// directory; as reached through the API it is an env without an in-process
// server (srv is nil).
type serveProc struct {
	*env
	cmd    *exec.Cmd
	log    *lockedBuffer
	exited chan struct{}
}

// startServe starts `withruntime serve` on dir and waits until it serves.
func startServe(t *testing.T, dir string, args ...string) *serveProc {
	t.Helper()
	bin := buildWithruntime(t)
	argv := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir,
		"--templates-dir", templatesDir, "--no-build"}, args...)
	cmd := exec.Command(bin, argv...)
	cmd.Env = append(os.Environ(), "WITHRUNTIME_AGENT="+agentBin, "WITHRUNTIME_RUNSC="+runscBin)
	p := &serveProc{cmd: cmd, log: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { p.kill() })
	var url string
	waitFor(t, 2*time.Minute, "withruntime serve to serve", func() bool {
		select {
		case <-p.exited:
			t.Fatalf("withruntime serve exited: %s\n%s", cmd.ProcessState, p.log)
		default:
		}
		h, err := server.ReadHolder(dir)
		if err != nil || h.PID != cmd.Process.Pid || h.URL == "" {
			return false
		}
		url = h.URL
		return true
	})
	key, err := os.ReadFile(filepath.Join(dir, server.LocalKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	var names server.EgressConfig
	server.EgressNames(&names, dir)
	p.env = &env{t: t, http: &httptest.Server{URL: url}, dataDir: dir, key: strings.TrimSpace(string(key)), egress: names}
	return p
}

// kill ends the process with SIGKILL, as a crash would: nothing of it runs
// its shutdown.
func (p *serveProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop ends the process with SIGTERM, its graceful shutdown.
func (p *serveProc) stop() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		p.t.Errorf("withruntime serve did not stop on SIGTERM:\n%s", p.log)
		p.kill()
	}
}

// all lists every sandbox record, stopped ones too.
func (p *serveProc) all() []api.Sandbox {
	p.t.Helper()
	var list api.SandboxList
	p.must(http.StatusOK, "GET", "/v1/sandboxes", nil, &list)
	return list.Sandboxes
}

// sandboxDirs returns the names in dir's sandbox directory.
func sandboxDirs(dir string) []string {
	entries, _ := os.ReadDir(filepath.Join(dir, "gvisor", "sandboxes"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestCrashDuringCreates (D6, D12): `withruntime serve` is killed with
// SIGKILL during a burst of concurrent creates (and while its warm pool
// boots), twice; the next serve on the same data directory leaves no record
// starting, leaks nothing (runsc container, sandbox process, directory,
// cgroup, mount, namespace, veth, nftables rules) that no running record
// owns, and adopts the sandboxes that were running, which still answer.
func TestCrashDuringCreates(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "wr-crash-")
	if err != nil {
		t.Fatal(err)
	}
	var names server.EgressConfig
	server.EgressNames(&names, dir)
	t.Cleanup(func() { sweep(t, dir, names) })

	allow := &api.NetworkPolicy{Allow: []string{inetAPI}}
	seen := map[string]bool{}   // every sandbox directory ever seen, pooled ones too
	var created []api.Sandbox   // creates that returned 201
	marked := map[string]bool{} // the ones that wrote /workspace/mark
	for round := 0; round < 2; round++ {
		s := startServe(t, dir, "--pool-size", "1")
		if round == 0 {
			for _, req := range []api.CreateSandboxRequest{{MemoryMiB: 256}, {MemoryMiB: 256, Network: allow}} {
				sb := s.create(req)
				if res := s.sh(sb.ID, "echo kept-"+sb.ID+" > /workspace/mark"); res.ExitCode != 0 {
					t.Fatalf("write: %+v", res)
				}
				created = append(created, sb)
				marked[sb.ID] = true
			}
		}
		var mu sync.Mutex
		var burst sync.WaitGroup
		firstDone := make(chan struct{})
		var once sync.Once
		for i := 0; i < 8; i++ {
			req := api.CreateSandboxRequest{MemoryMiB: 256}
			if i%2 == 0 {
				req.Network = allow
			}
			burst.Add(1)
			go func() {
				defer burst.Done()
				o := s.try("POST", "/v1/sandboxes", req)
				var sb api.Sandbox
				if o.status == http.StatusCreated && json.Unmarshal(o.body, &sb) == nil {
					mu.Lock()
					created = append(created, sb)
					mu.Unlock()
					once.Do(func() { close(firstDone) })
				}
			}()
		}
		// Kill when the first create of the burst is answered: the others
		// are booting then. Note every sandbox directory meanwhile.
		deadline := time.After(90 * time.Second)
	wait:
		for {
			for _, n := range sandboxDirs(dir) {
				seen[n] = true
			}
			select {
			case <-firstDone:
				break wait
			case <-deadline:
				break wait
			case <-time.After(20 * time.Millisecond):
			}
		}
		for _, n := range sandboxDirs(dir) {
			seen[n] = true
		}
		s.kill()
		burst.Wait()
		t.Logf("round %d: killed serve with %d sandbox directories on the host, %d creates answered so far", round, len(sandboxDirs(dir)), len(created))
	}

	// No prepared networks on this one: any namespace not running is then
	// a leftover, the killed servers' prepared networks too.
	s := startServe(t, dir, "--pool-size", "0", "--network-slots", "0")
	records := s.all()
	running := map[string]bool{}
	for _, sb := range records {
		seen[sb.ID] = true
		switch sb.State {
		case "running":
			running[sb.ID] = true
		case "starting":
			t.Errorf("sandbox %s is still starting after the restart", sb.ID)
		case "stopped":
			if sb.EndReason == "" || sb.EndedAt == nil {
				t.Errorf("stopped sandbox %s has no end reason or time: %+v", sb.ID, sb)
			}
		}
	}
	t.Logf("after the crashes: %d records, %d running, %d sandbox ids seen on the host", len(records), len(running), len(seen))
	for _, sb := range created {
		if !running[sb.ID] {
			t.Errorf("sandbox %s was running (its create answered) but was not adopted: %+v", sb.ID, s.get(sb.ID))
			continue
		}
		if res := s.sh(sb.ID, "cat /workspace/mark 2>/dev/null || echo fresh"); res.ExitCode != 0 {
			t.Errorf("adopted sandbox %s: %+v", sb.ID, res)
		} else if marked[sb.ID] && res.Stdout != "kept-"+sb.ID+"\n" {
			t.Errorf("adopted sandbox %s lost its file: %q", sb.ID, res.Stdout)
		}
	}
	for _, l := range crashLeftovers(dir, names, running, seen) {
		t.Errorf("leaked: %s", l)
	}

	// The adopted ones are destroyed, the server stops: nothing is left.
	for id := range running {
		s.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+id, nil, nil)
	}
	s.stop()
	s.assertNoLeaks(keys(seen)...)
	if t.Failed() {
		t.Logf("the last server's log:\n%s", s.log)
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// crashLeftovers lists what of the sandboxes of data directory dir is on the
// host without a running record: runsc containers, sandbox and gofer
// processes, sandbox directories, cgroups (of the ids seen), mounts,
// namespaces, veths and nftables rules of the server's egress names.
func crashLeftovers(dir string, names server.EgressConfig, running, seen map[string]bool) []string {
	var left []string
	out, _ := exec.Command(runscBin, "--root", filepath.Join(dir, "gvisor", "runsc"), "list", "--quiet").Output()
	for _, id := range strings.Fields(string(out)) {
		if !running[id] {
			left = append(left, "runsc container "+id)
		}
	}
	for _, n := range sandboxDirs(dir) {
		if !running[n] {
			left = append(left, "sandbox directory "+n)
		}
	}
	sandboxes := filepath.Join(dir, "gvisor", "sandboxes") + "/"
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		cmdline := strings.ReplaceAll(string(b), "\x00", " ")
		if i := strings.Index(cmdline, sandboxes); i >= 0 {
			id, _, _ := strings.Cut(cmdline[i+len(sandboxes):], "/")
			id, _, _ = strings.Cut(id, ",")
			id, _, _ = strings.Cut(id, " ")
			if !running[id] {
				left = append(left, fmt.Sprintf("process %s of sandbox %s: %.120s", filepath.Base(filepath.Dir(f)), id, cmdline))
			}
		}
	}
	for id := range seen {
		if running[id] {
			continue
		}
		for _, cg := range cgroupsOf(id) {
			left = append(left, "cgroup "+cg)
		}
	}
	for _, m := range mountsUnder(dir) {
		rest, _ := strings.CutPrefix(m, sandboxes)
		id, _, _ := strings.Cut(rest, "/")
		if m == filepath.Join(dir, "gvisor", "runsc", "null-netns") || running[id] {
			continue
		}
		left = append(left, "mount "+m)
	}
	nc := netnsOf(names)
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if id, ok := strings.CutPrefix(e.Name(), nc.NamePrefix); ok && netns.ValidID(id) == nil && !running[id] {
			left = append(left, "namespace "+e.Name())
		}
	}
	owners := map[string]string{}
	links, _ := netlink.LinkList()
	for _, l := range links {
		a := l.Attrs()
		if !strings.HasPrefix(a.Name, nc.LinkPrefix) {
			continue
		}
		id, _ := strings.CutPrefix(a.Alias, nc.AliasPrefix)
		owners[a.Name] = id
		if !running[id] {
			left = append(left, fmt.Sprintf("veth %s (alias %q)", a.Name, a.Alias))
		}
	}
	if fw, err := firewall.New(names.Name, names.LinkPrefix); err == nil {
		ifs, _ := fw.Links()
		for _, ifName := range ifs {
			if id, ok := owners[ifName]; !ok || !running[id] {
				left = append(left, "nftables rules for "+ifName)
			}
		}
	}
	return left
}

// sweep removes whatever a failed crash test left: a server on dir
// recovers (destroying what is not running), then destroys the rest.
func sweep(t *testing.T, dir string, names server.EgressConfig) {
	srv, err := server.Open(context.Background(), server.Config{DataDir: dir, TemplatesDir: templatesDir,
		Runsc: runscBin, Agent: agentBin, Egress: names, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Errorf("sweeping %s: %v", dir, err)
		return
	}
	for _, state := range []string{store.StateRunning, store.StatePaused} {
		if sbs, err := srv.Store.ListSandboxes(context.Background(), store.SandboxFilter{State: state}); err == nil {
			for _, sb := range sbs {
				_ = srv.Manager.Destroy(context.Background(), sb.ID)
			}
		}
	}
	_ = srv.Close()
	destroyEgressTable(t, names)
	os.RemoveAll(dir)
}

// TestLeaseEndedWhileDown (D12): a lease that ended while no server ran is
// recorded as ended at the lease end, not when the next server started, and
// billed up to then only: whether the agent's backstop ended the sandbox
// meanwhile (x, LeaseGrace after its lease end) or it still ran (y).
func TestLeaseEndedWhileDown(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "wr-ended-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	a := newEnv(t, withDataDir(dir), withMeterInterval(time.Second))
	x := a.create(api.CreateSandboxRequest{TimeoutSeconds: 300, MemoryMiB: 256})
	y := a.create(api.CreateSandboxRequest{TimeoutSeconds: 300, MemoryMiB: 256})
	time.Sleep(1200 * time.Millisecond) // a sample or so while the server runs
	// The leases end shortly after the server goes (set now, so that slow
	// creates do not make them end before).
	a.must(http.StatusOK, "POST", "/v1/sandboxes/"+x.ID+"/timeout", api.SetTimeoutRequest{TimeoutSeconds: 2}, &x)
	a.must(http.StatusOK, "POST", "/v1/sandboxes/"+y.ID+"/timeout", api.SetTimeoutRequest{TimeoutSeconds: 9}, &y)
	a.detach()

	// Down until x's backstop ended it, y's lease ended but its backstop
	// has not.
	xGone := x.LeaseEndsAt.Add(agent.LeaseGrace + time.Second)
	if wait := time.Until(xGone); wait > 0 {
		time.Sleep(wait)
	}
	if time.Now().After(y.LeaseEndsAt.Add(agent.LeaseGrace - 2*time.Second)) {
		t.Skip("the creates took too long for the two cases to fall apart; try on a less loaded host")
	}
	b := newEnv(t, withDataDir(dir), withMeterInterval(time.Second))
	restart := time.Now()
	for _, sb := range []api.Sandbox{x, y} {
		got := b.get(sb.ID)
		if got.State != "stopped" || got.EndReason != "lease_ended" || got.EndedAt == nil {
			t.Errorf("sandbox %s after the restart: %+v", sb.ID, got)
			continue
		}
		if !got.EndedAt.Equal(sb.LeaseEndsAt) {
			t.Errorf("sandbox %s: endedAt %s, want its lease end %s (stored %s; the server restarted at %s)",
				sb.ID, got.EndedAt.Format(time.StampMilli), sb.LeaseEndsAt.Format(time.StampMilli), got.LeaseEndsAt.Format(time.StampMilli), restart.Format(time.StampMilli))
		}
		// The ledger covers creation to endedAt exactly, so nothing past the
		// lease end is billed.
		b.ledgerSpan(got)
		b.assertGone(sb.ID)
	}
}
