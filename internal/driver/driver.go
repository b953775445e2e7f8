// Package driver is the narrow interface between the sandbox manager and an
// isolation technology (gVisor today, a microVM later).
//
// A driver boots a sandbox whose PID 1 is the Runtime agent and gives the
// manager a way to dial that agent; everything that happens inside the
// sandbox (exec, files) goes through the agent, so a driver knows nothing
// about commands or files. Optional features are separate interfaces found by
// type assertion (see StatsReader).
package driver

import (
	"context"
	"errors"
	"math"
	"net"
	"time"
)

// ErrNotFound says the driver has no sandbox of that id (already gone).
var ErrNotFound = errors.New("sandbox not found in driver")

// ErrChannel says a Dial refused to connect: what answers at the sandbox's
// agent address is not that sandbox's own agent (root inside the sandbox
// replaced it, e.g. with a link to another sandbox's socket). Nothing was
// sent; the server logs it as tampering.
var ErrChannel = errors.New("agent channel refused")

// Spec is everything a driver needs to boot one sandbox.
type Spec struct {
	// ID is the sandbox id, unique on the host ([a-z0-9_-]).
	ID string
	// RootFS is the template's root filesystem directory. The driver must
	// never write to it: the sandbox gets a copy-on-write layer over it.
	RootFS string
	// CPU is the number of vCPUs (may be fractional, e.g. 0.5).
	CPU float64
	// MemoryBytes is the sandbox's memory size, enforced on the whole sandbox.
	MemoryBytes int64
	// DiskBytes caps what the sandbox may write to its root filesystem.
	DiskBytes int64
	// TmpBytes caps the /tmp tmpfs.
	TmpBytes int64
	// PidsLimit caps the number of processes and threads.
	PidsLimit int64
	// Env is the sandbox environment ("KEY=value") that every command inherits.
	Env []string
	// LeaseEndsAt, when set, is when the sandbox should end: the agent
	// ends it itself shortly after (a backstop for when no server runs).
	LeaseEndsAt time.Time
	// Network, when set, boots the sandbox in an existing network namespace
	// (made by the egress manager); without it the sandbox has no network.
	Network *Network
}

// Network is the network a sandbox boots in.
type Network struct {
	// NetnsPath is the network namespace (a bind-mounted namespace file).
	NetnsPath string
	// ResolvConf is the content of the sandbox's /etc/resolv.conf.
	ResolvConf string
	// CABundle, when set, replaces the sandbox's system CA bundle
	// (/etc/ssl/certs/ca-certificates.crt).
	CABundle []byte
}

// Handle is a running sandbox as the driver knows it.
type Handle struct {
	ID string
	// State is the driver's own record of the sandbox (JSON), persisted by the
	// manager so that Recover can re-attach after a server restart.
	State []byte
	// Dial connects to the agent inside the sandbox, and only to it: a
	// driver verifies the other end and returns ErrChannel (wrapped) when
	// it is anything else.
	Dial func(ctx context.Context) (net.Conn, error)
}

// Driver boots and destroys sandboxes.
type Driver interface {
	// Name is the driver's name in configuration and records ("gvisor").
	Name() string
	// Create boots a sandbox and returns once its agent answers. On error
	// nothing of the sandbox is left behind.
	Create(ctx context.Context, spec Spec) (*Handle, error)
	// Recover re-attaches to a sandbox from its persisted State. It returns
	// ErrNotFound (wrapped) when the sandbox no longer runs.
	Recover(ctx context.Context, id string, state []byte) (*Handle, error)
	// Destroy stops a sandbox and removes everything it left on the host
	// (process, mounts, cgroups, directories). Destroying a sandbox that is
	// already gone is not an error.
	Destroy(ctx context.Context, id string) error
	// List returns the ids of every sandbox the driver has on the host,
	// including ones no record knows about (orphans to clean up).
	List(ctx context.Context) ([]string, error)
}

// Stats is one sample of a sandbox's resource use, as the host measures it
// (never as the sandbox reports it: everything inside is untrusted).
type Stats struct {
	// CPUSeconds is the total host CPU time the sandbox has used since it
	// started, in seconds: its processes and its isolation layer together.
	CPUSeconds float64
	// IsolationCPUSeconds is the part of CPUSeconds that the isolation layer
	// itself spent (for gVisor: its kernel and file proxy processes), in
	// seconds since the sandbox started; CPUSeconds minus it is what the
	// sandbox's own processes used. Meaningful only when IsolationKnown.
	IsolationCPUSeconds float64
	// IsolationKnown says whether the driver could measure
	// IsolationCPUSeconds for this sample; when it could not, all of
	// CPUSeconds counts as the sandbox's processes'.
	IsolationKnown bool
	// MemoryBytes is the memory in use now.
	MemoryBytes int64
	// At is when the sample was taken.
	At time.Time
}

// VisibleCPUs is the number of CPUs that a sandbox of cpu vCPUs shows to
// the programs inside (nproc, os.cpu_count(), /proc/cpuinfo): cpu rounded
// up, at least 1, so that a one-vCPU sandbox on a 64-core host does not tell
// build tools to start 64 jobs. Drivers fix it at boot.
func VisibleCPUs(cpu float64) int {
	return max(1, int(math.Ceil(cpu)))
}

// CPUSetter is implemented by drivers that can change a running sandbox's
// CPU limit (vCPUs, may be fractional), which lets the warm pool serve a
// create that asks for another CPU count.
//
// SetCPU changes the CPU time a sandbox may use, not the CPU count it sees
// (VisibleCPUs of its boot-time grant).
type CPUSetter interface {
	SetCPU(ctx context.Context, id string, cpu float64) error
}

// StatsReader is implemented by drivers that can sample resource use.
type StatsReader interface {
	Stats(ctx context.Context, id string) (Stats, error)
}

// Exit says how a sandbox ended on its own, without a Destroy: its
// processes were killed by the host (out of memory) or crashed.
type Exit struct {
	// OutOfMemory says the host killed the sandbox for going over its memory
	// limit (the whole sandbox dies: there is no OOM killer inside gVisor).
	OutOfMemory bool
	// Detail is a short description for logs (may be empty).
	Detail string
}

// Watcher is implemented by drivers that can tell when a sandbox ends on its
// own, so that the manager stops it at once instead of waiting for its lease.
type Watcher interface {
	// Wait blocks until the sandbox has ended, then says how. It returns
	// ctx.Err() when ctx ends first. A sandbox that is already gone has
	// ended. Wait must be cheap: the manager runs one per sandbox.
	Wait(ctx context.Context, id string) (Exit, error)
}

// Closer is implemented by drivers that hold host resources beyond their
// sandboxes (mounts, files). Close releases them; running sandboxes are not
// affected and a later driver on the same state directory works as before.
type Closer interface {
	Close() error
}
