package itest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/api"
)

// TestHostFilesReadOnlyAndOwn: /etc/hosts and /etc/resolv.conf come from
// the sandbox's host directory (/run/withruntime/host: a read-only host
// mount inside the socket directory, with the agent), linked by the agent
// at boot. Root inside cannot change the host's copies (nor the agent
// binary, a hard link shared by every sandbox) nor get rid of the mount;
// replacing its own /etc links changes its sandbox alone, and a second
// sandbox still reads the host's files.
func TestHostFilesReadOnlyAndOwn(t *testing.T) {
	e := newEnv(t)
	a, b := e.create(api.CreateSandboxRequest{}), e.create(api.CreateSandboxRequest{})
	res := e.sh(a.ID, "readlink /etc/hosts /etc/resolv.conf; getent hosts sandbox; grep -c nameserver /etc/resolv.conf")
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "/run/withruntime/host/etc/hosts\n/run/withruntime/host/etc/resolv.conf\n") ||
		!strings.Contains(res.Stdout, "127.0.1.1") || !strings.HasSuffix(res.Stdout, "1\n") {
		t.Fatalf("the sandbox's host files: %+v", res)
	}
	hostDir := filepath.Join(e.dataDir, "gvisor", "sandboxes", a.ID, "host")
	agentBefore, err := os.ReadFile(filepath.Join(hostDir, "withruntime-agent"))
	if err != nil {
		t.Fatal(err)
	}
	resolvBefore, err := os.ReadFile(filepath.Join(hostDir, "etc", "resolv.conf"))
	if err != nil {
		t.Fatal(err)
	}
	// The attack: write through the links and into the directory.
	for _, cmd := range []string{
		"echo 'nameserver 203.0.113.9' > /run/withruntime/host/etc/resolv.conf",
		"echo pwned > /etc/resolv.conf",
		"echo pwned > /run/withruntime/host/withruntime-agent",
		"truncate -s 0 /run/withruntime/host/withruntime-agent",
		"touch /run/withruntime/host/etc/new",
		"ln -s /etc/shadow /run/withruntime/host/etc/link",
		"rm -f /run/withruntime/host/etc/hosts",
		"rm -rf /run/withruntime/host",
	} {
		if res := e.rootSh(a.ID, cmd); res.ExitCode == 0 {
			t.Errorf("root inside could run %q: %+v", cmd, res)
		}
	}
	// gVisor answers a chmod there with success but changes nothing.
	e.rootSh(a.ID, "chmod 777 /run/withruntime/host/withruntime-agent /run/withruntime/host/etc/hosts")
	for _, p := range []string{"withruntime-agent", "etc/hosts"} {
		if st, err := os.Stat(filepath.Join(hostDir, p)); err != nil || st.Mode().Perm()&0o022 != 0 {
			t.Errorf("%s on the host: %v, %v", p, st.Mode(), err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(hostDir, "withruntime-agent")); string(got) != string(agentBefore) {
		t.Errorf("the agent binary on the host changed (%d bytes, was %d)", len(got), len(agentBefore))
	}
	if got, _ := os.ReadFile(filepath.Join(hostDir, "etc", "resolv.conf")); string(got) != string(resolvBefore) {
		t.Errorf("resolv.conf on the host changed: %q, was %q", got, resolvBefore)
	}
	entries, _ := os.ReadDir(filepath.Join(hostDir, "etc"))
	if len(entries) != 2 {
		t.Errorf("the host directory's etc holds %d entries, want hosts and resolv.conf", len(entries))
	}
	// Root may replace its own links: its sandbox only.
	if res := e.rootSh(a.ID, "rm /etc/resolv.conf && echo 'nameserver 203.0.113.9' > /etc/resolv.conf && cat /etc/resolv.conf"); res.ExitCode != 0 {
		t.Errorf("root replacing its own /etc/resolv.conf: %+v", res)
	}
	if res := e.sh(b.ID, "cat /etc/resolv.conf; readlink /etc/resolv.conf"); strings.Contains(res.Stdout, "203.0.113.9") ||
		!strings.Contains(res.Stdout, "/run/withruntime/host/etc/resolv.conf") {
		t.Errorf("another sandbox's resolv.conf: %+v", res)
	}
	// The sandbox user passes through the socket directory to the host
	// files, but may neither list it nor reach the agent (root's).
	for _, cmd := range []string{
		"ls /run/withruntime",
		"touch /run/withruntime/x",
		`python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect("/run/withruntime/agent.sock"); s.sendall(b"GET /health HTTP/1.0\r\n\r\n"); print(s.recv(100))'`,
	} {
		if res := e.sh(b.ID, cmd); res.ExitCode == 0 {
			t.Errorf("the sandbox user could run %q: %+v", cmd, res)
		}
	}
	if res := e.sh(a.ID, "echo ok"); res.Stdout != "ok\n" {
		t.Errorf("the agent after the attack: %+v", res)
	}
}
