package gvisor

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"withruntime.dev/runtime/internal/driver"
)

// The sandbox's host directory (hostDirName in its directory on the host)
// is mounted read-only at /opt/withruntime. It holds the agent, a hard link
// to the driver's copy (so one file on the host serves every sandbox), and
// in etc/ the files that the agent links into the sandbox's /etc at boot
// (agent.LinkHostFiles): hosts, resolv.conf and, for a sandbox with
// secrets, the CA bundle. One mount for all of them: each bind mount costs
// a sandbox two host threads for its whole life (see ociSpec).
const (
	hostDirName    = "opt"
	hostEtcDir     = "etc"
	hostsName      = "hosts"
	resolvConfFile = "resolv.conf"
	caBundleFile   = "ca-certificates.crt"
)

// hostsFile is every sandbox's /etc/hosts: its own name resolves (sudo
// and many tools look it up), as in a container.
const hostsFile = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tsandbox\n"

// makeHostDir fills the host directory of the sandbox in dir (network n,
// nil for none) and returns its path.
func (d *Driver) makeHostDir(dir string, n *driver.Network) (string, error) {
	host := filepath.Join(dir, hostDirName)
	etc := filepath.Join(host, hostEtcDir)
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return "", err
	}
	if err := linkOrCopy(filepath.Join(d.agentDir, agentName), filepath.Join(host, agentName)); err != nil {
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
// one (its bundle bind-mounts the file itself), in dir.
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
