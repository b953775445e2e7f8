package netns

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
)

func testConfig(t *testing.T) Config {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("netns tests create network namespaces and need root")
	}
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return Config{
		NamePrefix:  "wrtest-ns" + h + "-",
		LinkPrefix:  "wn" + h,
		AliasPrefix: "wrtest-ns" + h + ":",
		Pool:        netip.MustParsePrefix("100.127.252.0/22"),
	}
}

func TestCreateLookupDelete(t *testing.T) {
	c := testConfig(t)
	t.Cleanup(func() { _ = c.Delete("a"); _ = c.Delete("b") })
	a, err := c.Create("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Create("b")
	if err != nil {
		t.Fatal(err)
	}
	if a.Gateway == b.Gateway || !c.Pool.Contains(a.Gateway) || a.Addr.Addr() != a.Gateway.Next() {
		t.Fatalf("links %+v %+v", a, b)
	}
	// Create again adopts what is there.
	again, err := c.Create("a")
	if err != nil || *again != *a {
		t.Fatalf("re-create: %+v %v, want %+v", again, err, a)
	}
	ids, err := c.List()
	slices.Sort(ids)
	if err != nil || !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("List = %v %v", ids, err)
	}
	// A leftover namespace whose veth is gone is replaced by a new one.
	host, err := netlink.LinkByName(b.HostIf)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkDel(host); err != nil {
		t.Fatal(err)
	}
	if b2, err := c.Create("b"); err != nil || b2.NetnsPath != b.NetnsPath {
		t.Fatalf("re-create after losing the veth: %+v %v", b2, err)
	}
	if _, err := c.Lookup("b"); err != nil {
		t.Fatalf("Lookup after re-create: %v", err)
	}
	for range 2 {
		if err := c.Delete("a"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Lookup("a"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Lookup after Delete: %v", err)
	}
	if _, err := os.Stat(a.NetnsPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("namespace file left: %v", err)
	}
	if _, err := net.InterfaceByName(a.HostIf); err == nil {
		t.Errorf("veth %s left", a.HostIf)
	}
	if err := c.Delete("b"); err != nil {
		t.Fatal(err)
	}
	if ids, _ := c.List(); len(ids) != 0 {
		t.Errorf("List after deleting all = %v", ids)
	}
	if _, err := c.Create("bad/id"); err == nil {
		t.Error("bad id accepted")
	}
}

// TestListOnlyOwnNames (C25): a configuration whose name prefix starts
// another's ("withruntime-" and "withruntime-1a2b3c4d-", the default data
// directory's server and another's) never lists, and so never cleans up,
// the other's namespaces and links.
func TestListOnlyOwnNames(t *testing.T) {
	short := testConfig(t)
	long := short
	long.NamePrefix = short.NamePrefix + "1a2b3c4d-"
	long.AliasPrefix = short.NamePrefix + "1a2b3c4d:"
	long.LinkPrefix = "wm" + short.LinkPrefix[2:]
	t.Cleanup(func() { _ = long.Delete("sbx_x") })
	l, err := long.Create("sbx_x")
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := short.List(); err != nil || len(ids) != 0 {
		t.Fatalf("%q lists %v (%v): another configuration's names are not its own", short.NamePrefix, ids, err)
	}
	if ids, err := long.List(); err != nil || !slices.Equal(ids, []string{"sbx_x"}) {
		t.Fatalf("%q lists %v (%v), want its own sandbox", long.NamePrefix, ids, err)
	}
	if _, err := long.Lookup("sbx_x"); err != nil {
		t.Fatalf("the other configuration's link: %v", err)
	}
	// Ids that would make names ambiguous are refused; so are prefixes
	// that do not end in the separators ids never hold.
	for _, id := range []string{"1a2b3c4d-sbx_x", "a:b"} {
		if err := ValidID(id); err == nil {
			t.Errorf("ValidID(%q) accepted", id)
		}
	}
	bad := short
	bad.NamePrefix = "wrtest"
	if _, err := bad.List(); err == nil {
		t.Errorf("NamePrefix %q accepted", bad.NamePrefix)
	}
	if _, err := netlink.LinkByName(l.HostIf); err != nil {
		t.Errorf("veth %s: %v", l.HostIf, err)
	}
	// A configuration with the other's link prefix sees its links as
	// foreign (the two would drop each other's traffic); the owner does not.
	if f, err := long.Foreign(); err != nil || len(f) != 0 {
		t.Errorf("owner's Foreign = %v %v", f, err)
	}
	clash := short
	clash.LinkPrefix = long.LinkPrefix
	if f, err := clash.Foreign(); err != nil || len(f) != 1 || !strings.HasPrefix(f[0], l.HostIf) {
		t.Errorf("Foreign with a clashing prefix = %v %v, want %s", f, err, l.HostIf)
	}
}
