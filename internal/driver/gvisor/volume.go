package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/volume"
)

var _ driver.Volumes = (*Driver)(nil)

// Volumes are sparse ext4 images under StateDir/volumes, loop-mounted on the
// host (package volume says why that form). A sandbox gets a volume's data
// directory as a bind mount of its own, nosuid and nodev, read-only when
// asked. gVisor serves it through the sandbox's gofer with its default
// file access for mounts other than the root ("shared"): the sentry
// revalidates what it cached against the host at each access and reads
// and writes regular files through to the host file, so what one sandbox
// wrote is what another reads next, as two processes on one host see it.
// What is not shared: file locks (flock, fcntl) and inotify watches are
// each sandbox's kernel's own, so a lock does not exclude a writer in
// another sandbox, and a watch sees only its own sandbox's changes.
//
// Each mount costs its sandbox a gofer connection (about two host threads)
// for its life; a sandbox without volumes has none.

// volumeUID and volumeGID own a new volume's files: the sandbox user.
const volumeUID, volumeGID = 1000, 1000

func (d *Driver) volumesDir() string { return filepath.Join(d.cfg.StateDir, "volumes") }

// CreateVolume implements driver.Volumes.
func (d *Driver) CreateVolume(ctx context.Context, id string, sizeBytes int64) error {
	return volErr(d.vols.Create(ctx, id, sizeBytes))
}

// DeleteVolume implements driver.Volumes.
func (d *Driver) DeleteVolume(ctx context.Context, id string) error {
	return volErr(d.vols.Remove(ctx, id))
}

// VolumeUsage implements driver.Volumes.
func (d *Driver) VolumeUsage(ctx context.Context, id string) (int64, int64, error) {
	used, capacity, err := d.vols.Usage(ctx, id)
	return used, capacity, volErr(err)
}

// OpenVolume implements driver.Volumes.
func (d *Driver) OpenVolume(ctx context.Context, id string) (*os.Root, error) {
	r, err := d.vols.OpenRoot(ctx, id)
	return r, volErr(err)
}

// ListVolumes implements driver.Volumes.
func (d *Driver) ListVolumes(ctx context.Context) ([]string, error) {
	return d.vols.List()
}

// volErr makes a damaged volume driver.ErrVolumeCorrupt.
func volErr(err error) error {
	if errors.Is(err, volume.ErrCorrupt) {
		return fmt.Errorf("%w: %w", driver.ErrVolumeCorrupt, err)
	}
	return err
}

// mountVolumes makes sure each volume of ids is mounted on the host (the
// first use after a server start mounts it) and returns their data
// directories, in order.
func (d *Driver) mountVolumes(ctx context.Context, ids []string) ([]string, error) {
	dirs := make([]string, len(ids))
	for i, id := range ids {
		dir, err := d.vols.Mount(ctx, id)
		if err != nil {
			return nil, volErr(err)
		}
		dirs[i] = dir
	}
	return dirs, nil
}

// addVolumes adds to oci a bind mount of each volume of vols, whose data
// directories on the host are dirs.
// checkVolumePaths refuses a volume whose path is not a directory of the
// template's root filesystem rootfs. runsc's file proxy makes a missing
// mount point in the root it serves, and that root is the template every
// sandbox shares: a create that mounted at /data or /workspace/w left those
// directories in the base template, seen by every sandbox after it (and a
// directory named like a program early in PATH would break that program
// for every tenant). So a volume mounts only on a directory the template
// has (the base template makes /data for this: template.mountPoints).
func checkVolumePaths(rootfs string, vols []driver.VolumeMount) error {
	if len(vols) == 0 {
		return nil
	}
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return fmt.Errorf("template root: %w", err)
	}
	defer root.Close()
	for _, v := range vols {
		rel := strings.TrimPrefix(path.Clean(v.Path), "/")
		if fi, err := root.Lstat(rel); err != nil || !fi.IsDir() {
			return errs.New(errs.Invalid,
				"volume path %s is not a directory of the sandbox's template: a volume mounts on a directory the template already has, such as /data, /mnt or /srv (a sandbox never adds one to a template, which every sandbox shares); choose one of those, or build a template that has the directory (withruntime template build with a Dockerfile that makes it)", v.Path)
		}
	}
	return nil
}

func addVolumes(oci *specs.Spec, vols []driver.VolumeMount, dirs []string) {
	for i, v := range vols {
		mode := "rw"
		if v.ReadOnly {
			mode = "ro"
		}
		// nosuid is the sentry's (a setuid file on the volume runs with its
		// caller's ids); nodev is the gofer's host mount (gVisor's kernel
		// never opens a host device through a gofer anyway, and refuses to
		// make one).
		oci.Mounts = append(oci.Mounts, specs.Mount{Destination: v.Path, Type: "bind", Source: dirs[i],
			Options: []string{"bind", mode, "nosuid", "nodev"}})
	}
}

func volumeIDs(vols []driver.VolumeMount) []string {
	ids := make([]string, len(vols))
	for i, v := range vols {
		ids[i] = v.ID
	}
	return ids
}
