package image

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/template/rootfs"
)

// The sandbox's unprivileged user, as the base recipe makes it.
const (
	userName = "user"
	userID   = 1000
	userHome = "home/user"
)

// maxAccountFile caps /etc/passwd and /etc/group as read from an image.
const maxAccountFile = 4 << 20

// mountPoints are the directories the driver mounts over (the agent's
// binary and socket directory; see the base recipe). They must be real
// directories: the import refuses an image where they lie behind a symlink.
var mountPoints = []string{"run/withruntime", "opt/withruntime"}

// MakeBootable turns a flattened image into something the driver can boot
// with the agent as PID 1: the mount points, /tmp, /etc/resolv.conf as a
// plain file, the user "user" (uid and gid 1000, home /home/user) when the
// image has none, and /workspace owned by it. It returns the shell commands
// run with ("/bin/bash", "/bin/sh", or "" when the image has neither: then
// only argv commands work).
//
// Everything is resolved with rootfs: files the image planted as symlinks
// are replaced or followed inside the root, never out of it.
func MakeBootable(root *rootfs.Root) (shell string, err error) {
	for _, d := range append([]string{"tmp", "proc", "sys", "dev", "etc"}, mountPoints...) {
		perm := uint32(0o755)
		if d == "tmp" {
			perm = 0o1777
		}
		fd, err := root.MkdirAll(d, rootfs.Strict, perm, 0, 0)
		if err != nil {
			if errors.Is(err, rootfs.ErrSymlink) && !isMountPoint(d) {
				continue // e.g. /tmp -> /var/tmp: the sandbox mounts its own over it
			}
			return "", fmt.Errorf("the image's /%s cannot be used as a mount point: %w (it must be a directory, not a symlink)", d, err)
		}
		unix.Close(fd)
	}

	// The network mounts the sandbox's resolv.conf over this file; the image
	// may have it as a symlink (systemd-resolved), possibly dangling.
	if st, err := root.Lstat("etc/resolv.conf", rootfs.Strict); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		if err := root.WriteFile("etc/resolv.conf", rootfs.Strict, nil, 0o644, 0, 0); err != nil {
			return "", err
		}
	}

	switch {
	case exists(root, "bin/bash"):
		shell = "/bin/bash"
	case exists(root, "bin/sh"):
		shell = "/bin/sh"
	}
	loginShell := shell
	if loginShell == "" {
		loginShell = "/bin/sh"
	}

	passwd, err := readAccounts(root, "etc/passwd", "root:x:0:0:root:/root:"+loginShell+"\n")
	if err != nil {
		return "", err
	}
	if !hasEntry(passwd, userName) {
		passwd = appendLine(passwd, fmt.Sprintf("%s:x:%d:%d:%s:/%s:%s", userName, userID, userID, userName, userHome, loginShell))
		if err := root.WriteFile("etc/passwd", rootfs.InRoot, passwd, 0o644, 0, 0); err != nil {
			return "", fmt.Errorf("add the user %q: %w", userName, err)
		}
		fd, err := root.MkdirAll("home", rootfs.InRoot, 0o755, 0, 0)
		if err != nil {
			return "", fmt.Errorf("create /%s: %w", userHome, err)
		}
		unix.Close(fd)
		if fd, err = root.MkdirAll(userHome, rootfs.InRoot, 0o755, userID, userID); err != nil {
			return "", fmt.Errorf("create /%s: %w", userHome, err)
		}
		unix.Close(fd)
	}
	group, err := readAccounts(root, "etc/group", "root:x:0:\n")
	if err != nil {
		return "", err
	}
	if !hasEntry(group, userName) {
		group = appendLine(group, fmt.Sprintf("%s:x:%d:", userName, userID))
		if err := root.WriteFile("etc/group", rootfs.InRoot, group, 0o644, 0, 0); err != nil {
			return "", fmt.Errorf("add the group %q: %w", userName, err)
		}
	}

	// /workspace: created for the user, or given to the user if the image
	// has one (a symlink there is left to the agent, which follows it inside
	// the sandbox).
	st, err := root.Lstat("workspace", rootfs.Strict)
	switch {
	case errors.Is(err, unix.ENOENT):
		fd, err := root.MkdirAll("workspace", rootfs.Strict, 0o755, userID, userID)
		if err != nil {
			return "", fmt.Errorf("create /workspace: %w", err)
		}
		unix.Close(fd)
	case err != nil:
		return "", fmt.Errorf("/workspace: %w", err)
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		if err := root.SetDirAttrs("workspace", rootfs.Strict, st.Mode&0o7777, userID, userID); err != nil {
			return "", fmt.Errorf("/workspace: %w", err)
		}
	}
	return shell, nil
}

func isMountPoint(d string) bool {
	for _, m := range mountPoints {
		if strings.HasPrefix(m, d) {
			return true
		}
	}
	return d == "etc"
}

func exists(root *rootfs.Root, rel string) bool {
	_, err := root.Stat(rel, rootfs.InRoot)
	return err == nil
}

// readAccounts reads a passwd or group file of the image (symlinks
// followed inside the root), or returns def if it has none.
func readAccounts(root *rootfs.Root, rel, def string) ([]byte, error) {
	b, err := root.ReadFile(rel, rootfs.InRoot, maxAccountFile)
	if errors.Is(err, unix.ENOENT) {
		return []byte(def), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the image's /%s: %w", rel, err)
	}
	return b, nil
}

func hasEntry(file []byte, name string) bool {
	for line := range strings.SplitSeq(string(file), "\n") {
		if n, _, ok := strings.Cut(line, ":"); ok && n == name {
			return true
		}
	}
	return false
}

func appendLine(file []byte, line string) []byte {
	out := append([]byte{}, file...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(append(out, line...), '\n')
}
