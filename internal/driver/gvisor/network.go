package gvisor

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/driver"
)

// The sandbox's host directory (hostDirName in its directory on the host)
// holds the agent, a hard link to the driver's copy (so one file on the
// host serves every sandbox), and in etc/ the files that the agent links
// into the sandbox's /etc at boot (agent.LinkHostFiles): hosts,
// resolv.conf and, for a sandbox with secrets, the CA bundle. The host
// bind-mounts it read-only inside the socket directory (mountHostDir), so
// the sandbox sees it at /run/withruntime/host through the one mount it
// has anyway: every mount in the bundle costs a sandbox two host threads
// for its whole life (see ociSpec), a host mount costs it none.
const (
	hostDirName    = "host"
	hostEtcDir     = "etc"
	hostsName      = "hosts"
	resolvConfFile = "resolv.conf"
	caBundleFile   = "ca-certificates.crt"
)

// hostsFile is every sandbox's /etc/hosts: its own name resolves (sudo
// and many tools look it up), as in a container.
const hostsFile = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tsandbox\n"

// makeHostDir fills the host directory of the sandbox in dir (the agent
// binary linked from agentSrc; network n, nil for none) and returns its
// path.
func (d *Driver) makeHostDir(dir, agentSrc string, n *driver.Network) (string, error) {
	host := filepath.Join(dir, hostDirName)
	etc := filepath.Join(host, hostEtcDir)
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return "", err
	}
	if err := linkOrCopy(agentSrc, filepath.Join(host, agentName)); err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	files := map[string][]byte{hostsName: []byte(hostsFile)}
	if n != nil {
		files[resolvConfFile] = []byte(n.ResolvConf)
		if len(n.CABundle) > 0 {
			files[caBundleFile] = n.CABundle
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(etc, name), data, 0o644); err != nil {
			return "", err
		}
	}
	return host, nil
}

// mountHostDir bind-mounts the host directory of the sandbox in dir,
// read-only, at hostDirName in its socket directory sockDir. Call it on a
// socket directory just mounted (mountSocketDir), before the sandbox runs:
// nothing inside can have changed it. Root inside then cannot write the
// agent or the files (the host's read-only mount refuses), nor remove the
// mount point; it is unmounted with the socket directory (MNT_DETACH takes
// the mounts below).
func mountHostDir(dir, sockDir string) error {
	src, dst := filepath.Join(dir, hostDirName), filepath.Join(sockDir, hostDirName)
	if err := os.Mkdir(dst, 0o755); err != nil {
		return fmt.Errorf("host directory mount point: %w", err)
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mount the host directory %s: %w", src, err)
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		_ = unix.Unmount(dst, unix.MNT_DETACH)
		return fmt.Errorf("make the host directory %s read-only: %w", dst, err)
	}
	return nil
}

// linkOrCopy hard-links src at dst, or copies it where a link cannot be
// made (another filesystem).
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// resolvConfPath is where the host keeps the resolv.conf of the sandbox in
// dir: in its host directory, or, for a sandbox booted before there was
// one (its bundle bind-mounts the file itself), in dir. Both are the
// host's: the socket directory's mount of the host directory is read-only.
func resolvConfPath(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, hostDirName)); err == nil {
		return filepath.Join(dir, hostDirName, hostEtcDir, resolvConfFile)
	}
	return filepath.Join(dir, resolvConfFile)
}

// networkFlag is runsc's --network for a sandbox: gVisor's own network
// stack inside the given namespace (its veth, routes and address), or no
// network at all.
func networkFlag(n *driver.Network) string {
	if n == nil {
		return "--network=none"
	}
	return "--network=sandbox"
}

// addNetwork boots the sandbox in n's namespace (its resolv.conf and CA
// bundle are in the host directory: makeHostDir).
func addNetwork(s *specs.Spec, n *driver.Network) {
	if n == nil {
		return
	}
	for i := range s.Linux.Namespaces {
		if s.Linux.Namespaces[i].Type == specs.NetworkNamespace {
			s.Linux.Namespaces[i].Path = n.NetnsPath
		}
	}
}
