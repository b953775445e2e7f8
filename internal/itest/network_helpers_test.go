package itest

import (
	"net"
	"os"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/egress/firewall"
	"withruntime.dev/runtime/internal/egress/netns"
	"withruntime.dev/runtime/internal/server"
)

// networkLeftovers lists the namespaces and host veths of a server's
// egress configuration that remain.
func networkLeftovers(cfg server.EgressConfig) []string {
	var left []string
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if id, ok := strings.CutPrefix(e.Name(), cfg.Name+"-"); ok && netns.ValidID(id) == nil {
			left = append(left, "namespace "+e.Name())
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if strings.HasPrefix(i.Name, cfg.LinkPrefix) {
			left = append(left, "veth "+i.Name)
		}
	}
	// A server closed with no sandbox left deletes its table.
	if fw, err := firewall.New(cfg.Name, cfg.LinkPrefix); err == nil {
		if ok, _ := fw.Exists(); ok {
			left = append(left, "nftables table "+cfg.Name)
		}
	}
	return left
}

// destroyEgressTable removes a test server's nftables table, should a
// failed test have left one (a server whose sandboxes keep running keeps it
// across restarts).
func destroyEgressTable(t *testing.T, cfg server.EgressConfig) {
	fw, err := firewall.New(cfg.Name, cfg.LinkPrefix)
	if err != nil {
		t.Errorf("egress table %s: %v", cfg.Name, err)
		return
	}
	if err := fw.Destroy(); err != nil {
		t.Errorf("egress table %s: %v", cfg.Name, err)
	}
}
