package firewall

import (
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/google/nftables"
)

func uniqueName(t *testing.T) (table, prefix string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("firewall tests change nftables and need root")
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return "wrtest_fw_" + h, "wf" + h[:4]
}

func TestTableLifecycle(t *testing.T) {
	table, prefix := uniqueName(t)
	f, err := New(table, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Destroy() })
	for range 2 { // Init is idempotent
		if err := f.Init(); err != nil {
			t.Fatal(err)
		}
	}
	r := Rules{IfName: prefix + "0001", Gateway: netip.MustParseAddr("100.127.0.1"), DNSUDPPort: 40001, DNSTCPPort: 40002, ProxyPort: 40003}
	for range 2 { // Add replaces
		if err := f.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	r2 := r
	r2.IfName = prefix + "0002"
	if err := f.Add(r2); err != nil {
		t.Fatal(err)
	}
	if err := f.Init(); err != nil { // re-init keeps sandbox rules
		t.Fatal(err)
	}
	links, err := f.Links()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(links)
	if !slices.Equal(links, []string{r.IfName, r2.IfName}) {
		t.Fatalf("Links = %v", links)
	}
	for range 2 { // Remove is idempotent
		if err := f.Remove(r.IfName); err != nil {
			t.Fatal(err)
		}
	}
	if links, _ := f.Links(); !slices.Equal(links, []string{r2.IfName}) {
		t.Fatalf("after Remove: Links = %v", links)
	}
	if _, err := New(table, ""); err == nil {
		t.Error("empty prefix accepted")
	}
	if err := f.Add(Rules{IfName: "eth0", Gateway: r.Gateway, DNSUDPPort: 1, DNSTCPPort: 1, ProxyPort: 1}); err == nil {
		t.Error("interface outside the prefix accepted")
	}
	for range 2 {
		if err := f.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := f.Exists(); err != nil || ok {
		t.Fatalf("table still there after Destroy: %v %v", ok, err)
	}
}

// TestRemovePartial: Remove deletes a link's rules in one batch when all of
// them are there, and still deletes what is left when some are not (a batch
// that names a missing map key fails whole).
func TestRemovePartial(t *testing.T) {
	table, prefix := uniqueName(t)
	f, err := New(table, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Destroy() })
	if err := f.Init(); err != nil {
		t.Fatal(err)
	}
	rules := func(name string) Rules {
		return Rules{IfName: name, Gateway: netip.MustParseAddr("100.127.0.1"), DNSUDPPort: 40001, DNSTCPPort: 40002, ProxyPort: 40003}
	}
	a, b := prefix+"000a", prefix+"000b"
	for _, n := range []string{a, b} {
		if err := f.Add(rules(n)); err != nil {
			t.Fatal(err)
		}
	}
	// Link a loses its nat map key behind the firewall's back.
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	nat, _ := f.maps()
	if err := c.SetDeleteElements(nat, []nftables.SetElement{{Key: ifKey(a)}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{a, b} {
		if err := f.Remove(n); err != nil {
			t.Fatalf("Remove %s: %v", n, err)
		}
	}
	if links, err := f.Links(); err != nil || len(links) != 0 {
		t.Fatalf("after Remove: Links = %v, %v; want none", links, err)
	}
	_, filter := f.maps()
	for _, m := range []*nftables.Set{nat, filter} {
		elems, err := c.GetSetElements(m)
		if err != nil {
			t.Fatal(err)
		}
		if len(elems) != 0 {
			t.Fatalf("map %s keeps %d keys after Remove", m.Name, len(elems))
		}
	}
}
