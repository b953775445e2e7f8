// Package gvisor is the default driver: each sandbox is a gVisor (runsc)
// container whose PID 1 is the Runtime agent, reached over a unix socket in a
// directory bind-mounted from the host (runsc --host-uds=create).
package gvisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/volume"
)

var _ driver.Driver = (*Driver)(nil)
var _ driver.StatsReader = (*Driver)(nil)

// Config configures the gVisor driver.
type Config struct {
	// Runsc is the runsc binary (built from the pinned gVisor version).
	Runsc string
	// AgentBinary is the static withruntime-agent binary on the host.
	AgentBinary string
	// StateDir holds runsc's state, the agent copy and one directory per
	// sandbox (bundle and agent socket). Must be on a local filesystem.
	StateDir string
	// ReadyTimeout bounds how long Create waits for the agent to answer.
	ReadyTimeout time.Duration
	// ExtraFlags are added to every `runsc run` (e.g. --platform=kvm where
	// KVM is real, or --strace --debug --debug-log=DIR to see a sandbox's
	// system calls).
	ExtraFlags []string
	// DiskMedium backs the copy-on-write layer over each sandbox's root
	// filesystem: DiskFile (the default) or DiskMemory.
	DiskMedium string
}

// Disk media for Config.DiskMedium.
const (
	// DiskFile backs a sandbox's writes with a file in its directory on the
	// host (unlinked, freed when the sandbox ends). The kernel can write
	// its pages back to disk, so a sandbox may write more than its memory
	// size; the size cap still holds.
	DiskFile = "file"
	// DiskMemory keeps a sandbox's writes in its memory: slightly faster,
	// but writes count against the memory limit, and a sandbox that writes
	// more than its memory size is killed whole by the host.
	DiskMemory = "memory"
)

// Driver runs sandboxes with runsc.
type Driver struct {
	cfg      Config
	agentDir string
	// hostCPUs are the cores this server may use; one-vCPU sandboxes get
	// one of the boot cores (bootCPUs: BootCPUs) each in turn (nextCPU),
	// see cpusetFor.
	hostCPUs []int
	nextCPU  atomic.Uint64
	bootCPUs atomic.Uint64
	// isoProcs maps a sandbox id to its *isoProcs (stats.go).
	isoProcs sync.Map
	// vols are the volumes under StateDir/volumes (volume.go).
	vols *volume.Host
	// snapshotting holds the ids of the snapshots being written
	// (snapshot.go: ListSnapshots leaves their directories alone).
	snapshotting sync.Map
	// version is runsc's version, asked once (runscVersion).
	versionOnce sync.Once
	version     string
}

// state is what the manager persists for Recover.
type state struct {
	Dir    string `json:"dir"`
	Socket string `json:"socket"`
	// Flags are the runsc flags the sandbox was booted with; a restore from
	// its checkpoint must use the same (pause.go). Absent in the state of
	// sandboxes made before pauses existed: those cannot be paused.
	Flags []string `json:"flags,omitempty"`
	// Volumes are the ids of the volumes the sandbox mounts, which a
	// resume mounts on the host again first.
	Volumes []string `json:"volumes,omitempty"`
}

// New checks the configuration and installs the agent where sandboxes mount
// it from. It fails when runsc or the agent binary is missing.
func New(cfg Config) (*Driver, error) {
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	switch cfg.DiskMedium {
	case "":
		cfg.DiskMedium = DiskFile
	case DiskFile, DiskMemory:
	default:
		return nil, fmt.Errorf("gvisor driver: disk medium %q: want %q or %q", cfg.DiskMedium, DiskFile, DiskMemory)
	}
	if _, err := os.Stat(cfg.Runsc); err != nil {
		return nil, fmt.Errorf("gvisor driver: runsc not found at %q (build it with scripts/install.sh): %w", cfg.Runsc, err)
	}
	if err := prepareCgroups(); err != nil {
		return nil, err
	}
	d := &Driver{cfg: cfg, agentDir: filepath.Join(cfg.StateDir, "agent"), hostCPUs: allowedCPUs()}
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "sandboxes"), 0o700); err != nil {
		return nil, fmt.Errorf("gvisor driver: %w", err)
	}
	if err := installAgent(cfg.AgentBinary, d.agentDir); err != nil {
		return nil, fmt.Errorf("gvisor driver: %w", err)
	}
	vols, err := volume.New(d.volumesDir(), volumeUID, volumeGID)
	if err != nil {
		return nil, fmt.Errorf("gvisor driver: %w", err)
	}
	d.vols = vols
	return d, nil
}

// Name implements driver.Driver.
func (d *Driver) Name() string { return "gvisor" }

func (d *Driver) sandboxDir(id string) string {
	return filepath.Join(d.cfg.StateDir, "sandboxes", id)
}

// runsc runs one runsc command with the driver's global flags.
func (d *Driver) runsc(ctx context.Context, extra []string, args ...string) ([]byte, error) {
	argv := append([]string{"--root", filepath.Join(d.cfg.StateDir, "runsc")}, extra...)
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, d.cfg.Runsc, argv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("runsc %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Create implements driver.Driver.
func (d *Driver) Create(ctx context.Context, spec driver.Spec) (*driver.Handle, error) {
	return d.boot(ctx, spec, nil)
}

// boot makes sandbox spec.ID's directory, bundle and socket directory and
// starts it: with `runsc run`, or from snapshot snap with `runsc restore`
// (snapshot.go). On error nothing of the sandbox is left.
func (d *Driver) boot(ctx context.Context, spec driver.Spec, snap *snapshotMeta) (h *driver.Handle, err error) {
	verb := "create"
	if snap != nil {
		verb = "restore"
	}
	dir := d.sandboxDir(spec.ID)
	bundle := filepath.Join(dir, "bundle")
	sockDir := filepath.Join(dir, "sock")
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		return nil, fmt.Errorf("gvisor %s: %w", verb, err)
	}
	defer func() {
		if err != nil {
			_ = d.Destroy(context.WithoutCancel(ctx), spec.ID)
		}
	}()
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("gvisor %s: %w", verb, err)
	}
	if err := mountSocketDir(sockDir, socketDirMode); err != nil {
		return nil, fmt.Errorf("gvisor %s: %w", verb, err)
	}
	agentSrc, hostNet := filepath.Join(d.agentDir, agentName), spec.Network
	if snap != nil {
		// The agent that runs in the image, whatever the server has now.
		agentSrc = filepath.Join(d.snapshotDir(snap.ID), agentName)
		if hostNet, err = d.restoreNetwork(snap.ID, spec.Network); err != nil {
			return nil, fmt.Errorf("gvisor %s: %w", verb, err)
		}
	}
	if _, err := d.makeHostDir(dir, agentSrc, hostNet); err != nil {
		return nil, fmt.Errorf("gvisor %s: %w", verb, err)
	}
	if err := mountHostDir(dir, sockDir); err != nil {
		return nil, fmt.Errorf("gvisor %s: %w", verb, err)
	}
	if snap != nil && len(spec.Volumes) > 0 {
		// A restore keeps the snapshot's mounts (runsc checks them).
		return nil, fmt.Errorf("gvisor %s: a sandbox from a snapshot cannot mount volumes", verb)
	}
	if err := checkVolumePaths(spec.RootFS, spec.Volumes); err != nil {
		return nil, fmt.Errorf("gvisor %s: %w", verb, err)
	}
	volDirs, err := d.mountVolumes(ctx, volumeIDs(spec.Volumes))
	if err != nil {
		return nil, fmt.Errorf("gvisor %s: %w", verb, err)
	}
	oci := ociSpec(spec, sockDir)
	oci.Linux.Resources.CPU.Cpus = d.cpusetFor(spec.CPU)
	addNetwork(oci, spec.Network)
	addVolumes(oci, spec.Volumes, volDirs)
	if snap != nil {
		if err := restoreSpec(oci, snap, sockDir); err != nil {
			return nil, fmt.Errorf("gvisor %s: %w", verb, err)
		}
	}
	var filesFlag []string
	if spec.RootFiles != "" && snap == nil {
		f, err := d.bootFiles(spec.RootFiles, dir, oci)
		if err != nil {
			return nil, fmt.Errorf("gvisor %s: %w", verb, err)
		}
		filesFlag = []string{f}
	}
	cfg, err := json.Marshal(oci)
	if err != nil {
		return nil, fmt.Errorf("gvisor %s: %w", verb, err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), cfg, 0o600); err != nil {
		return nil, fmt.Errorf("gvisor %s: %w", verb, err)
	}
	var flags, args []string
	pidFile := filepath.Join(dir, pidFileName)
	if snap == nil {
		flags = append([]string{
			networkFlag(spec.Network),
			"--host-uds=create",
			"--cpu-num-from-quota", // the CPU count inside follows the grant: cpu.go
			// sudo (and other setuid programs) work inside: root inside the
			// sandbox is already allowed, and is gVisor's root, not the host's.
			"--allow-suid",
			d.overlayFlag(dir, spec.DiskBytes),
		}, d.cfg.ExtraFlags...)
		flags = append(flags, filesFlag...)
		args = []string{"run", "--detach", "--pid-file", pidFile, "--bundle", bundle, spec.ID}
	} else {
		if flags, err = restoreFlags(snap, dir); err != nil {
			return nil, fmt.Errorf("gvisor %s: %w", verb, err)
		}
		args = []string{"restore", "--detach", "--background", "--pid-file", pidFile,
			"--bundle", bundle, "--image-path", d.snapshotDir(snap.ID), spec.ID}
	}
	// runsc run is never killed half-way: a runsc killed between creating
	// the sandbox and recording it leaves a sandbox process that no runsc
	// command knows, which Destroy cannot find (seen when a server shut
	// down during a warm-pool boot). A cancelled ctx ends the create right
	// after, through the readiness wait and the deferred Destroy.
	timeout := runTimeout
	if snap != nil {
		timeout = checkpointTimeout
	}
	startCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := d.start(startCtx, dir, flags, args...); err != nil {
		return nil, fmt.Errorf("gvisor %s: %w", verb, err)
	}
	agent := newAgentDialer(spec.ID, sockDir)
	if err := waitReady(ctx, agent, d.cfg.ReadyTimeout); err != nil {
		return nil, fmt.Errorf("gvisor %s: agent did not start: %w", verb, err)
	}
	if err := d.widenCPUSet(spec.ID); err != nil {
		return nil, fmt.Errorf("gvisor %s: %w", verb, err)
	}
	st, _ := json.Marshal(state{Dir: dir, Socket: filepath.Join(sockDir, socketName), Flags: flags,
		Volumes: volumeIDs(spec.Volumes)})
	return &driver.Handle{ID: spec.ID, State: st, Dial: agent.dial}, nil
}

// overlayFlag is the --overlay2 flag of the sandbox in dir with a disk of
// size bytes.
func (d *Driver) overlayFlag(dir string, size int64) string {
	medium := "memory"
	if d.cfg.DiskMedium == DiskFile {
		// The filestore is created (and unlinked at once) in the sandbox
		// directory, so Destroy's RemoveAll catches anything left.
		medium = "dir=" + dir
	}
	return overlayPrefix + medium + ",size=" + itoa(size)
}

// overlayPrefix starts the flag that gives a sandbox its writable root.
const overlayPrefix = "--overlay2=root:"

// runTimeout bounds `runsc run --detach`, which takes well under a second.
const runTimeout = 2 * time.Minute

// start runs `runsc run --detach` (or `restore --detach`: args) and
// makes its stubs, not its kernel, what the host OOM killer takes
// (preferStubsForOOM). The
// sandbox it leaves running inherits runsc's stdout and stderr, so they go
// to a file (console.log in the sandbox directory), never to a pipe that
// would stay open for the sandbox's whole life.
func (d *Driver) start(ctx context.Context, dir string, flags []string, args ...string) error {
	logPath := filepath.Join(dir, "console.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	argv := append([]string{"--root", filepath.Join(d.cfg.StateDir, "runsc")}, flags...)
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, d.cfg.Runsc, argv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(logPath)
		return fmt.Errorf("runsc %s: %w: %s", args[0], err, tail(string(out), 2000))
	}
	return preferStubsForOOM(filepath.Base(dir))
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// Recover implements driver.Driver.
func (d *Driver) Recover(ctx context.Context, id string, raw []byte) (*driver.Handle, error) {
	var st state
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("gvisor recover %s: bad state: %w", id, err)
	}
	out, err := d.runsc(ctx, nil, "state", id)
	if err != nil {
		if !isNotExist(err) {
			return nil, fmt.Errorf("gvisor recover %s: %w", id, err)
		}
		return nil, fmt.Errorf("gvisor recover %s: %w", id, driver.ErrNotFound)
	}
	var cs struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &cs); err != nil || cs.Status != "running" {
		return nil, fmt.Errorf("gvisor recover %s: container is %q: %w", id, cs.Status, driver.ErrNotFound)
	}
	// The socket's place comes from the sandbox id, not from the stored
	// state, and is dialed with the same checks as at create.
	agent := newAgentDialer(id, filepath.Join(d.sandboxDir(id), "sock"))
	if err := d.pingAfterPause(ctx, id, agent); err != nil {
		return nil, fmt.Errorf("gvisor recover %s: agent does not answer (%v): %w", id, err, driver.ErrNotFound)
	}
	// The sandbox runs: an image left by a pause or a resume that a dead
	// server did not finish is not its state.
	if err := os.RemoveAll(filepath.Join(d.sandboxDir(id), imagesDir)); err != nil {
		return nil, fmt.Errorf("gvisor recover %s: %w", id, err)
	}
	return &driver.Handle{ID: id, State: raw, Dial: agent.dial}, nil
}

// Destroy implements driver.Driver. It kills the sandbox, deletes the runsc
// container (which removes its cgroups) and the sandbox directory.
func (d *Driver) Destroy(ctx context.Context, id string) error {
	if strings.ContainsAny(id, "/.") || id == "" {
		return fmt.Errorf("gvisor destroy: invalid id %q", id)
	}
	// delete --force kills the sandbox process (SIGKILL) and its gofer
	// itself: a `runsc kill` first would cost one more runsc start (a
	// 100 MB Go binary, ~10 ms of CPU) and an orderly shutdown inside.
	_, delErr := d.runsc(ctx, nil, "delete", "--force", id)
	d.isoProcs.Delete(id)
	if delErr != nil && d.containerExists(ctx, id) {
		return fmt.Errorf("gvisor destroy %s: %w", id, delErr)
	}
	if err := removeCgroups(id); err != nil {
		return fmt.Errorf("gvisor destroy %s: %w", id, err)
	}
	if err := unmountSocketDir(filepath.Join(d.sandboxDir(id), "sock")); err != nil {
		return fmt.Errorf("gvisor destroy %s: %w", id, err)
	}
	if err := os.RemoveAll(d.sandboxDir(id)); err != nil {
		return fmt.Errorf("gvisor destroy %s: %w", id, err)
	}
	return nil
}

func (d *Driver) containerExists(ctx context.Context, id string) bool {
	_, err := d.runsc(ctx, nil, "state", id)
	return err == nil || !isNotExist(err)
}

// isNotExist reports whether a runsc command failed because the container
// does not exist (as opposed to failing to answer).
func isNotExist(err error) bool {
	return err != nil && strings.Contains(err.Error(), "does not exist")
}

// List implements driver.Driver: every container runsc knows plus every
// sandbox directory, so half-created sandboxes are found too. It first
// waits for runsc commands that a process which died mid-create left on
// this state directory (see settle), so that what it returns stays true.
func (d *Driver) List(ctx context.Context) ([]string, error) {
	if err := d.settle(ctx); err != nil {
		return nil, fmt.Errorf("gvisor list: %w", err)
	}
	seen := map[string]bool{}
	out, err := d.runsc(ctx, nil, "list", "--quiet")
	if err == nil {
		for _, id := range strings.Fields(string(out)) {
			seen[id] = true
		}
	}
	entries, err := os.ReadDir(filepath.Join(d.cfg.StateDir, "sandboxes"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("gvisor list: %w", err)
	}
	for _, e := range entries {
		seen[e.Name()] = true
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	return ids, nil
}

// Stats implements driver.StatsReader from runsc's own accounting.
func (d *Driver) Stats(ctx context.Context, id string) (driver.Stats, error) {
	if st, ok := d.cgroupStats(id); ok {
		return st, nil
	}
	out, err := d.runsc(ctx, nil, "events", "--stats", id)
	if err != nil {
		return driver.Stats{}, fmt.Errorf("gvisor stats %s: %w", id, err)
	}
	var ev struct {
		Data struct {
			CPU struct {
				Usage struct {
					Total uint64 `json:"total"` // nanoseconds
				} `json:"usage"`
			} `json:"cpu"`
			Memory struct {
				Usage struct {
					Usage uint64 `json:"usage"` // bytes
				} `json:"usage"`
			} `json:"memory"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out, &ev); err != nil {
		return driver.Stats{}, fmt.Errorf("gvisor stats %s: %w", id, err)
	}
	return driver.Stats{
		CPUSeconds:  float64(ev.Data.CPU.Usage.Total) / 1e9,
		MemoryBytes: int64(ev.Data.Memory.Usage.Usage),
		At:          time.Now(),
	}, nil
}

// waitReady polls the agent's socket until /health answers. The agent is up
// within a few hundred milliseconds of runsc returning. Until its socket
// exists the wait sleeps on an inotify watch of the socket directory (woken
// when the socket appears, and every socketRecheck anyway): polling a
// missing socket every millisecond cost each create tens of milliseconds of
// CPU when many boot at once. Once the socket exists it is polled every
// millisecond until the agent answers.
func waitReady(ctx context.Context, agent *agentDialer, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w := watchDir(agent.sockDir)
	defer w.close()
	var last error
	for {
		if last = ping(ctx, agent); last == nil {
			return nil
		}
		if errors.Is(last, driver.ErrChannel) && !errors.Is(last, os.ErrNotExist) {
			// Nothing inside runs user code yet, but never wait on a
			// channel that is not the sandbox's own.
			return last
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w (last error: %v)", err, last)
		}
		if errors.Is(last, os.ErrNotExist) && w.wait(ctx, socketRecheck) {
			continue
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
		case <-time.After(time.Millisecond):
		}
	}
}

func ping(ctx context.Context, agent *agentDialer) error {
	client := http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return agent.dial(ctx)
		},
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/health", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("agent health: %s", resp.Status)
	}
	return nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
