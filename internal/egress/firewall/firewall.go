// Package firewall holds the host's nftables rules for sandbox links, made
// with the nftables netlink library (no nft scripts).
//
// One inet table per Manager:
//
//	table inet <name> {
//	  map nat_links    { type ifname : verdict }   # host veth -> jump nat_<veth>
//	  map filter_links { type ifname : verdict }   # host veth -> jump filter_<veth>
//	  chain prerouting_nat    { type nat hook prerouting priority dstnat; iifname vmap @nat_links }
//	  chain prerouting_filter { type filter hook prerouting priority filter;
//	                            iifname vmap @filter_links; iifname "<prefix>*" drop }
//	  chain nat_<veth> {                                 # one per sandbox
//	    meta nfproto ipv4 udp dport 53 redirect to :<dns udp>
//	    meta nfproto ipv4 tcp dport 53 redirect to :<dns tcp>
//	    meta nfproto ipv4 tcp dport { 80, 443 } redirect to :<proxy>
//	  }
//	  chain filter_<veth> {
//	    udp dport <dns udp> limit rate over <DNSRate>/second burst <DNSBurst> packets drop
//	    ct state established,related accept
//	    ip daddr <gateway> udp dport <dns udp> accept
//	    ip daddr <gateway> tcp dport { <dns tcp>, <proxy> } accept
//	    meta l4proto tcp reject with tcp reset
//	    reject with icmpx admin-prohibited
//	  }
//	}
//
// Everything is filtered in prerouting, before the routing decision, so
// nothing from a sandbox is ever forwarded (whatever the host's ip_forward)
// and nothing reaches the host's own services except the sandbox's DNS and
// proxy listeners on its gateway address. Redirect (to the address of the
// incoming interface, the gateway) happens first, at dstnat priority.
// Rejects answer at once, so blocked clients fail fast instead of timing out.
package firewall

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

const (
	natMap       = "nat_links"
	filterMap    = "filter_links"
	natBase      = "prerouting_nat"
	filterBase   = "prerouting_filter"
	natPrefix    = "nat_"
	filterPrefix = "filter_"
	ifNameSize   = 16
)

// Rules are one sandbox link's rules.
type Rules struct {
	// IfName is the host end of the sandbox's veth.
	IfName string
	// Gateway is the host end's address, where the listeners are bound.
	Gateway netip.Addr
	// DNSUDPPort, DNSTCPPort and ProxyPort are the sandbox's listeners on
	// the gateway address.
	DNSUDPPort, DNSTCPPort, ProxyPort uint16
	// DNSRate, when set, caps the sandbox's DNS packets over UDP in the
	// kernel, in packets per second with a burst of DNSBurst: the ones past
	// it are dropped before the DNS server reads them, so a flood costs the
	// server's process nothing beyond the rate.
	DNSRate  uint64
	DNSBurst uint32
}

// Firewall manages one nftables table. Its methods are safe for concurrent use.
type Firewall struct {
	table    *nftables.Table
	ifPrefix string
	mu       sync.Mutex
}

// New returns the firewall for table name (inet family). Packets from any
// interface whose name starts with ifPrefix and that has no rules of its own
// are dropped.
func New(table, ifPrefix string) (*Firewall, error) {
	if table == "" || len(table) > 200 {
		return nil, fmt.Errorf("firewall: bad table name %q", table)
	}
	if ifPrefix == "" || len(ifPrefix) >= ifNameSize {
		return nil, fmt.Errorf("firewall: bad interface prefix %q", ifPrefix)
	}
	return &Firewall{
		table:    &nftables.Table{Family: nftables.TableFamilyINet, Name: table},
		ifPrefix: ifPrefix,
	}, nil
}

// Table returns the table's name.
func (f *Firewall) Table() string { return f.table.Name }

func (f *Firewall) maps() (nat, filter *nftables.Set) {
	nat = &nftables.Set{Table: f.table, Name: natMap, IsMap: true, KeyType: nftables.TypeIFName, KeyByteOrder: binaryutil.NativeEndian, DataType: nftables.TypeVerdict}
	filter = &nftables.Set{Table: f.table, Name: filterMap, IsMap: true, KeyType: nftables.TypeIFName, KeyByteOrder: binaryutil.NativeEndian, DataType: nftables.TypeVerdict}
	return nat, filter
}

// Init creates the table, its maps and base chains, or brings them back to
// their definition when they exist (sandbox chains are kept). Idempotent.
func (f *Firewall) Init() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	c.AddTable(f.table)
	nat, filter := f.maps()
	if err := c.AddSet(nat, nil); err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	if err := c.AddSet(filter, nil); err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	accept := nftables.ChainPolicyAccept
	natChain := c.AddChain(&nftables.Chain{
		Name: natBase, Table: f.table, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest, Policy: &accept,
	})
	filterChain := c.AddChain(&nftables.Chain{
		Name: filterBase, Table: f.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityFilter, Policy: &accept,
	})
	c.FlushChain(natChain)
	c.FlushChain(filterChain)
	c.AddRule(&nftables.Rule{Table: f.table, Chain: natChain, Exprs: vmapLookup(nat)})
	c.AddRule(&nftables.Rule{Table: f.table, Chain: filterChain, Exprs: vmapLookup(filter)})
	c.AddRule(&nftables.Rule{Table: f.table, Chain: filterChain, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(f.ifPrefix)},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("firewall: creating table %s: %w", f.table.Name, err)
	}
	return nil
}

func vmapLookup(m *nftables.Set) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: m.Name, SetID: m.ID, DestRegister: 0, IsDestRegSet: true},
	}
}

func ifKey(name string) []byte {
	b := make([]byte, ifNameSize)
	copy(b, name)
	return b
}

func port(p uint16) []byte {
	b := make([]byte, 2)
	binary.BigEndian.PutUint16(b, p)
	return b
}

// Add installs (or replaces) one sandbox link's rules atomically.
func (f *Firewall) Add(r Rules) error {
	if r.IfName == "" || len(r.IfName) >= ifNameSize || !strings.HasPrefix(r.IfName, f.ifPrefix) {
		return fmt.Errorf("firewall: bad interface name %q", r.IfName)
	}
	if !r.Gateway.Is4() || r.DNSUDPPort == 0 || r.DNSTCPPort == 0 || r.ProxyPort == 0 {
		return fmt.Errorf("firewall: incomplete rules for %s", r.IfName)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	natChain := c.AddChain(&nftables.Chain{Name: natPrefix + r.IfName, Table: f.table})
	filterChain := c.AddChain(&nftables.Chain{Name: filterPrefix + r.IfName, Table: f.table})
	c.FlushChain(natChain)
	c.FlushChain(filterChain)

	redirect := func(proto byte, dport, to uint16) {
		c.AddRule(&nftables.Rule{Table: f.table, Chain: natChain, Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: port(dport)},
			&expr.Immediate{Register: 1, Data: port(to)},
			&expr.Redir{RegisterProtoMin: 1},
		}})
	}
	redirect(unix.IPPROTO_UDP, 53, r.DNSUDPPort)
	redirect(unix.IPPROTO_TCP, 53, r.DNSTCPPort)
	redirect(unix.IPPROTO_TCP, 80, r.ProxyPort)
	redirect(unix.IPPROTO_TCP, 443, r.ProxyPort)

	gw := r.Gateway.As4()
	acceptTo := func(proto byte, dport uint16) {
		c.AddRule(&nftables.Rule{Table: f.table, Chain: filterChain, Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: gw[:]},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: port(dport)},
			&expr.Verdict{Kind: expr.VerdictAccept},
		}})
	}
	if r.DNSRate > 0 {
		// Before the established rule: a resolver sending every query
		// from one port is one conntrack flow.
		c.AddRule(&nftables.Rule{Table: f.table, Chain: filterChain, Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: port(r.DNSUDPPort)},
			&expr.Limit{Type: expr.LimitTypePkts, Rate: r.DNSRate, Unit: expr.LimitTimeSecond, Burst: max(r.DNSBurst, 1), Over: true},
			&expr.Verdict{Kind: expr.VerdictDrop},
		}})
	}
	c.AddRule(&nftables.Rule{Table: f.table, Chain: filterChain, Exprs: []expr.Any{
		&expr.Ct{Key: expr.CtKeySTATE, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binary.NativeEndian.AppendUint32(nil, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED),
			Xor:  binary.NativeEndian.AppendUint32(nil, 0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, 0)},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}})
	acceptTo(unix.IPPROTO_UDP, r.DNSUDPPort)
	acceptTo(unix.IPPROTO_TCP, r.DNSTCPPort)
	acceptTo(unix.IPPROTO_TCP, r.ProxyPort)
	c.AddRule(&nftables.Rule{Table: f.table, Chain: filterChain, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Reject{Type: unix.NFT_REJECT_TCP_RST},
	}})
	c.AddRule(&nftables.Rule{Table: f.table, Chain: filterChain, Exprs: []expr.Any{
		&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED},
	}})

	nat, filter := f.maps()
	if err := c.SetAddElements(nat, []nftables.SetElement{{Key: ifKey(r.IfName), VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: natChain.Name}}}); err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	if err := c.SetAddElements(filter, []nftables.SetElement{{Key: ifKey(r.IfName), VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: filterChain.Name}}}); err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("firewall: rules for %s: %w", r.IfName, err)
	}
	return nil
}

// Remove deletes one link's rules. Removing rules that are not there is not
// an error.
func (f *Firewall) Remove(ifName string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	// Add writes a link's two map keys and two chains in one batch, and
	// nftables applies a batch whole or not at all, so a link with rules
	// has all four: one batch deletes them without listing anything (a
	// listing is of every inet chain and map key on the host, so it costs
	// O(sandboxes) per removal). When that batch fails (the link has no
	// rules, or only some), the careful way below lists what is there.
	if err := f.removeAll(ifName); err == nil {
		return nil
	}
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	// One listing of the chains (every inet table's: O(sandboxes on the
	// host)) tells whether the link has rules and which chains go.
	chains, err := f.chains(c)
	if err != nil {
		return err
	}
	var mine []string
	for _, ch := range chains {
		if ch.Name == natPrefix+ifName || ch.Name == filterPrefix+ifName {
			mine = append(mine, ch.Name)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	nat, filter := f.maps()
	// Deleting a key that is not in a map fails the whole batch, so only
	// keys that are there are deleted.
	for _, m := range []*nftables.Set{nat, filter} {
		elems, err := c.GetSetElements(m)
		if err != nil {
			return fmt.Errorf("firewall: %w", err)
		}
		for _, e := range elems {
			if strings.TrimRight(string(e.Key), "\x00") == ifName {
				if err := c.SetDeleteElements(m, []nftables.SetElement{{Key: ifKey(ifName)}}); err != nil {
					return fmt.Errorf("firewall: %w", err)
				}
			}
		}
	}
	for _, name := range mine {
		ch := &nftables.Chain{Name: name, Table: f.table}
		c.FlushChain(ch)
		c.DelChain(ch)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("firewall: removing rules for %s: %w", ifName, err)
	}
	return nil
}

// Links returns the interface names that have rules.
func (f *Firewall) Links() ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.links()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	return out, nil
}

// removeAll deletes ifName's two map keys and two chains in one batch,
// which fails whole if any of them is missing.
func (f *Firewall) removeAll(ifName string) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	nat, filter := f.maps()
	for _, m := range []*nftables.Set{nat, filter} {
		if err := c.SetDeleteElements(m, []nftables.SetElement{{Key: ifKey(ifName)}}); err != nil {
			return err
		}
	}
	for _, name := range []string{natPrefix + ifName, filterPrefix + ifName} {
		ch := &nftables.Chain{Name: name, Table: f.table}
		c.FlushChain(ch)
		c.DelChain(ch)
	}
	return c.Flush()
}

// chains lists the table's regular chains (no base chains); none when the
// table is not there.
func (f *Firewall) chains(c *nftables.Conn) ([]*nftables.Chain, error) {
	all, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, fmt.Errorf("firewall: %w", err)
	}
	var out []*nftables.Chain
	for _, ch := range all {
		if ch.Table.Name == f.table.Name && ch.Hooknum == nil {
			out = append(out, ch)
		}
	}
	return out, nil
}

func (f *Firewall) links() (map[string]bool, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("firewall: %w", err)
	}
	out := map[string]bool{}
	chains, err := f.chains(c)
	if err != nil {
		return nil, err
	}
	for _, ch := range chains {
		if n, ok := strings.CutPrefix(ch.Name, filterPrefix); ok {
			out[n] = true
		} else if n, ok := strings.CutPrefix(ch.Name, natPrefix); ok {
			out[n] = true
		}
	}
	return out, nil
}

// Exists reports whether the table is there.
func (f *Firewall) Exists() (bool, error) {
	c, err := nftables.New()
	if err != nil {
		return false, fmt.Errorf("firewall: %w", err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, fmt.Errorf("firewall: %w", err)
	}
	for _, t := range tables {
		if t.Name == f.table.Name {
			return true, nil
		}
	}
	return false, nil
}

// Destroy deletes the whole table. Destroying a table that is not there is
// not an error.
func (f *Firewall) Destroy() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ok, err := f.Exists()
	if err != nil || !ok {
		return err
	}
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	c.DelTable(f.table)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("firewall: deleting table %s: %w", f.table.Name, err)
	}
	return nil
}
