package wire

import "time"

// CreateVolumeRequest is the body of POST /v1/volumes.
type CreateVolumeRequest struct {
	// Name is the volume's name among the key's volumes: 1 to 63 letters,
	// digits, '.', '_' or '-', starting with a letter or digit. Another
	// key's volumes never share it (each key has its own names).
	Name string `json:"name"`
	// SizeMiB is the volume's size, in MiB: a hard quota on what its files
	// take (its filesystem's own structures take a little of it), enforced
	// on the host. At least 16; the server's maximum is its largest
	// diskMiB unless configured otherwise.
	SizeMiB int64 `json:"sizeMiB"`
}

// Volume is a volume as the server returns it: storage that outlives
// sandboxes, owned by the key that made it.
type Volume struct {
	// Name is the key's name for the volume.
	Name string `json:"name"`
	// ID is the volume's id ("vol_..."), under which its storage appears
	// in usage reports.
	ID string `json:"id"`
	// SizeMiB is the volume's size, in MiB: what counts in the key's disk
	// quota and is billed at the storage price.
	SizeMiB int64 `json:"sizeMiB"`
	// UsedBytes is what its files take, in bytes.
	UsedBytes int64 `json:"usedBytes"`
	// CapacityBytes is what its files may take in all, in bytes: SizeMiB
	// less its filesystem's own structures (a journal and inode tables).
	CapacityBytes int64 `json:"capacityBytes"`
	// State is "creating", "ready", "deleting" or "damaged" (its
	// filesystem failed its check and is not mounted: Error says why).
	State string `json:"state"`
	// CreatedAt is when it was made (RFC 3339, UTC).
	CreatedAt time.Time `json:"createdAt"`
	// MountedBy lists the sandboxes that are not stopped (starting,
	// running or paused) and mount it; a delete is refused while any does.
	MountedBy []string `json:"mountedBy"`
	// Error says what is wrong with a damaged volume.
	Error string `json:"error,omitempty"`
}

// VolumeList is the body of GET /v1/volumes: the key's volumes, by name.
type VolumeList struct {
	Volumes []Volume `json:"volumes"`
}

// VolumeMount is one volume a sandbox mounts: in CreateSandboxRequest's
// volumes, and in a sandbox's record.
type VolumeMount struct {
	// Name is the volume's name (one of the creating key's volumes).
	Name string `json:"name"`
	// Path is where the sandbox sees the volume: an absolute, clean path,
	// not "/" and not at or under /proc, /sys, /dev, /run, /tmp or /etc.
	Path string `json:"path"`
	// ReadOnly mounts the volume read-only: writes inside fail with EROFS
	// (default false).
	ReadOnly bool `json:"readOnly,omitempty"`
}
