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
