package netns

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
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
