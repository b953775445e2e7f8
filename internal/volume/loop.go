package volume

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Loop devices: a volume's image file is the backing file of a loop device,
// which the host mounts as ext4. Attached with LO_FLAGS_AUTOCLEAR, so the
// kernel detaches the device when its last mount goes (in the host's mount
// namespace and in every sandbox gofer's that bind-mounted it): nothing is
// left attached by a server that died.

// attachedLoop returns the loop device (/dev/loopN) whose backing file is
// image (the same inode, whatever path the kernel recorded), or "" when
// none is. Such a device is in use: a sandbox's gofer still holds a mount of
// it after the host's own mount went (a server restarted while sandboxes
// mounting the volume ran on), and mounting the very same device again gives
// the same superblock, where attaching the image a second time would mount
// one ext4 twice and corrupt it.
func attachedLoop(image string) (string, error) {
	var want unix.Stat_t
	if err := unix.Stat(image, &want); err != nil {
		return "", err
	}
	entries, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return "", err
	}
	for _, bf := range entries {
		name := filepath.Base(filepath.Dir(filepath.Dir(bf)))
		dev := "/dev/" + name
		fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // detached meanwhile
		}
		info, err := unix.IoctlLoopGetStatus64(fd)
		unix.Close(fd)
		if err != nil {
			continue // ENXIO: not attached
		}
		if info.Inode == want.Ino && info.Device == want.Dev {
			return dev, nil
		}
	}
	return "", nil
}

// attachLoop attaches image to a free loop device, auto-cleared, and
// returns the device's path and an open descriptor of it. The kernel
// clears an auto-cleared device at its last close: the caller mounts it
// before closing fd.
func attachLoop(image string) (dev string, fd int, err error) {
	img, err := os.OpenFile(image, os.O_RDWR, 0)
	if err != nil {
		return "", -1, err
	}
	defer img.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return "", -1, fmt.Errorf("loop devices: %w (the host needs the loop module: modprobe loop)", err)
	}
	defer ctl.Close()
	// Another process may take the free device between GET_FREE and
	// CONFIGURE (EBUSY): ask again.
	for range 20 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", -1, fmt.Errorf("loop devices: no free device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		fd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			// A /dev that is not devtmpfs (some containers) gets no node
			// for a device the kernel just made.
			_ = unix.Mknod(dev, unix.S_IFBLK|0o660, int(unix.Mkdev(7, uint32(n))))
			fd, err = unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
		}
		if err != nil {
			return "", -1, fmt.Errorf("open %s: %w", dev, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(img.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		copy(cfg.Info.File_name[:], image)
		err = unix.IoctlLoopConfigure(fd, &cfg)
		if errors.Is(err, unix.EBUSY) {
			unix.Close(fd)
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			unix.Close(fd)
			return "", -1, fmt.Errorf("attach %s to %s: %w", image, dev, err)
		}
		return dev, fd, nil
	}
	return "", -1, fmt.Errorf("attach %s: every free loop device was taken by another process first", image)
}

// loopBacking returns the backing file's device and inode of the loop
// device whose device number is dev (a mounted filesystem's st_dev), or
// ok=false when dev is not a loop device.
func loopBacking(dev uint64) (devNo, ino uint64, ok bool) {
	if unix.Major(dev) != 7 { // LOOP_MAJOR
		return 0, 0, false
	}
	fd, err := unix.Open("/dev/loop"+strconv.Itoa(int(unix.Minor(dev))), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, false
	}
	defer unix.Close(fd)
	info, err := unix.IoctlLoopGetStatus64(fd)
	if err != nil {
		return 0, 0, false
	}
	return info.Device, info.Inode, true
}

// loopName is a loop device's name for messages ("loop3").
func loopName(dev string) string { return strings.TrimPrefix(dev, "/dev/") }
