package firewall

import (
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"os"
	"slices"
	"testing"
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
