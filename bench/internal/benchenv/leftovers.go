package benchenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"withruntime.dev/runtime/internal/driver/gvisor"
	"withruntime.dev/runtime/internal/egress"
	"withruntime.dev/runtime/internal/egress/firewall"
)

// Check is one leak check: what was looked at and what was left.
type Check struct {
	Name string   `json:"name"`
	Left []string `json:"left"`
}

// PrintChecks writes one line per check: "nothing left" or what was.
func PrintChecks(w io.Writer, checks []Check) {
	for _, c := range checks {
		if len(c.Left) == 0 {
			fmt.Fprintf(w, "leak check (%s): nothing left\n", c.Name)
		} else {
			fmt.Fprintf(w, "leak check (%s): LEFT %s\n", c.Name, strings.Join(c.Left, ", "))
		}
	}
}

// ServerLeftovers lists what a server with data directory dataDir left of
// its sandboxes: runsc containers in its root, directories under its
// sandboxes directory, and the cgroups of ids (every sandbox id it ever
// had: the cgroup parent is shared with other servers on the host, so
// only these are looked for).
func ServerLeftovers(runsc, dataDir string, ids []string) []string {
	var left []string
	out, _ := exec.Command(runsc, "--root", filepath.Join(dataDir, "gvisor", "runsc"), "list", "--quiet").Output()
	for _, id := range strings.Fields(string(out)) {
		left = append(left, "runsc container "+id)
	}
	entries, _ := os.ReadDir(filepath.Join(dataDir, "gvisor", "sandboxes"))
	for _, en := range entries {
		left = append(left, "sandbox directory "+en.Name())
	}
	for _, id := range ids {
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/withruntime/" + id)
		for _, d := range dirs {
			left = append(left, "cgroup "+d)
		}
	}
	return left
}

// NetLeftovers lists the network namespaces (egressName-*) and host veths
// (linkPrefix*) of a server's sandbox networks, and, with table, its
// nftables table, which a closed server keeps.
func NetLeftovers(egressName, linkPrefix string, table bool) []string {
	var left []string
	entries, _ := os.ReadDir("/run/netns")
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), egressName+"-") {
			left = append(left, "network namespace "+en.Name())
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if strings.HasPrefix(i.Name, linkPrefix) {
			left = append(left, "link "+i.Name)
		}
	}
	if table {
		if fw, err := firewall.New(egressName, linkPrefix); err == nil {
			if ok, _ := fw.Exists(); ok {
				left = append(left, "nftables table inet "+egressName)
			}
		}
	}
	return left
}

// DriverIDs lists the sandboxes a data directory's driver knows: runsc
// containers and sandbox directories.
func DriverIDs(runsc, dataDir string) []string {
	var ids []string
	out, _ := exec.Command(runsc, "--root", filepath.Join(dataDir, "gvisor", "runsc"), "list", "--quiet").Output()
	ids = append(ids, strings.Fields(string(out))...)
	entries, _ := os.ReadDir(filepath.Join(dataDir, "gvisor", "sandboxes"))
	for _, en := range entries {
		ids = append(ids, en.Name())
	}
	return ids
}

// SweepServer destroys every sandbox under a (closed or killed) server's
// data directory, with its cgroups, and the namespaces, veths and
// nftables table of its sandbox networks; it returns every error.
func SweepServer(ctx context.Context, runsc, dataDir, egressName, linkPrefix string) error {
	var errList []error
	state := filepath.Join(dataDir, "gvisor")
	if _, err := os.Stat(state); err == nil {
		d, err := gvisor.New(gvisor.Config{Runsc: runsc, AgentBinary: "/dev/null", StateDir: state})
		if err != nil {
			errList = append(errList, err)
		} else {
			ids, _ := d.List(ctx)
			for _, id := range ids {
				if err := d.Destroy(ctx, id); err != nil {
					errList = append(errList, err)
				}
			}
			_ = d.Close()
		}
	}
	if m, err := egress.New(egress.Config{Name: egressName, LinkPrefix: linkPrefix}); err != nil {
		errList = append(errList, err)
	} else if err := m.Destroy(ctx); err != nil {
		errList = append(errList, err)
	}
	return errors.Join(errList...)
}
