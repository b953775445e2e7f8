// Command volume measures file throughput on a volume against the
// sandbox's own disk, in one sandbox that has both: sequential write
// (1 MiB writes, then fsync) and sequential read of a file of -mib MiB,
// and creating then removing -files small files, timed inside the sandbox
// by Python. The two places are measured alternately, -runs times each,
// after one unrecorded warm-up of each. It prints medians and the ratio
// volume ÷ own disk (for throughput: above 1 is faster; for the small
// files' time: below 1 is faster) and writes the samples as JSON to
// bench/results/volume.json.
//
// A volume is a loop-mounted ext4 image served through the sandbox's gofer
// (a bind mount, gVisor's "shared" file access: reads and writes go to the
// host file); the sandbox's own disk is gVisor's overlay with a
// file-backed upper layer (the sentry's memory file). Reads of the own
// disk come from the sentry's cache; reads of a volume from the host's
// page cache through the gofer.
//
// Run it as root after scripts/install.sh: go run ./bench/volume.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"withruntime.dev/runtime/bench/internal/benchenv"
	"withruntime.dev/runtime/bench/internal/stats"
	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/server"
)

// probe prints, for directory argv[1], MB/s written (1 MiB writes of
// argv[2] MiB, fsync included), MB/s read back, and the seconds to create
// and remove argv[3] empty files.
const probe = `
import os, sys, time
d, mib, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
p = os.path.join(d, "probe.bin")
buf = os.urandom(1 << 20)
t = time.monotonic()
with open(p, "wb") as f:
    for _ in range(mib):
        f.write(buf)
    f.flush(); os.fsync(f.fileno())
w = mib * 1.048576 / (time.monotonic() - t)
t = time.monotonic()
with open(p, "rb") as f:
    while f.read(1 << 20):
        pass
r = mib * 1.048576 / (time.monotonic() - t)
os.unlink(p)
t = time.monotonic()
for i in range(n):
    open(os.path.join(d, "s%d" % i), "w").close()
for i in range(n):
    os.unlink(os.path.join(d, "s%d" % i))
s = time.monotonic() - t
print(w, r, s)
`

type sample struct {
	Place     string  `json:"place"`
	WriteMBps float64 `json:"writeMBps"`
	ReadMBps  float64 `json:"readMBps"`
	SmallSec  float64 `json:"smallFilesSec"`
}

func main() {
	runs := flag.Int("runs", 10, "measurements of each place")
	mib := flag.Int("mib", 256, "the size of the file written and read, in MiB")
	files := flag.Int("files", 1000, "small files created and removed")
	out := flag.String("out", "bench/results/volume.json", "where to write the samples")
	flag.Parse()
	if err := run(*runs, *mib, *files, *out); err != nil {
		fmt.Fprintln(os.Stderr, "bench/volume:", err)
		os.Exit(1)
	}
}

func run(runs, mib, files int, out string) error {
	ctx := context.Background()
	runsc, err := benchenv.FindRunsc()
	if err != nil {
		return err
	}
	bin, err := os.MkdirTemp("", "bench-volume-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	agent, err := benchenv.BuildAgent(ctx, bin)
	if err != nil {
		return err
	}
	data, err := os.MkdirTemp("/tmp", "bench-volume-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(data)
	templates := os.Getenv("WITHRUNTIME_TEMPLATES_DIR")
	if templates == "" {
		templates = "/var/lib/withruntime/templates"
	}
	cfg := server.Config{DataDir: data, TemplatesDir: templates, Runsc: runsc, Agent: agent,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	server.EgressNames(&cfg.Egress, data)
	s, err := benchenv.Serve(ctx, cfg, &http.Client{}, nil)
	if err != nil {
		return err
	}
	defer s.Stop()
	c := s.C
	if err := c.GetJSON(ctx, "POST", "/v1/volumes", api.CreateVolumeRequest{Name: "bench", SizeMiB: int64(2*mib + 64)}, nil); err != nil {
		return fmt.Errorf("create volume: %w", err)
	}
	id, err := c.Create(ctx, api.CreateSandboxRequest{TimeoutSeconds: 3600, MemoryMiB: 1024, DiskMiB: int64(2*mib + 256),
		Volumes: []api.VolumeMount{{Name: "bench", Path: "/data"}}})
	if err != nil {
		return err
	}
	defer c.Del(context.WithoutCancel(ctx), id)
	defer c.GetJSON(context.WithoutCancel(ctx), "DELETE", "/v1/volumes/bench", nil, nil) //nolint:errcheck // after the sandbox
	places := []struct{ name, dir string }{{"volume", "/data"}, {"own disk", "/workspace"}}
	var samples []sample
	for i := -1; i < runs; i++ {
		for j := range places {
			p := places[(i+j+2)%2] // alternate which goes first
			var res agentapi.ExecResult
			err := c.GetJSON(ctx, "POST", "/v1/sandboxes/"+id+"/exec", agentapi.ExecRequest{
				Argv: []string{"python3", "-c", probe, p.dir, strconv.Itoa(mib), strconv.Itoa(files)}, TimeoutSeconds: 600}, &res)
			if err != nil || res.ExitCode != 0 {
				return fmt.Errorf("probe of %s: %v %+v", p.name, err, res)
			}
			f := strings.Fields(res.Stdout)
			if len(f) != 3 {
				return fmt.Errorf("probe of %s printed %q", p.name, res.Stdout)
			}
			w, _ := strconv.ParseFloat(f[0], 64)
			r, _ := strconv.ParseFloat(f[1], 64)
			sm, _ := strconv.ParseFloat(f[2], 64)
			if i >= 0 {
				samples = append(samples, sample{Place: p.name, WriteMBps: w, ReadMBps: r, SmallSec: sm})
			}
		}
	}
	med := func(place string, f func(sample) float64) float64 {
		var v []float64
		for _, s := range samples {
			if s.Place == place {
				v = append(v, f(s))
			}
		}
		m, _, _ := stats.Summarize(v)
		return *m
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "measure (%d runs, %d MiB, %d files)\tvolume\town disk\tvolume ÷ own disk\t\n", runs, mib, files)
	for _, m := range []struct {
		name string
		f    func(sample) float64
	}{
		{"write MB/s (fsync)", func(s sample) float64 { return s.WriteMBps }},
		{"read MB/s", func(s sample) float64 { return s.ReadMBps }},
		{"create+remove files, s", func(s sample) float64 { return s.SmallSec }},
	} {
		v, o := med("volume", m.f), med("own disk", m.f)
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.2f\t\n", m.name, v, o, v/o)
	}
	tw.Flush()
	fmt.Printf("host: %s, runsc %s\n", benchenv.KernelRelease(), benchenv.RunscVersion(runsc))
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(map[string]any{"at": time.Now().UTC(), "runs": runs, "mib": mib, "files": files, "samples": samples}, "", "  ")
	return os.WriteFile(out, b, 0o644)
}
