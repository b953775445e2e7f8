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
