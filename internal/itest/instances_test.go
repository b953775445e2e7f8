package itest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/egress"
	"withruntime.dev/runtime/internal/egress/firewall"
	"withruntime.dev/runtime/internal/egress/netns"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/server"
)

// netnsOf returns the namespace configuration a server with these egress
// names uses (as egress.New makes it).
func netnsOf(cfg server.EgressConfig) netns.Config {
	name, prefix := cfg.Name, cfg.LinkPrefix
	if name == "" {
		name, prefix = "withruntime", "wr"
	}
	return netns.Config{NamePrefix: name + "-", LinkPrefix: prefix, AliasPrefix: name + ":"}
}

// hasNetwork says what of sandbox id's network is missing on the host: its
// namespace (mounted), its veth (with its alias and address) and its rules
// in the server's nftables table.
func hasNetwork(cfg server.EgressConfig, id string) []string {
	nc := netnsOf(cfg)
	l, err := nc.Lookup(id)
	if err != nil {
		return []string{err.Error()}
	}
	name := cfg.Name
	if name == "" {
		name = "withruntime"
	}
	fw, err := firewall.New(name, nc.LinkPrefix)
	if err != nil {
		return []string{err.Error()}
	}
	links, err := fw.Links()
	if err != nil {
		return []string{err.Error()}
	}
	for _, ifName := range links {
		if ifName == l.HostIf {
			return nil
		}
	}
	return []string{"no rules for " + l.HostIf + " in table " + name}
}

// openDefault opens a server on the default data directory, as `withruntime
// serve` or a CLI command with no --data-dir does, waiting while another
// process runs one there. It skips the test if that takes over a minute.
func openDefault(t *testing.T) *server.Server {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		srv, err := server.Open(context.Background(), server.Config{
			DataDir: server.DefaultDataDir, TemplatesDir: templatesDir, Runsc: runscBin, Agent: agentBin,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		var inUse *server.ErrInUse
		if !errors.As(err, &inUse) {
			if err != nil {
				t.Fatal(err)
			}
			return srv
		}
		if time.Now().After(deadline) {
			t.Skipf("the default data directory stays in use (%v); this test runs a server there", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestInstancesKeepTheirNetworks (C25): a server creates networked
// sandboxes in a loop while other servers start and stop beside it on other
// data directories: the default one (whose names, "withruntime-…", start
// every other server's), another server that leaves a sandbox running
// across its restart, and a CLI command with its embedded server. No create
// fails, and every sandbox of every instance keeps its namespace, veth and
// rules and reaches what it is allowed to: each server cleans up only its
// own names.
func TestInstancesKeepTheirNetworks(t *testing.T) {
	in := newFakeInternet(t)
	a := newEnv(t, withInternet(in))
	allow := api.CreateSandboxRequest{Network: &api.NetworkPolicy{Allow: []string{inetAPI}}, MemoryMiB: 256}

	// A creates in a loop, deleting every other sandbox it made, until stop.
	var (
		mu       sync.Mutex
		kept     []string
		failures []string
		creates  int
	)
	stop := make(chan struct{})
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			o := a.try("POST", "/v1/sandboxes", allow)
			var sb api.Sandbox
			if o.err != nil || o.status != http.StatusCreated || json.Unmarshal(o.body, &sb) != nil {
				mu.Lock()
				failures = append(failures, "create: "+o.String())
				mu.Unlock()
				continue
			}
			mu.Lock()
			creates++
			if left := hasNetwork(a.egress, sb.ID); len(left) > 0 {
				failures = append(failures, "new sandbox "+sb.ID+": "+strings.Join(left, "; "))
			}
			mu.Unlock()
			mu.Lock()
			full := len(kept) >= 6 // bound the load; creates go on
			mu.Unlock()
			if i%2 == 1 || full {
				if o := a.try("DELETE", "/v1/sandboxes/"+sb.ID, nil); o.status != http.StatusNoContent {
					mu.Lock()
					failures = append(failures, "delete: "+o.String())
					mu.Unlock()
				}
				continue
			}
			mu.Lock()
			kept = append(kept, sb.ID)
			mu.Unlock()
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-loopDone
	}()

	// B, on a data directory of its own, leaves a sandbox running across
	// its restarts.
	bDir, err := os.MkdirTemp("/tmp", "wr-inst-b-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bDir) })
	b := newEnv(t, withDataDir(bDir), withInternet(in))
	bSandbox := b.create(allow)
	b.detach()

	// The CLI's embedded server on a third data directory.
	cDir, err := os.MkdirTemp("/tmp", "wr-inst-c-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(cDir) })
	bin := buildWithruntime(t)

	for round := 0; round < 2; round++ {
		// The default data directory's server: starts (recovering and
		// cleaning up its leftovers), runs a networked sandbox, stops.
		d := openDefault(t)
		sb, err := d.Manager.Create(context.Background(), sandbox.CreateParams{
			Network: &egress.Policy{Allow: []string{inetAPI}}, MemoryMiB: 256, TimeoutSeconds: 60})
		if err != nil {
			t.Errorf("create on the default data directory: %v", err)
		} else if err := d.Manager.Destroy(context.Background(), sb.ID); err != nil {
			t.Errorf("destroy on the default data directory: %v", err)
		}
		if err := d.Close(); err != nil {
			t.Errorf("closing the default data directory's server: %v", err)
		}

		b = newEnv(t, withDataDir(bDir), withInternet(in))
		if got := b.get(bSandbox.ID); got.State != "running" {
			t.Errorf("B's sandbox after B's restart: %+v", got)
		}
		b.detach()

		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, bin, "sandbox", "run", "--", "echo", "embedded")
		cmd.Env = append(os.Environ(), "WITHRUNTIME_DATA_DIR="+cDir, "WITHRUNTIME_TEMPLATES_DIR="+templatesDir, "WITHRUNTIME_URL=", "WITHRUNTIME_API_KEY=", "XDG_CONFIG_HOME="+t.TempDir(),
			"WITHRUNTIME_AGENT="+agentBin, "WITHRUNTIME_RUNSC="+runscBin)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil || !strings.Contains(string(out), "embedded") {
			t.Errorf("CLI on %s: %v\n%s", cDir, err, out)
		}
	}
	close(stop)
	<-loopDone

	mu.Lock()
	defer mu.Unlock()
	t.Logf("A created %d sandboxes while the others started and stopped; %d kept", creates, len(kept))
	for _, f := range failures {
		t.Errorf("A: %s", f)
	}
	if len(kept) < 2 {
		t.Fatalf("A kept only %d sandboxes: the loop did not run beside the others", len(kept))
	}
	for _, id := range kept {
		if left := hasNetwork(a.egress, id); len(left) > 0 {
			t.Errorf("A's sandbox %s lost its network: %v; its record: %+v", id, left, a.get(id))
		}
	}
	for _, id := range []string{kept[0], kept[len(kept)-1]} {
		expectOK(t, a.probes(id, [][2]string{{"allowed", curl("http://" + inetAPI + "/")}}), "allowed", "200")
	}

	// B's sandbox kept its network through the others' starts; the next B
	// adopts it and destroys it.
	if left := hasNetwork(b.egress, bSandbox.ID); len(left) > 0 {
		t.Errorf("B's sandbox lost its network: %v", left)
	}
	b = newEnv(t, withDataDir(bDir), withInternet(in))
	expectOK(t, b.probes(bSandbox.ID, [][2]string{{"allowed", curl("http://" + inetAPI + "/")}}), "allowed", "200")
}
