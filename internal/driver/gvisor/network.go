package gvisor

import (
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"withruntime.dev/runtime/internal/driver"
)

// Files in a sandbox's directory for its network.
const (
	resolvConfFile = "resolv.conf"
	caBundleFile   = "ca-certificates.crt"
	caBundlePath   = "/etc/ssl/certs/ca-certificates.crt"
)

// hostsFile is every sandbox's /etc/hosts: its own name resolves (sudo
// and many tools look it up), as in a container.
const hostsFile = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tsandbox\n"

// addHosts writes the sandbox's /etc/hosts into dir and bind-mounts it
// read-only (templates need not have one; images often do not).
func addHosts(s *specs.Spec, dir string) error {
	path := filepath.Join(dir, "hosts")
	if err := os.WriteFile(path, []byte(hostsFile), 0o644); err != nil {
		return err
	}
	s.Mounts = append(s.Mounts, specs.Mount{Destination: "/etc/hosts", Type: "bind", Source: path, Options: []string{"rbind", "ro"}})
	return nil
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

// addNetwork boots the sandbox in n's namespace: it writes the sandbox's
// resolv.conf (and CA bundle) into dir and bind-mounts them read-only.
func addNetwork(s *specs.Spec, n *driver.Network, dir string) error {
	if n == nil {
		return nil
	}
	for i := range s.Linux.Namespaces {
		if s.Linux.Namespaces[i].Type == specs.NetworkNamespace {
			s.Linux.Namespaces[i].Path = n.NetnsPath
		}
	}
	resolv := filepath.Join(dir, resolvConfFile)
	if err := os.WriteFile(resolv, []byte(n.ResolvConf), 0o644); err != nil {
		return err
	}
	s.Mounts = append(s.Mounts, specs.Mount{Destination: "/etc/resolv.conf", Type: "bind", Source: resolv, Options: []string{"rbind", "ro"}})
	if len(n.CABundle) > 0 {
		bundle := filepath.Join(dir, caBundleFile)
		if err := os.WriteFile(bundle, n.CABundle, 0o644); err != nil {
			return err
		}
		s.Mounts = append(s.Mounts, specs.Mount{Destination: caBundlePath, Type: "bind", Source: bundle, Options: []string{"rbind", "ro"}})
	}
	return nil
}
