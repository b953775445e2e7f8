package gvisor

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"withruntime.dev/runtime/internal/driver"
)

// TestMakeHostDir: the agent is a hard link to the driver's copy (one
// inode, so one page cache for every sandbox), etc/ holds hosts, the
// network's resolv.conf and CA bundle (only those given), and
// resolvConfPath finds the new layout and the old one (a sandbox booted
// before the host directory existed).
func TestMakeHostDir(t *testing.T) {
	state := t.TempDir()
	d := &Driver{agentDir: filepath.Join(state, "agent")}
	if err := os.MkdirAll(d.agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.agentDir, agentName), []byte("agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		n    *driver.Network
		want []string
	}{
		{"none", nil, []string{"hosts"}},
		{"network", &driver.Network{ResolvConf: "nameserver 100.64.0.1\n"}, []string{"hosts", "resolv.conf"}},
		{"secrets", &driver.Network{ResolvConf: "nameserver 100.64.0.1\n", CABundle: []byte("PEM")}, []string{"ca-certificates.crt", "hosts", "resolv.conf"}},
	} {
		dir := filepath.Join(state, "sandboxes", tc.name)
		host, err := d.makeHostDir(dir, filepath.Join(d.agentDir, agentName), tc.n)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var a, b syscall.Stat_t
		if syscall.Stat(filepath.Join(d.agentDir, agentName), &a) != nil || syscall.Stat(filepath.Join(host, agentName), &b) != nil || a.Ino != b.Ino {
			t.Errorf("%s: the agent is not a hard link of the driver's copy", tc.name)
		}
		entries, _ := os.ReadDir(filepath.Join(host, hostEtcDir))
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s: etc holds %v, want %v", tc.name, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: etc holds %v, want %v", tc.name, got, tc.want)
			}
		}
		if tc.n != nil {
			if p := resolvConfPath(dir); p != filepath.Join(host, hostEtcDir, resolvConfFile) {
				t.Errorf("%s: resolvConfPath %s", tc.name, p)
			} else if data, _ := os.ReadFile(p); string(data) != tc.n.ResolvConf {
				t.Errorf("%s: resolv.conf %q", tc.name, data)
			}
		}
	}
	old := filepath.Join(state, "sandboxes", "old")
	_ = os.MkdirAll(old, 0o700)
	if p := resolvConfPath(old); p != filepath.Join(old, resolvConfFile) {
		t.Errorf("a sandbox of the old layout: resolvConfPath %s", p)
	}
}

// TestMountHostDir: the host directory appears read-only inside the socket
// directory (a write through the mount fails, the files are the host's),
// the socket directory lets others pass but not list (0711), and
// unmounting the socket directory takes the inner mount with it. Needs
// root (mounts).
func TestMountHostDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	state := t.TempDir()
	d := &Driver{agentDir: filepath.Join(state, "agent")}
	_ = os.MkdirAll(d.agentDir, 0o755)
	if err := os.WriteFile(filepath.Join(d.agentDir, agentName), []byte("agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(state, "sandboxes", "sbx")
	sock := filepath.Join(dir, "sock")
	_ = os.MkdirAll(sock, 0o700)
	if _, err := d.makeHostDir(dir, filepath.Join(d.agentDir, agentName), &driver.Network{ResolvConf: "nameserver 100.64.0.1\n"}); err != nil {
		t.Fatal(err)
	}
	if err := mountSocketDir(sock, socketDirMode); err != nil {
		t.Fatal(err)
	}
	defer unmountSocketDir(sock)
	if err := mountHostDir(dir, sock); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(sock); err != nil || st.Mode().Perm() != 0o711 {
		t.Errorf("socket directory mode %v, %v; want 0711", st.Mode(), err)
	}
	inner := filepath.Join(sock, hostDirName)
	if !isMountPoint(inner) {
		t.Fatal("the host directory is not mounted in the socket directory")
	}
	if got, err := os.ReadFile(filepath.Join(inner, hostEtcDir, resolvConfFile)); err != nil || string(got) != "nameserver 100.64.0.1\n" {
		t.Errorf("resolv.conf through the mount: %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(inner, agentName), []byte("x"), 0o755); err == nil {
		t.Error("wrote the agent through the mount")
	}
	if err := os.WriteFile(filepath.Join(inner, hostEtcDir, "new"), []byte("x"), 0o644); err == nil {
		t.Error("created a file through the mount")
	}
	if got, _ := os.ReadFile(filepath.Join(d.agentDir, agentName)); string(got) != "agent" {
		t.Errorf("the driver's agent copy changed: %q", got)
	}
	if err := unmountSocketDir(sock); err != nil {
		t.Fatal(err)
	}
	if isMountPoint(sock) || isMountPoint(inner) {
		t.Error("a mount is left after unmounting the socket directory")
	}
}
