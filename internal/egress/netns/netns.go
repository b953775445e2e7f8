// Package netns creates a sandbox's network: a named network namespace (a
// bind mount under /run/netns, as `ip netns` makes) holding one end of a
// veth pair, named eth0, with a /30 from the sandbox pool (100.64.0.0/10)
// and a default route to the other end, which stays on the host.
//
// gVisor (runsc --network=sandbox) started in that namespace takes eth0's
// address and routes for its own network stack; everything it sends comes
// out of the host end, where the firewall decides.
package netns

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// SandboxIf is the interface name inside the namespace.
const SandboxIf = "eth0"

// Config names and places what this package creates.
type Config struct {
	// Dir holds the named namespaces (default /run/netns, where `ip netns`
	// finds them too).
	Dir string
	// NamePrefix starts every namespace name: NamePrefix + sandbox id. It
	// ends with '-', which no sandbox id holds (see ValidID), so the names of
	// one configuration never parse as another's: "withruntime-" does not
	// claim "withruntime-1a2b3c4d-sbx_x", whose rest holds a '-'.
	NamePrefix string
	// LinkPrefix starts every host-side veth name; the rest is a hash of
	// the sandbox id. At most 6 characters. Configurations on one host
	// need link prefixes neither of which starts another's veth names (the
	// firewall drops what comes from an unknown link with its prefix).
	LinkPrefix string
	// AliasPrefix starts the host veth's alias (AliasPrefix + sandbox id),
	// which is how a link is traced back to its sandbox after a restart.
	// It ends with ':', for the same reason NamePrefix ends with '-'.
	AliasPrefix string
	// Pool is where the /30 links come from (default 100.64.0.0/10).
	Pool netip.Prefix
}

func (c *Config) defaults() error {
	if c.Dir == "" {
		c.Dir = "/run/netns"
	}
	if !c.Pool.IsValid() {
		c.Pool = netip.MustParsePrefix("100.64.0.0/10")
	}
	if !c.Pool.Addr().Is4() || c.Pool.Bits() > 30 {
		return fmt.Errorf("netns: pool %s: need an IPv4 prefix of /30 or larger", c.Pool)
	}
	if c.NamePrefix == "" || c.LinkPrefix == "" || c.AliasPrefix == "" {
		return fmt.Errorf("netns: NamePrefix, LinkPrefix and AliasPrefix are required")
	}
	if !strings.HasSuffix(c.NamePrefix, "-") || !strings.HasSuffix(c.AliasPrefix, ":") {
		return fmt.Errorf("netns: NamePrefix %q must end with '-' and AliasPrefix %q with ':', so that no other configuration's names parse as this one's", c.NamePrefix, c.AliasPrefix)
	}
	if len(c.LinkPrefix) > 6 {
		return fmt.Errorf("netns: LinkPrefix %q longer than 6 characters", c.LinkPrefix)
	}
	return nil
}

// Link is one sandbox's network as created on the host.
type Link struct {
	ID string
	// NetnsName is the namespace's name; NetnsPath its file, the path for
	// the OCI spec's linux.namespaces network entry.
	NetnsName, NetnsPath string
	// HostIf is the host end of the veth.
	HostIf string
	// Gateway is the host end's address, the sandbox's default gateway.
	Gateway netip.Addr
	// Addr is the sandbox end's address with its prefix length (/30).
	Addr netip.Prefix
}

// ValidID reports whether an id can name a namespace: 1 to 200 letters,
// digits and '_'. Never '-' or ':', the characters that end name and alias
// prefixes, so that a name is parsed the same way by every configuration.
func ValidID(id string) error {
	if id == "" || len(id) > 200 {
		return fmt.Errorf("netns: bad sandbox id %q: want 1 to 200 letters, digits or '_'", id)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return fmt.Errorf("netns: bad sandbox id %q: want 1 to 200 letters, digits or '_'", id)
		}
	}
	return nil
}

// HostIfName returns the host veth name for a sandbox id.
func (c Config) HostIfName(id string) string {
	sum := sha256.Sum256([]byte(id))
	return c.LinkPrefix + hex.EncodeToString(sum[:4])
}

func (c Config) names(id string) (name, path, hostIf string) {
	name = c.NamePrefix + id
	return name, filepath.Join(c.Dir, name), c.HostIfName(id)
}

// Create makes the sandbox's namespace and veth. When both already exist
// and belong to this id (after a server restart, with the sandbox still
// running in them), they are kept and returned as they are. Anything else
// left over under this id is removed first. On error nothing is left.
func (c Config) Create(id string) (l *Link, err error) {
	if err := c.defaults(); err != nil {
		return nil, err
	}
	if err := ValidID(id); err != nil {
		return nil, err
	}
	if l, err := c.Lookup(id); err == nil {
		return l, nil
	}
	if err := c.Delete(id); err != nil {
		return nil, err
	}
	name, path, hostIf := c.names(id)
	defer func() {
		if err != nil {
			_ = c.Delete(id)
		}
	}()
	gw, addr, err := c.allocate(id)
	if err != nil {
		return nil, err
	}
	if err := newNamed(c.Dir, path); err != nil {
		return nil, fmt.Errorf("netns: creating %s: %w", name, err)
	}
	ns, err := vnetns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("netns: opening %s: %w", name, err)
	}
	defer ns.Close()

	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: hostIf},
		PeerName:      SandboxIf,
		PeerNamespace: netlink.NsFd(int(ns)),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("netns: creating veth %s: %w", hostIf, err)
	}
	host, err := netlink.LinkByName(hostIf)
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	if err := netlink.LinkSetAlias(host, c.AliasPrefix+id); err != nil {
		return nil, fmt.Errorf("netns: alias on %s: %w", hostIf, err)
	}
	// No IPv6 on the host end: a link-local address there would be a way
	// to the host's services that the IPv4 rules do not see (the firewall
	// rejects IPv6 from sandboxes as well).
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+hostIf+"/disable_ipv6", []byte("1"), 0o644)
	if err := netlink.AddrAdd(host, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(gw, 30))}); err != nil {
		return nil, fmt.Errorf("netns: address on %s: %w", hostIf, err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}

	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return nil, fmt.Errorf("netns: lo up: %w", err)
	}
	peer, err := h.LinkByName(SandboxIf)
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	if err := h.AddrAdd(peer, &netlink.Addr{IPNet: ipNet(addr)}); err != nil {
		return nil, fmt.Errorf("netns: address on %s: %w", SandboxIf, err)
	}
	if err := h.LinkSetUp(peer); err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: peer.Attrs().Index, Gw: gw.AsSlice()}); err != nil {
		return nil, fmt.Errorf("netns: default route: %w", err)
	}
	return &Link{ID: id, NetnsName: name, NetnsPath: path, HostIf: hostIf, Gateway: gw, Addr: addr}, nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Lookup returns the sandbox's link when both the namespace and the host
// veth exist and belong to this id.
func (c Config) Lookup(id string) (*Link, error) {
	if err := c.defaults(); err != nil {
		return nil, err
	}
	name, path, hostIf := c.names(id)
	if !isNsMount(path) {
		return nil, fmt.Errorf("netns: %s: %w", name, os.ErrNotExist)
	}
	host, err := netlink.LinkByName(hostIf)
	if err != nil {
		return nil, fmt.Errorf("netns: %s: %w", hostIf, os.ErrNotExist)
	}
	if host.Attrs().Alias != c.AliasPrefix+id {
		return nil, fmt.Errorf("netns: %s belongs to %q, not %q", hostIf, host.Attrs().Alias, c.AliasPrefix+id)
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return netlink.AddrList(host, netlink.FAMILY_V4) })
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP.To4())
		ones, _ := a.Mask.Size()
		if ok && ones == 30 && c.Pool.Contains(ip) {
			return &Link{ID: id, NetnsName: name, NetnsPath: path, HostIf: hostIf, Gateway: ip,
				Addr: netip.PrefixFrom(ip.Next(), 30)}, nil
		}
	}
	return nil, fmt.Errorf("netns: %s has no address in %s", hostIf, c.Pool)
}

// Delete removes the sandbox's host veth (which takes its peer with it) and
// its namespace mount. Deleting what is not there is not an error.
func (c Config) Delete(id string) error {
	if err := c.defaults(); err != nil {
		return err
	}
	if err := ValidID(id); err != nil {
		return err
	}
	_, path, hostIf := c.names(id)
	var errs []error
	if host, err := netlink.LinkByName(hostIf); err == nil {
		if a := host.Attrs().Alias; a == c.AliasPrefix+id || a == "" {
			if err := netlink.LinkDel(host); err != nil && !errors.Is(err, unix.ENODEV) {
				errs = append(errs, fmt.Errorf("netns: deleting %s: %w", hostIf, err))
			}
		}
	}
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("netns: unmounting %s: %w", path, err))
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("netns: %w", err))
	}
	return errors.Join(errs...)
}

// List returns the ids of every sandbox that has a namespace or a host veth
// of this configuration. Names of other configurations are never returned,
// even when this one's prefix starts theirs (see Config.NamePrefix).
func (c Config) List() ([]string, error) {
	if err := c.defaults(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	entries, err := os.ReadDir(c.Dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("netns: %w", err)
	}
	for _, e := range entries {
		if id, ok := strings.CutPrefix(e.Name(), c.NamePrefix); ok && ValidID(id) == nil {
			seen[id] = true
		}
	}
	links, err := retryDump(netlink.LinkList)
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	for _, l := range links {
		a := l.Attrs()
		if !strings.HasPrefix(a.Name, c.LinkPrefix) {
			continue
		}
		if id, ok := strings.CutPrefix(a.Alias, c.AliasPrefix); ok && ValidID(id) == nil && c.HostIfName(id) == a.Name {
			seen[id] = true
		}
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	return ids, nil
}

// Foreign returns the host links that start with this configuration's
// LinkPrefix but whose alias names another configuration: another Runtime
// instance uses the same prefix, and the two would drop each other's
// traffic (see Config.LinkPrefix). Links with no alias yet (being created)
// are not counted.
func (c Config) Foreign() ([]string, error) {
	if err := c.defaults(); err != nil {
		return nil, err
	}
	links, err := retryDump(netlink.LinkList)
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	var out []string
	for _, l := range links {
		a := l.Attrs()
		if strings.HasPrefix(a.Name, c.LinkPrefix) && a.Alias != "" && !strings.HasPrefix(a.Alias, c.AliasPrefix) {
			out = append(out, a.Name+" ("+a.Alias+")")
		}
	}
	return out, nil
}

// allocate picks a free /30 in the pool: the first free one from a place
// that depends on the id, skipping every /30 that overlaps an address on
// any host interface (other sandboxes, other Runtime instances, anything).
func (c Config) allocate(id string) (gw netip.Addr, sandbox netip.Prefix, err error) {
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return netip.Addr{}, netip.Prefix{}, fmt.Errorf("netns: %w", err)
	}
	used := map[uint32]bool{}
	base := binary.BigEndian.Uint32(c.Pool.Masked().Addr().AsSlice())
	blocks := uint32(1) << (30 - c.Pool.Bits())
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP.To4())
		if !ok || !c.Pool.Contains(ip) {
			continue
		}
		used[(binary.BigEndian.Uint32(ip.AsSlice())-base)/4] = true
	}
	sum := sha256.Sum256([]byte(id))
	start := binary.BigEndian.Uint32(sum[:4]) % blocks
	for i := uint32(0); i < blocks; i++ {
		b := (start + i) % blocks
		if used[b] {
			continue
		}
		var g [4]byte
		binary.BigEndian.PutUint32(g[:], base+b*4+1)
		gw = netip.AddrFrom4(g)
		return gw, netip.PrefixFrom(gw.Next(), 30), nil
	}
	return netip.Addr{}, netip.Prefix{}, fmt.Errorf("netns: no free /30 left in %s", c.Pool)
}

// newNamed creates a network namespace and bind-mounts it at path. The
// namespace is entered on a dedicated OS thread that is never handed back
// to the Go scheduler (the goroutine exits locked, so the thread ends), so
// no other goroutine can run in the new namespace by accident.
func newNamed(dir, path string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return err
	}
	_ = f.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread dies with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(src, path, "none", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("bind mount: %w", err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		_ = os.Remove(path)
		return err
	}
	return nil
}

// dumpRetries bounds how often a netlink dump is sent again when links or
// addresses changing meanwhile interrupted it (netlink.ErrDumpInterrupted:
// the answer may be incomplete). Other servers' sandboxes come and go on
// the same host all the time.
const dumpRetries = 20

// retryDump runs a netlink dump until it is not interrupted (at most
// dumpRetries times; the last error is returned).
func retryDump[T any](dump func() (T, error)) (T, error) {
	var v T
	var err error
	for range dumpRetries {
		if v, err = dump(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, err
}

// isNsMount reports whether path is a mounted network namespace.
func isNsMount(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	return st.Type == unix.NSFS_MAGIC
}
