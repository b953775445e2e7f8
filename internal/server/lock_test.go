package server

import (
	"strings"
	"testing"
)

// TestEgressNames: the default data directory keeps the default names; any
// other gets its own, stable per directory and never starting like the
// default's veths ("wr").
func TestEgressNames(t *testing.T) {
	var def EgressConfig
	EgressNames(&def, DefaultDataDir)
	if def.Name != "" || def.LinkPrefix != "" {
		t.Errorf("default data dir: %+v", def)
	}
	var a, a2, b EgressConfig
	EgressNames(&a, "/tmp/one")
	EgressNames(&a2, "/tmp/one/")
	EgressNames(&b, "/tmp/two")
	if a.Name == "" || a.Name != a2.Name || a.LinkPrefix != a2.LinkPrefix || a.Name == b.Name || a.LinkPrefix == b.LinkPrefix {
		t.Errorf("names: %+v %+v %+v", a, a2, b)
	}
	if len(a.LinkPrefix) > 6 || strings.HasPrefix(a.LinkPrefix, "wr") {
		t.Errorf("link prefix %q", a.LinkPrefix)
	}
	set := EgressConfig{Name: "mine", LinkPrefix: "m"}
	EgressNames(&set, "/tmp/one")
	if set.Name != "mine" || set.LinkPrefix != "m" {
		t.Errorf("configured names were replaced: %+v", set)
	}
}

// TestLockNames: two servers with the same egress name or link prefix (a
// hash collision of two data directories, or names configured twice) are
// refused, with the holder named; the lock goes with its holder.
func TestLockNames(t *testing.T) {
	namesDir = t.TempDir()
	a, err := lockNames(EgressConfig{Name: "withruntime-aaaa", LinkPrefix: "waaaa"}, "/tmp/a")
	if err != nil || len(a) != 2 {
		t.Fatalf("first server: %v", err)
	}
	for _, cfg := range []EgressConfig{{Name: "withruntime-aaaa", LinkPrefix: "wbbbb"}, {Name: "withruntime-bbbb", LinkPrefix: "waaaa"}} {
		if _, err := lockNames(cfg, "/tmp/b"); err == nil || !strings.Contains(err.Error(), "data directory /tmp/a") {
			t.Errorf("second server with %+v: %v", cfg, err)
		}
	}
	b, err := lockNames(EgressConfig{Name: "withruntime-bbbb", LinkPrefix: "wbbbb"}, "/tmp/b")
	if err != nil {
		t.Fatalf("a server with names of its own: %v", err)
	}
	closeAll(b)
	closeAll(a)
	if c, err := lockNames(EgressConfig{Name: "withruntime-aaaa", LinkPrefix: "waaaa"}, "/tmp/c"); err != nil {
		t.Errorf("after the first server closed: %v", err)
	} else {
		closeAll(c)
	}
	if none, err := lockNames(EgressConfig{Disabled: true}, "/tmp/d"); err != nil || none != nil {
		t.Errorf("networks disabled: %v %v", none, err)
	}
}
