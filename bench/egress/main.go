// Command egress measures what a sandbox's network costs, in one run with
// its baselines:
//
//  1. An HTTPS GET (small body, new connection each time) with curl from
//     inside a sandbox whose allow list holds the name, through the egress
//     path (the sandbox's DNS server on the host, nftables redirect, the
//     transparent proxy that checks the SNI, resolves the name itself and
//     dials it) against the same curl command run on the host, in the root
//     network namespace (where the proxy dials from), resolving the name
//     through a plain DNS server on loopback to the same server. Figures are
//     curl's own (-w time_namelookup, time_connect, time_appconnect,
//     time_total), so process start and the exec round trip are left out;
//     the exec-wrapped figure (the API's collected exec of that curl, against
//     the wall time of the host's curl process) is shown as well. A third
//     path splits the overhead: the same curl on the host but inside a plain
//     network namespace that the egress package attaches (same DNS server,
//     rules and proxy as a sandbox's, without gVisor's network stack). A
//     warm client (one python3 process making N GETs, each with its own
//     lookup and connection) is measured on all three paths too.
//  2. Creating a sandbox: with an allow list, with the default network
//     ({internet: false}: a namespace with rules that refuse everything),
//     and with no network at all (a server with egress disabled, runsc
//     --network=none), the baseline. Each sample times POST /v1/sandboxes to
//     its answer (the sandbox is ready) and on to the first event of a
//     streamed exec of `true`.
//
// The upstream is the benchmark's own: a network namespace holding an HTTPS
// server (certificate from its own CA) on an address from 198.18.0.0/15,
// names resolved from a map. Nothing is sent anywhere but namespaces the
// benchmark builds and loopback. Everything it makes (servers, sandboxes,
// namespaces, veths, the nftables table, /tmp/wr-bench-egress) is removed at
// the end, on error and on SIGINT/SIGTERM/SIGHUP; a run killed outright is swept by
// the next one, since the names are fixed (runs exclude each other by a lock).
//
// Run it with bench/run.sh (as root, after scripts/install.sh).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/driver/gvisor"
	"withruntime.dev/runtime/internal/egress"
	"withruntime.dev/runtime/internal/egress/firewall"
	"withruntime.dev/runtime/internal/server"
)

const (
	workDir = "/tmp/wr-bench-egress"
	// The networked server's nftables table and namespace prefix, and its
	// host veth prefix (not "wr": see inetNames).
	egressName  = "wrbegr"
	egressLinks = "wbe"
	// The egress manager of the no-gVisor path (a namespace, no sandbox).
	probeName    = "wrbprb"
	probeLinks   = "wbp"
	probeID      = "probe"
	apiName      = "api.bench.test" // on the fake internet, allowed
	baselineDNS  = "127.77.0.53"    // the host baseline's DNS server (loopback)
	sandboxCA    = "/tmp/bench-ca.pem"
	curlFormat   = "%{http_code} %{time_namelookup} %{time_connect} %{time_appconnect} %{time_total}\n"
	sandboxLease = 3600
)

type row struct {
	Name      string    `json:"name"`
	SamplesMs []float64 `json:"samplesMs"`
	MedianMs  float64   `json:"medianMs"`
	P90Ms     float64   `json:"p90Ms"`
}

// group is rows compared with one of them, the baseline.
type group struct {
	Title    string `json:"title"`
	Rows     []row  `json:"rows"`
	Baseline int    `json:"baseline"` // index in Rows
}

func main() {
	runs := flag.Int("runs", 20, "samples per row")
	out := flag.String("out", "bench/results/egress.json", "where to write the JSON results")
	templates := flag.String("templates", "/var/lib/withruntime/templates", "templates directory (base must be built)")
	flag.Parse()
	// A closed stdout (| head) must not kill the run before its cleanup.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	err := run(ctx, *runs, *out, *templates)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "egress:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, runs int, out, templates string) (err error) {
	if runs < 1 {
		return fmt.Errorf("-runs must be at least 1")
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (sandboxes, namespaces, nftables)")
	}
	lock, err := os.OpenFile(workDir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("another egress benchmark runs (lock %s): %w", lock.Name(), err)
	}
	defer os.Remove(lock.Name()) // while still holding it
	runsc, err := findBinary("WITHRUNTIME_RUNSC", "runsc")
	if err != nil {
		return err
	}
	agent, err := findBinary("WITHRUNTIME_AGENT", "withruntime-agent")
	if err != nil {
		return err
	}
	curlBin, err := exec.LookPath("curl")
	if err != nil {
		return fmt.Errorf("curl on the host: %w", err)
	}
	if err := sweep(runsc, agent); err != nil {
		return fmt.Errorf("sweeping an earlier run's leftovers: %w", err)
	}
	var servers []*benchServer
	defer func() {
		// Cleanup gets its own time, also after SIGINT cancelled ctx.
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, s := range servers {
			s.close(cctx)
		}
		cerr := sweep(runsc, agent)
		if left := leftovers(); len(left) > 0 {
			cerr = errors.Join(cerr, fmt.Errorf("left on the host: %s", strings.Join(left, ", ")))
		}
		if cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
		}
	}()
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return err
	}

	in, err := newInternet([]string{apiName})
	if err != nil {
		return fmt.Errorf("fake internet: %w", err)
	}
	defer in.close()
	dnsSrv, err := startDNS(net.JoinHostPort(baselineDNS, "53"), in.resolver)
	if err != nil {
		return fmt.Errorf("baseline DNS server: %w", err)
	}
	defer dnsSrv.Shutdown()
	resolvConf := filepath.Join(workDir, "resolv.conf")
	hostCA := filepath.Join(workDir, "ca.pem")
	if err := os.WriteFile(resolvConf, []byte("nameserver "+baselineDNS+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(hostCA, in.caPEM, 0o644); err != nil {
		return err
	}

	base := server.Config{TemplatesDir: templates, Runsc: runsc, Agent: agent,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	netCfg := base
	netCfg.DataDir = filepath.Join(workDir, "net")
	netCfg.Egress = server.EgressConfig{
		Name: egressName, LinkPrefix: egressLinks,
		Exempt:   []netip.Prefix{inetNames.Pool},
		Resolver: in.resolver, UpstreamRoots: in.roots,
	}
	withNet, err := openServer(ctx, netCfg)
	if err != nil {
		return err
	}
	servers = append(servers, withNet)
	noneCfg := base
	noneCfg.DataDir = filepath.Join(workDir, "nonet")
	noneCfg.Egress.Disabled = true
	noNet, err := openServer(ctx, noneCfg)
	if err != nil {
		return err
	}
	servers = append(servers, noNet)

	probe, err := egress.New(egress.Config{Name: probeName, LinkPrefix: probeLinks,
		Exempt: []netip.Prefix{inetNames.Pool}, Resolver: in.resolver})
	if err != nil {
		return err
	}
	att, err := probe.Attach(ctx, probeID, egress.Policy{Allow: []string{apiName}})
	if err != nil {
		return err
	}
	defer probe.Close()
	probeResolv := filepath.Join(workDir, "probe-resolv.conf")
	if err := os.WriteFile(probeResolv, []byte(att.ResolvConf), 0o644); err != nil {
		return err
	}

	var groups []group
	gs, err := benchHTTPS(ctx, withNet.api, curlBin, hostCA, in.caPEM, runs,
		hostPath{resolvConf: resolvConf}, hostPath{resolvConf: probeResolv, netns: att.NetnsPath})
	if err != nil {
		return fmt.Errorf("https: %w", err)
	}
	groups = append(groups, gs...)
	gs, err = benchCreate(ctx, withNet.api, noNet.api, runs)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	groups = append(groups, gs...)

	printGroups(groups)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(map[string]any{"at": time.Now().UTC(), "runs": runs, "groups": groups}, "", "  ")
	return os.WriteFile(out, append(data, '\n'), 0o644)
}

// curlArgs is the request, the same on both sides: one HTTPS GET of a small
// body on a new connection, verified with the fake internet's CA.
func curlArgs(ca string) []string {
	return []string{"-sS", "-m", "10", "-o", "/dev/null", "--cacert", ca, "-w", curlFormat, "https://" + apiName + "/"}
}

// curlTimes is one request as curl reports it, in ms from its start.
type curlTimes struct{ lookup, connect, tls, total float64 }

func parseCurl(out string) (curlTimes, error) {
	f := strings.Fields(out)
	if len(f) != 5 || f[0] != "200" {
		return curlTimes{}, fmt.Errorf("curl printed %q, want 200 and four times", out)
	}
	var v [4]float64
	for i := range v {
		x, err := strconv.ParseFloat(f[i+1], 64)
		if err != nil {
			return curlTimes{}, fmt.Errorf("curl printed %q: %w", out, err)
		}
		v[i] = math.Round(x*1e6) / 1e3 // s to ms, to the µs
	}
	return curlTimes{v[0], v[1], v[2], v[3]}, nil
}

// hostPath is where the host runs curl: a network namespace (empty: the
// host's own) and the resolv.conf it sees there.
type hostPath struct{ resolvConf, netns string }

// runOnHost runs argv in a private mount namespace (whose /etc/resolv.conf
// is p.resolvConf) and p's network namespace; it returns its output and the
// process's wall time.
func runOnHost(ctx context.Context, p hostPath, argv ...string) (string, time.Duration, error) {
	run := `mount --bind "$0" /etc/resolv.conf && bin=$1 && shift && exec "$bin" "$@"`
	if p.netns != "" {
		run = `mount --bind "$0" /etc/resolv.conf && bin=$1 && shift && exec nsenter --net=` + p.netns + ` "$bin" "$@"`
	}
	argv = append([]string{"--mount", "--propagation", "private", "sh", "-c", run, p.resolvConf}, argv...)
	cmd := exec.CommandContext(ctx, "unshare", argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return "", 0, fmt.Errorf("%s on the host (%+v): %w: %s%s", argv[7], p, err, stdout.String(), stderr.String())
	}
	return stdout.String(), d, nil
}

func curlOnHost(ctx context.Context, p hostPath, curlBin string, args []string) (curlTimes, time.Duration, error) {
	out, d, err := runOnHost(ctx, p, append([]string{curlBin}, args...)...)
	if err != nil {
		return curlTimes{}, 0, err
	}
	t, err := parseCurl(out)
	return t, d, err
}

// pyClient is a warm client: one python3 process that makes argv[2] HTTPS
// GETs (after two to warm up), each on a new connection with its own name
// lookup, verified with the CA file argv[1], and prints each one's ms.
const pyClient = `import http.client, ssl, sys, time
ctx = ssl.create_default_context(cafile=sys.argv[1])
def get():
    c = http.client.HTTPSConnection("` + apiName + `", 443, context=ctx, timeout=10)
    c.request("GET", "/")
    r = c.getresponse()
    r.read()
    c.close()
    if r.status != 200:
        sys.exit("status %d" % r.status)
for _ in range(2):
    get()
for _ in range(int(sys.argv[2])):
    s = time.perf_counter()
    get()
    print("%.3f" % ((time.perf_counter() - s) * 1000))
`

// hostPython is the system's python3 (the distribution's, like the
// template's), else the first in PATH.
func hostPython() string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}

func parseMs(out string, n int) ([]float64, error) {
	var xs []float64
	for _, f := range strings.Fields(out) {
		x, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, fmt.Errorf("python3 printed %q", out)
		}
		xs = append(xs, x)
	}
	if len(xs) != n {
		return nil, fmt.Errorf("python3 printed %d times, want %d: %q", len(xs), n, out)
	}
	return xs, nil
}

func benchHTTPS(ctx context.Context, c *apiClient, curlBin, hostCA string, caPEM []byte, runs int, direct, probe hostPath) ([]group, error) {
	sb, err := c.create(ctx, api.CreateSandboxRequest{TimeoutSeconds: sandboxLease,
		Network: &api.NetworkPolicy{Allow: []string{apiName}}})
	if err != nil {
		return nil, err
	}
	defer c.delete(sb.ID)
	if res, err := c.exec(ctx, sb.ID, agentapi.ExecRequest{Command: "cat > " + sandboxCA, Stdin: string(caPEM)}); err != nil {
		return nil, err
	} else if res.ExitCode != 0 {
		return nil, fmt.Errorf("writing the CA in the sandbox: %+v", res)
	}
	inSandbox := func() (curlTimes, time.Duration, error) {
		start := time.Now()
		res, err := c.exec(ctx, sb.ID, agentapi.ExecRequest{Argv: append([]string{"curl"}, curlArgs(sandboxCA)...), TimeoutSeconds: 30})
		d := time.Since(start)
		if err != nil {
			return curlTimes{}, 0, err
		}
		if res.ExitCode != 0 {
			return curlTimes{}, 0, fmt.Errorf("curl in the sandbox: exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
		}
		t, err := parseCurl(res.Stdout)
		return t, d, err
	}
	// Three paths, sampled in turn so that drift hits them alike.
	paths := []struct {
		name, wrapped string
		get           func() (curlTimes, time.Duration, error)
	}{
		{"sandbox via egress", "sandbox: API exec of the curl command (round trip)", inSandbox},
		{"plain netns via egress, no gVisor", "plain netns via egress: the curl process (unshare, sh, mount, nsenter, curl)",
			func() (curlTimes, time.Duration, error) { return curlOnHost(ctx, probe, curlBin, curlArgs(hostCA)) }},
		{"host direct", "host direct: the curl process (unshare, sh, mount, curl)",
			func() (curlTimes, time.Duration, error) { return curlOnHost(ctx, direct, curlBin, curlArgs(hostCA)) }},
	}
	for i := 0; i < 2; i++ { // warm every path (binaries, page cache, proxy)
		for _, p := range paths {
			if _, _, err := p.get(); err != nil {
				return nil, fmt.Errorf("%s: %w", p.name, err)
			}
		}
	}
	phases := []string{"DNS lookup done (curl time_namelookup)", "TCP connected (time_connect)",
		"TLS handshake done (time_appconnect)", "response done (time_total)"}
	times := make([][4]row, len(paths)) // [path][phase]
	wrapped := make([]row, len(paths))
	for k, p := range paths {
		for i := range phases {
			times[k][i].Name = p.name + ": " + phases[i]
		}
		wrapped[k].Name = p.wrapped
	}
	for i := 0; i < runs; i++ {
		for k, p := range paths {
			t, d, err := p.get()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.name, err)
			}
			for j, v := range []float64{t.lookup, t.connect, t.tls, t.total} {
				times[k][j].SamplesMs = append(times[k][j].SamplesMs, v)
			}
			wrapped[k].SamplesMs = append(wrapped[k].SamplesMs, ms(d))
		}
	}
	last := len(paths) - 1
	var gs []group
	for j := len(phases) - 1; j >= 0; j-- { // the total first
		g := group{Title: "HTTPS GET, new connection, curl -w: " + phases[j], Baseline: last}
		for k := range paths {
			g.Rows = append(g.Rows, summarize(times[k][j]))
		}
		gs = append(gs, g)
	}
	g := group{Title: "HTTPS GET, exec-wrapped (the request plus starting curl)", Baseline: last}
	for k := range paths {
		g.Rows = append(g.Rows, summarize(wrapped[k]))
	}
	gs = append(gs, g)

	// A warm client: no process start, no cold resolver or TLS library.
	n := strconv.Itoa(runs)
	res, err := c.exec(ctx, sb.ID, agentapi.ExecRequest{Argv: []string{"python3", "-c", pyClient, sandboxCA, n}, TimeoutSeconds: 300})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("python3 in the sandbox: exit %d: %s", res.ExitCode, res.Stderr)
	}
	sbxPy, err := parseMs(res.Stdout, runs)
	if err != nil {
		return nil, err
	}
	g = group{Title: "HTTPS GET, new connection, warm python3 client (http.client, lookup+connect+TLS+GET)", Baseline: last}
	g.Rows = append(g.Rows, summarize(row{Name: "sandbox via egress: python3", SamplesMs: sbxPy}))
	for _, hp := range []struct {
		name string
		p    hostPath
	}{{"plain netns via egress, no gVisor: python3", probe}, {"host direct: python3", direct}} {
		out, _, err := runOnHost(ctx, hp.p, hostPython(), "-c", pyClient, hostCA, n)
		if err != nil {
			return nil, err
		}
		xs, err := parseMs(out, runs)
		if err != nil {
			return nil, err
		}
		g.Rows = append(g.Rows, summarize(row{Name: hp.name, SamplesMs: xs}))
	}
	return append(gs, g), nil
}

func benchCreate(ctx context.Context, withNet, noNet *apiClient, runs int) ([]group, error) {
	variants := []struct {
		name string
		c    *apiClient
		req  api.CreateSandboxRequest
	}{
		{"allow list [" + apiName + "]", withNet, api.CreateSandboxRequest{Network: &api.NetworkPolicy{Allow: []string{apiName}}}},
		{"default network {internet: false}", withNet, api.CreateSandboxRequest{}},
		{"no network (egress disabled, --network=none)", noNet, api.CreateSandboxRequest{}},
	}
	ready := make([]row, len(variants))
	first := make([]row, len(variants))
	for i, v := range variants {
		ready[i].Name = "create returns: " + v.name
		first[i].Name = "first output of true: " + v.name
		if _, _, err := v.c.createToFirstOutput(ctx, v.req, []string{"true"}); err != nil { // warm
			return nil, fmt.Errorf("%s: %w", v.name, err)
		}
	}
	for i := 0; i < runs; i++ {
		for k := range variants { // rotate the order so no variant always goes first
			j := (i + k) % len(variants)
			v := variants[j]
			r, f, err := v.c.createToFirstOutput(ctx, v.req, []string{"true"})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", v.name, err)
			}
			ready[j].SamplesMs = append(ready[j].SamplesMs, ms(r))
			first[j].SamplesMs = append(first[j].SamplesMs, ms(f))
		}
	}
	for i := range variants {
		ready[i], first[i] = summarize(ready[i]), summarize(first[i])
	}
	last := len(variants) - 1
	return []group{
		{Title: "create to ready (POST /v1/sandboxes answered)", Rows: ready, Baseline: last},
		{Title: "create to first output of `true` (streamed exec)", Rows: first, Baseline: last},
	}, nil
}

func printGroups(gs []group) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tmedian ms\tp90 ms\tratio to baseline\t")
	for _, g := range gs {
		fmt.Fprintf(tw, "%s\t\t\t\t\n", "— "+g.Title)
		b := g.Rows[g.Baseline]
		for i, r := range g.Rows {
			ratio := fmt.Sprintf("%.2fx", r.MedianMs/b.MedianMs)
			if i == g.Baseline {
				ratio = "1.00x (baseline)"
			}
			fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%s\t\n", r.Name, r.MedianMs, r.P90Ms, ratio)
		}
	}
	tw.Flush()
}

func summarize(r row) row {
	s := append([]float64(nil), r.SamplesMs...)
	sort.Float64s(s)
	r.MedianMs = s[len(s)/2]
	if len(s)%2 == 0 {
		r.MedianMs = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	r.MedianMs = math.Round(r.MedianMs*1000) / 1000
	// Nearest rank: the ceil(0.9 n)-th smallest.
	r.P90Ms = s[(len(s)*9+9)/10-1]
	return r
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func findBinary(envVar, name string) (string, error) {
	if p := os.Getenv(envVar); p != "" {
		return p, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not found (set %s or run scripts/install.sh): %w", name, envVar, err)
	}
	return p, nil
}

// benchServer is one in-process Runtime server on loopback.
type benchServer struct {
	srv    *server.Server
	cancel context.CancelFunc
	api    *apiClient
}

func openServer(ctx context.Context, cfg server.Config) (*benchServer, error) {
	srv, err := server.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("server on %s: %w", cfg.DataDir, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Manager.DestroyAll(context.Background())
		srv.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	go srv.Serve(sctx, l)
	return &benchServer{srv: srv, cancel: cancel, api: &apiClient{base: "http://" + l.Addr().String(), key: srv.LocalKey}}, nil
}

func (s *benchServer) close(ctx context.Context) {
	s.cancel()
	s.srv.Manager.DestroyAll(ctx)
	s.srv.Close()
}

// sweep removes whatever a run leaves on the host: sandboxes under either
// data directory, the networked server's namespaces, veths and nftables
// table, the fake internet's namespace, and the work directory.
func sweep(runsc, agent string) error {
	ctx := context.Background()
	var errList []error
	if _, err := os.Stat(workDir); err == nil {
		for _, sub := range []string{"net", "nonet"} {
			state := filepath.Join(workDir, sub, "gvisor")
			if _, err := os.Stat(state); err != nil {
				continue
			}
			d, err := gvisor.New(gvisor.Config{Runsc: runsc, AgentBinary: agent, StateDir: state})
			if err != nil {
				errList = append(errList, err)
				continue
			}
			ids, _ := d.List(ctx)
			for _, id := range ids {
				if err := d.Destroy(ctx, id); err != nil {
					errList = append(errList, err)
				}
			}
			_ = d.Close()
		}
	}
	for _, n := range [][2]string{{egressName, egressLinks}, {probeName, probeLinks}} {
		if m, err := egress.New(egress.Config{Name: n[0], LinkPrefix: n[1]}); err != nil {
			errList = append(errList, err)
		} else if err := m.Destroy(ctx); err != nil {
			errList = append(errList, err)
		}
	}
	if err := inetNames.Delete(inetID); err != nil {
		errList = append(errList, err)
	}
	if err := os.RemoveAll(workDir); err != nil {
		errList = append(errList, err)
	}
	return errors.Join(errList...)
}

// leftovers lists what of the benchmark's remains on the host.
func leftovers() []string {
	var left []string
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), egressName+"-") || strings.HasPrefix(e.Name(), probeName+"-") ||
			strings.HasPrefix(e.Name(), inetNames.NamePrefix) {
			left = append(left, "namespace "+e.Name())
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if strings.HasPrefix(i.Name, egressLinks) || strings.HasPrefix(i.Name, probeLinks) ||
			strings.HasPrefix(i.Name, inetNames.LinkPrefix) {
			left = append(left, "link "+i.Name)
		}
	}
	for _, n := range [][2]string{{egressName, egressLinks}, {probeName, probeLinks}} {
		if fw, err := firewall.New(n[0], n[1]); err == nil {
			if ok, _ := fw.Exists(); ok {
				left = append(left, "nftables table inet "+n[0])
			}
		}
	}
	if _, err := os.Stat(workDir); err == nil {
		left = append(left, workDir)
	}
	return left
}

type apiClient struct{ base, key string }

func (c *apiClient) do(ctx context.Context, method, path string, body any, accept string) (*http.Response, error) {
	data, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(data))
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	return resp, nil
}

func (c *apiClient) create(ctx context.Context, req api.CreateSandboxRequest) (api.Sandbox, error) {
	var sb api.Sandbox
	resp, err := c.do(ctx, "POST", "/v1/sandboxes", req, "application/json")
	if err != nil {
		return sb, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&sb)
	return sb, err
}

// delete removes a sandbox, also after ctx was cancelled.
func (c *apiClient) delete(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if r, err := c.do(ctx, "DELETE", "/v1/sandboxes/"+id, nil, "application/json"); err == nil {
		r.Body.Close()
	}
}

func (c *apiClient) exec(ctx context.Context, id string, req agentapi.ExecRequest) (agentapi.ExecResult, error) {
	var res agentapi.ExecResult
	resp, err := c.do(ctx, "POST", "/v1/sandboxes/"+id+"/exec", req, "application/json")
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&res)
	return res, err
}

// createToFirstOutput times POST /v1/sandboxes to its answer (ready) and on
// to the first event of a streamed exec of argv (first output, or its exit
// for a command that prints nothing). The sandbox is deleted afterwards,
// outside the timing.
func (c *apiClient) createToFirstOutput(ctx context.Context, req api.CreateSandboxRequest, argv []string) (ready, first time.Duration, err error) {
	start := time.Now()
	sb, err := c.create(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	ready = time.Since(start)
	defer c.delete(sb.ID)
	resp, err := c.do(ctx, "POST", "/v1/sandboxes/"+sb.ID+"/exec", agentapi.ExecRequest{Argv: argv}, agentapi.ContentTypeNDJSON)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev agentapi.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return 0, 0, err
		}
		if ev.Type == "stdout" || ev.Type == "stderr" || ev.Type == "exit" {
			first = time.Since(start)
			_, _ = io.Copy(io.Discard, resp.Body)
			return ready, first, nil
		}
	}
	return 0, 0, fmt.Errorf("exec stream ended early: %v", sc.Err())
}
