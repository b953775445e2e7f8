// Package driver is the narrow interface between the sandbox manager and an
// isolation technology (gVisor today, a microVM later).
//
// A driver boots a sandbox whose PID 1 is the Runtime agent and gives the
// manager a way to dial that agent; everything that happens inside the
// sandbox (exec, files) goes through the agent, so a driver knows nothing
// about commands or files. Optional features are separate interfaces found by
// type assertion (StatsReader, Watcher, CPUSetter, Pauser, Snapshotter,
// DiskReporter, DiskUser, Closer, LeaseBounder, Volumes).
package driver

import (
	"context"
	"errors"
	"math"
	"net"
	"os"
	"time"

	"withruntime.dev/runtime/internal/egress/policy"
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
	// Owner is the tenant the sandbox is for (the API key id; "" for a
	// warm-pool sandbox not yet claimed). Drivers that label what they
	// make (Kubernetes) use it; gVisor ignores it.
	Owner string
	// RootFS is the template's root filesystem directory. The driver must
	// never write to it: the sandbox gets a copy-on-write layer over it.
	// For a driver that runs images (Kubernetes) it may instead be the
	// template's image reference, pinned by digest (registry.Catalog).
	RootFS string
	// CPU is the number of vCPUs (may be fractional, e.g. 0.5).
	CPU float64
	// MemoryBytes is the sandbox's memory size, enforced on the whole sandbox.
	MemoryBytes int64
	// DiskBytes caps what the sandbox may write to its root filesystem.
	DiskBytes int64
	// TmpBytes caps the /tmp tmpfs.
	TmpBytes int64
	// ShmBytes caps the /dev/shm tmpfs (mode 1777, as Docker and E2B give):
	// POSIX shared memory and semaphores, which Python's multiprocessing,
	// joblib, PyTorch's DataLoader and Chromium need. Its pages are the
	// sandbox's memory, like /tmp's.
	ShmBytes int64
	// PidsLimit caps the number of processes and threads.
	PidsLimit int64
	// Env is the sandbox environment ("KEY=value") that every command inherits.
	Env []string
	// LeaseEndsAt, when set, is when the sandbox should end: the agent
	// ends it itself shortly after (a backstop for when no server runs).
	LeaseEndsAt time.Time
	// Network, when set, boots the sandbox in an existing network namespace
	// (made by the egress manager); without it the sandbox has no network.
	// Drivers that are Networkers ignore it.
	Network *Network
	// Policy is, for a driver that is a Networker, the network policy its
	// sandbox boots under (normalized, accepted by CheckNetwork); nil lets
	// nothing out. Other drivers ignore it (the egress manager enforces
	// the policy of their Network).
	Policy *policy.Policy
	// Pooled says the sandbox is booted for the warm pool: it belongs to
	// no one (Owner ""), and a create claims it later (Claimer, when the
	// driver is one). LeaseEndsAt is then only how long it may wait.
	Pooled bool
	// TrustPEM is, for a driver that is a Networker, CA certificates (PEM)
	// the sandbox trusts besides its image's roots (the Runtime CA of a
	// sandbox with secrets): added to its system CA bundle at boot. Other
	// drivers ignore it (Network.CABundle is the whole bundle).
	TrustPEM []byte

	// Volumes are the volumes the sandbox mounts (a driver that is not a
	// Volumes refuses a Spec with any). The manager has checked that they
	// are the owner's and that the paths are clean, absolute and apart.
	Volumes []VolumeMount

	// Background boots the sandbox at a low host CPU weight (a warm-pool
	// sandbox booted ahead), so that on a busy host its boot yields the
	// cores to running sandboxes; Foregrounder raises it when it is claimed.
	// Drivers that are not Foregrounders ignore it.
	Background bool

	// RootFiles, when set, is the id of a files-only snapshot
	// (FileSnapshotter.SnapshotFiles) whose saved files the sandbox's
	// writable root layer starts with, over RootFS. The manager sets it
	// only for a driver that is a FileSnapshotter; ErrNotFound (wrapped)
	// when there is no such snapshot.
	RootFiles string
}

// Foregrounder is implemented by drivers that honour Spec.Background.
//
// Foreground gives a sandbox booted with Background the host CPU weight of
// any other sandbox (a no-op for one already there). Its CPU limit and the
// CPU count it sees are unchanged.
type Foregrounder interface {
	Foreground(ctx context.Context, id string) error
}

// CPUWeighter is implemented by drivers that can change a running
// sandbox's host CPU weight: its share of contended host cores among the
// other sandboxes (the manager splits one sandbox's weight among a key's
// busy sandboxes, so that under contention each key gets a fair share, and
// gives a key that uses clearly more than the others a sixteenth of it:
// sandbox/fairshare.go).
//
// SetCPUWeight sets the weight to share times a foreground sandbox's
// weight, 0 < share <= 1 (smaller values are raised to the driver's
// floor). Its CPU limit and the CPU count it sees are unchanged.
type CPUWeighter interface {
	SetCPUWeight(ctx context.Context, id string, share float64) error
}

// CPUPlacer is implemented by drivers that can confine a running sandbox's
// host threads to some of the host cores this server may use (the manager
// keeps a heavy key's sandboxes off the cores of the other keys' while both
// want CPU: sandbox/fairshare.go).
//
// HostCPUs is how many host cores this server's sandboxes may run on (0 or
// 1: nothing to divide). PlaceCPU lets sandbox id's threads run on those
// cores from..to-1 only (indices into them, in the host's order; 0,
// HostCPUs() for all of them). The CPU count the sandbox sees and its CPU
// limit are unchanged; it fails if the sandbox is gone or the range is
// empty or outside those cores. BootCPUs sets the cores from..to-1 that
// sandboxes booted, restored or resumed from now on run on until PlaceCPU
// places them (0, HostCPUs(): all of them, the default); a range that is
// empty or outside those cores means all of them.
type CPUPlacer interface {
	HostCPUs() int
	PlaceCPU(ctx context.Context, id string, from, to int) error
	BootCPUs(from, to int)
}

// Networker is implemented by drivers whose sandboxes get their network
// from somewhere other than this host (Kubernetes: the cluster's pod
// network, restricted by a NetworkPolicy per sandbox). The server then
// makes no host network for them (no egress manager): the driver enforces
// each sandbox's policy itself, failing closed (a sandbox it cannot
// restrict must not run).
type Networker interface {
	// CheckNetwork returns nil when the driver can enforce policy p
	// (normalized) for a sandbox given the named number of secrets, and
	// otherwise an error of category errs.Invalid that says what it cannot
	// enforce and what to ask for instead. The manager calls it before
	// anything of a create or policy change is made.
	CheckNetwork(p policy.Policy, secrets int) error
	// SetNetwork replaces sandbox id's policy (accepted by CheckNetwork)
	// on its running sandbox. On error the old policy may still hold.
	SetNetwork(ctx context.Context, id string, p policy.Policy) error
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

// Claimer is implemented by drivers that must bind a warm-pool sandbox
// (booted with Spec.Pooled) to the create that claims it before it is
// handed out (Kubernetes: the owner label and the lease deadline on the
// pod). The manager calls Claim once per pooled sandbox, after the agent
// took the create's settings and before the sandbox is recorded; an error
// makes the create start a sandbox cold and destroys the pooled one.
type Claimer interface {
	// Claim binds pooled sandbox id to owner (the API key id) with a lease
	// ending at leaseEndsAt. It fails when the sandbox is not an unclaimed
	// pooled one (a sandbox is claimed at most once).
	Claim(ctx context.Context, id, owner string, leaseEndsAt time.Time) error
}

// LeaseBounder is implemented by drivers whose sandboxes cannot be kept
// running past a time fixed when they started (Kubernetes: a running pod's
// activeDeadlineSeconds can be lowered, never raised). The manager asks
// before it extends a lease and refuses a lease end past the bound (400)
// rather than let the sandbox be killed while its record says it runs.
type LeaseBounder interface {
	// LatestLeaseEnd is the latest lease end sandbox id can keep (its
	// safety margin already taken off); the zero time says no bound.
	LatestLeaseEnd(ctx context.Context, id string) (time.Time, error)
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

// Shared is implemented by drivers whose sandboxes every server on one
// store sees and reaches the same way (Kubernetes: one cluster): List
// answers for all servers' sandboxes and Recover works from any server.
// Only over such a driver does the leader of several servers clean up what
// a dead one left (sandbox.Manager's reconciliation); a per-host driver's
// List sees one host only, and another host's sandboxes would look
// orphaned.
type Shared interface {
	SharedAcrossServers()
}

// Closer is implemented by drivers that hold host resources beyond their
// sandboxes (mounts, files). Close releases them; running sandboxes are not
// affected and a later driver on the same state directory works as before.
type Closer interface {
	Close() error
}

// ErrNoSpace says the host has no room for a sandbox's image: the pause
// failed and the sandbox runs on.
var ErrNoSpace = errors.New("no space on the host for the sandbox's image")

// ErrNotSavable says the sandbox holds something its driver cannot save
// (for gVisor: a socket bound on the host, in the agent's socket
// directory): the pause failed and the sandbox runs on.
var ErrNotSavable = errors.New("the sandbox holds something that cannot be saved")

// Image is a paused sandbox's saved state on the host.
type Image struct {
	// Bytes is the space the image takes on the host's disk, in bytes: the
	// sandbox's memory, processes and the files it wrote.
	Bytes int64
}

// Pauser is implemented by drivers that can pause a sandbox: save it whole
// (memory, processes, files) to the host's disk, stop it, and later resume it
// from that image where it was. Open connections into and out of the sandbox
// are closed by a pause; the sandbox's network is given again at resume.
//
// The manager's store says whether a sandbox is running or paused; the
// driver calls commit at the one point where the answer changes, so that a
// server killed at any moment leaves the sandbox as the store says (after
// RecoverPaused for a paused record, Recover for a running one).
type Pauser interface {
	// Pause saves the running sandbox id (state is its Handle.State) and
	// calls commit with its image. When commit succeeds, the sandbox is
	// stopped: nothing of it runs, its image is kept. On any error before
	// commit succeeds the sandbox runs on as before and no image is kept;
	// ErrNoSpace (wrapped) says the host's disk is full, ErrNotSavable that
	// the sandbox holds what cannot be saved, ErrChannel that its agent's
	// channel was tampered with.
	Pause(ctx context.Context, id string, state []byte, commit func(Image) error) error
	// Resume boots the paused sandbox id from its image in the network net
	// (nil: none) and calls commit once its agent answers; when commit
	// succeeds the image is removed and the sandbox runs. On error nothing
	// of the sandbox runs and its image is kept. ErrNotFound (wrapped) says
	// there is no image.
	Resume(ctx context.Context, id string, state []byte, net *Network, commit func(*Handle) error) (*Handle, error)
	// RecoverPaused makes sure nothing of the paused sandbox id runs (a
	// pause or resume interrupted by a server's death may have left it
	// running) and returns its image, or ErrNotFound (wrapped) when it has
	// none.
	RecoverPaused(ctx context.Context, id string) (Image, error)
}

// FilePauser is implemented by Pausers that can also pause a sandbox with
// its files alone: its writable root layer (what it wrote, changed and
// deleted over its template) is saved, as FileSnapshotter saves it, and
// the sandbox is stopped: its processes end and its memory is freed. The
// image is resumed by Pauser.Resume, which then boots the sandbox fresh
// (same id, limits, network and volumes) with those files: no process of
// before runs, /tmp and /dev/shm start empty, and the Handle's State may
// differ from the one paused. RecoverPaused knows either kind of image.
type FilePauser interface {
	// PauseFiles saves the writable root layer of the running sandbox id
	// (state is its Handle.State) and calls commit with its image; when
	// commit succeeds the sandbox is stopped and its image kept. On any
	// error before, the sandbox runs on and no image is kept: ErrNoSpace
	// (wrapped) when the host's disk is full, ErrNotSavable when the layer
	// cannot be kept (an archive larger than the sandbox's disk: a sparse
	// file).
	PauseFiles(ctx context.Context, id string, state []byte, commit func(Image) error) error
}

// ErrNotRestorable says a snapshot exists but cannot become a sandbox here:
// what it was taken on is gone or changed (its template rebuilt or
// deleted, another version of the isolation layer, another kind of
// network). Nothing was started; the message says which.
var ErrNotRestorable = errors.New("the snapshot cannot be restored")

// Snapshotter is implemented by drivers that can save a running sandbox as
// a snapshot — memory, processes, files, like a pause — while it runs on,
// and boot any number of new sandboxes from it. A snapshot is an image on
// the host known by an id the manager chooses ([a-z0-9_-]); the manager's
// store says which snapshots exist, the driver keeps their images.
type Snapshotter interface {
	// Snapshot saves the running sandbox id (state is its Handle.State) as
	// snapshot snapID after a brief pause; the sandbox runs on (requests
	// to its agent in flight at the save end: their connections close).
	// On error no image is kept and the sandbox runs on; ErrNoSpace,
	// ErrNotSavable and ErrChannel (wrapped) as for Pauser.Pause.
	Snapshot(ctx context.Context, id string, state []byte, snapID string) (Image, error)
	// Restore boots a new sandbox spec.ID from snapshot snapID, with
	// spec's cgroup limits, network and directory of its own; the programs
	// inside start where the snapshot left them. spec.RootFS must be the
	// root filesystem the snapshot's source was booted from, and
	// spec.Network present exactly when the source had a network
	// (ErrNotRestorable otherwise). It returns once the agent answers; on
	// error nothing of the new sandbox is left and the snapshot is kept.
	// ErrNotFound (wrapped) says there is no such snapshot.
	Restore(ctx context.Context, spec Spec, snapID string) (*Handle, error)
	// DeleteSnapshot removes snapshot snapID's image; a missing one is not
	// an error. Sandboxes restored from it run on.
	DeleteSnapshot(ctx context.Context, snapID string) error
	// ListSnapshots returns the ids of every snapshot image on the host,
	// including ones no record knows about (orphans to remove), and
	// removes what a snapshot interrupted by a server's death left.
	ListSnapshots(ctx context.Context) ([]string, error)
}

// FileSnapshotter is implemented by Snapshotters that can also save the
// files alone of a running sandbox: its writable root layer (what it wrote,
// changed and deleted over its template), never its memory, processes,
// /tmp, /dev/shm or volumes. The image is kept, listed and deleted as any
// snapshot's (Snapshotter); a new sandbox boots fresh from its template with
// those files (Spec.RootFiles), and Restore refuses it (ErrNotRestorable).
type FileSnapshotter interface {
	// SnapshotFiles saves the writable root layer of the running sandbox
	// id (state is its Handle.State) as snapshot snapID. The sandbox runs
	// on: writes to its root wait while the layer is read, nothing else
	// stops. On error no image is kept; ErrNoSpace (wrapped) when the
	// host's disk is full.
	SnapshotFiles(ctx context.Context, id string, state []byte, snapID string) (Image, error)
}

// DiskReporter is implemented by drivers whose sandboxes keep their
// writable layers and pause images on the server's host disk, so that the
// manager can admit creates and pauses against its free space
// (sandbox/quota.go). A driver without it (Kubernetes: a pod's disk is the
// node's) is admitted by the per-key quotas alone.
type DiskReporter interface {
	// HostDisk describes the filesystem that holds sandboxes' writable
	// layers and pause images: availBytes is what may still be written
	// there (statfs's f_bavail), sizeBytes its whole size.
	HostDisk() (availBytes, sizeBytes int64, err error)
	// ImageEstimate is, in bytes, about the most that a pause image of the
	// running sandbox id would take if it were saved now: its memory in use
	// on the host plus the blocks its writable layer holds on the host's
	// disk (the image carries both). An error when it cannot be measured.
	ImageEstimate(ctx context.Context, id string) (int64, error)
}

// DiskUser is implemented by drivers that can measure what a running
// sandbox's writable layer holds on the host's disk (for its metrics).
type DiskUser interface {
	// DiskUsed is the bytes sandbox id's writes take on the host's disk
	// (allocated blocks); an error when it cannot be measured (a layer
	// kept in memory).
	DiskUsed(ctx context.Context, id string) (int64, error)
}

// VolumeMount is one volume mounted in a sandbox.
type VolumeMount struct {
	// ID is the volume's id (Volumes.CreateVolume).
	ID string
	// Path is where the sandbox sees it: absolute and clean.
	Path string
	// ReadOnly mounts it read-only: writes inside fail with EROFS.
	ReadOnly bool
}

// ErrVolumeCorrupt says a volume's filesystem failed its check: it is not
// mounted until an administrator repairs it.
var ErrVolumeCorrupt = errors.New("the volume's filesystem is damaged")

// Volumes is implemented by drivers that keep volumes: storage that
// outlives sandboxes, of a fixed size enforced on the host, mounted by
// sandboxes (Spec.Volumes) and read and written from the host without one
// (OpenVolume). A driver without it (Kubernetes, until volumes are
// PersistentVolumeClaims there) refuses volumes.
//
// What a sandbox mounts stays mounted for it through pauses (a resume
// mounts it again) and server restarts; a volume is deleted only when no
// sandbox that is not stopped mounts it (the manager checks).
type Volumes interface {
	// CreateVolume makes an empty volume id of sizeBytes (a whole number
	// of MiB). On error nothing of it is left.
	CreateVolume(ctx context.Context, id string, sizeBytes int64) error
	// DeleteVolume removes volume id and its files. A missing one is not
	// an error.
	DeleteVolume(ctx context.Context, id string) error
	// VolumeUsage returns the bytes volume id's files take and the most
	// they may take (its size less the filesystem's own structures).
	// ErrVolumeCorrupt (wrapped) for a damaged volume.
	VolumeUsage(ctx context.Context, id string) (usedBytes, capacityBytes int64, err error)
	// OpenVolume opens volume id's files as a root that no path leaves
	// (links included). ErrVolumeCorrupt (wrapped) for a damaged volume.
	OpenVolume(ctx context.Context, id string) (*os.Root, error)
	// ListVolumes returns the ids of every volume the driver keeps,
	// including ones no record knows about (left by a create that a dead
	// server did not finish).
	ListVolumes(ctx context.Context) ([]string, error)
}
