// Command startup measures create-to-first-output through Runtime's API and,
// in the same run, the same command in a bare `runsc run` of an equal bundle
// (same template, same overlay and network flags, no agent, no server). It
// prints medians and ratios and writes the samples as JSON.
//
// Run it with bench/run.sh (as root, after scripts/install.sh).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/server"
)

type row struct {
	Name      string    `json:"name"`
	SamplesMs []float64 `json:"samplesMs"`
	MedianMs  float64   `json:"medianMs"`
	P90Ms     float64   `json:"p90Ms"`
}

func main() {
	runs := flag.Int("runs", 20, "samples per row")
	out := flag.String("out", "bench/results/startup.json", "where to write the JSON results")
	templates := flag.String("templates", "/var/lib/withruntime/templates", "templates directory (base must be built)")
	flag.Parse()
	if err := run(*runs, *out, *templates); err != nil {
		fmt.Fprintln(os.Stderr, "startup:", err)
		os.Exit(1)
	}
}

func run(runs int, out, templates string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("/tmp", "wr-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := server.Open(ctx, server.Config{DataDir: dir, TemplatesDir: templates,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer srv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go srv.Serve(sctx, l)
	c := &apiClient{base: "http://" + l.Addr().String(), key: srv.LocalKey}

	runsc, err := exec.LookPath("runsc")
	if err != nil {
		return fmt.Errorf("runsc: %w", err)
	}
	rootfs, err := srv.Templates.RootFS("base")
	if err != nil {
		return err
	}
	cases := []struct {
		name string
		argv []string
	}{
		{"true", []string{"true"}},
		{"python3 -c 'print(6*7)'", []string{"python3", "-c", "print(6*7)"}},
	}
	var rows []row
	for _, cs := range cases {
		api := row{Name: "runtime API: " + cs.name}
		bare := row{Name: "bare runsc run: " + cs.name}
		// Warm both paths once so page cache and binaries are loaded.
		if _, err := c.createToFirstOutput(cs.argv); err != nil {
			return err
		}
		if _, err := bareRun(runsc, rootfs, dir, cs.argv); err != nil {
			return err
		}
		for i := 0; i < runs; i++ { // interleave so drift hits both alike
			d, err := c.createToFirstOutput(cs.argv)
			if err != nil {
				return err
			}
			api.SamplesMs = append(api.SamplesMs, ms(d))
			d, err = bareRun(runsc, rootfs, dir, cs.argv)
			if err != nil {
				return err
			}
			bare.SamplesMs = append(bare.SamplesMs, ms(d))
		}
		rows = append(rows, summarize(api), summarize(bare))
	}
	print(rows)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(map[string]any{"at": time.Now().UTC(), "runs": runs, "rows": rows}, "", "  ")
	return os.WriteFile(out, data, 0o644)
}

func print(rows []row) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tmedian ms\tp90 ms\tratio to bare runsc\t")
	for i := 0; i+1 < len(rows); i += 2 {
		a, b := rows[i], rows[i+1]
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.2fx\t\n", a.Name, a.MedianMs, a.P90Ms, a.MedianMs/b.MedianMs)
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%s\t\n", b.Name, b.MedianMs, b.P90Ms, "1.00x (baseline)")
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
	r.P90Ms = s[(len(s)*9)/10-boolInt(len(s)*9%10 == 0)]
	return r
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type apiClient struct{ base, key string }

func (c *apiClient) do(method, path string, body any, accept string) (*http.Response, error) {
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, c.base+path, bytes.NewReader(data))
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

// createToFirstOutput times POST /v1/sandboxes, then a streamed exec, up to
// its first output event (or its exit event for a command that prints
// nothing). The sandbox is deleted afterwards, outside the timing.
func (c *apiClient) createToFirstOutput(argv []string) (time.Duration, error) {
	start := time.Now()
	resp, err := c.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{}, "application/json")
	if err != nil {
		return 0, err
	}
	var sb api.Sandbox
	err = json.NewDecoder(resp.Body).Decode(&sb)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	defer func() {
		if r, err := c.do("DELETE", "/v1/sandboxes/"+sb.ID, nil, "application/json"); err == nil {
			r.Body.Close()
		}
	}()
	resp, err = c.do("POST", "/v1/sandboxes/"+sb.ID+"/exec", agentapi.ExecRequest{Argv: argv}, agentapi.ContentTypeNDJSON)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev agentapi.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return 0, err
		}
		if ev.Type == "stdout" || ev.Type == "stderr" || ev.Type == "exit" {
			d := time.Since(start)
			io.Copy(io.Discard, resp.Body)
			return d, nil
		}
	}
	return 0, fmt.Errorf("exec stream ended early: %v", sc.Err())
}

// bareRun times `runsc run` of a bundle equal to a Runtime sandbox's (same
// template root, overlay, network and limits) whose process is argv itself,
// from start to its first byte of output (or exit).
func bareRun(runsc, rootfs, dir string, argv []string) (time.Duration, error) {
	id := fmt.Sprintf("bare-%d", time.Now().UnixNano())
	bundle := filepath.Join(dir, id)
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		return 0, err
	}
	defer os.RemoveAll(bundle)
	mem, quota, period, pids := int64(576<<20), int64(100000), uint64(100000), int64(1024)
	spec := specs.Spec{
		Version: specs.Version, Hostname: "sandbox",
		Root: &specs.Root{Path: rootfs},
		Process: &specs.Process{User: specs.User{UID: 1000, GID: 1000}, Args: argv, Cwd: "/workspace",
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONUNBUFFERED=1"}},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"size=268435456", "mode=1777"}},
		},
		Linux: &specs.Linux{
			CgroupsPath: "/withruntime-bench/" + id,
			Resources: &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: &mem},
				CPU: &specs.LinuxCPU{Quota: &quota, Period: &period}, Pids: &specs.LinuxPids{Limit: pids}},
			Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace}, {Type: specs.MountNamespace}, {Type: specs.NetworkNamespace}},
		},
	}
	data, _ := json.Marshal(spec)
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o600); err != nil {
		return 0, err
	}
	root := filepath.Join(dir, "bare-runsc")
	cmd := exec.Command(runsc, "--root", root, "--network=none", "--overlay2=root:memory,size=2147483648",
		"run", "--bundle", bundle, id)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	buf := make([]byte, 1)
	_, _ = stdout.Read(buf)
	d := time.Since(start)
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("bare runsc run: %w: %s", err, stderr.String())
	}
	return d, nil
}
