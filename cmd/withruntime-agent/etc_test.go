package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// An agent that is PID 1 of a PID namespace on a host's own filesystem
// (the Kubernetes tests' node double runs it so) must leave /etc alone:
// one such agent once appended the Runtime CA given by -trust to the
// host's CA bundle. The test runs it so, in a private mount namespace
// whose /etc is a copy in the test's directory (so a wrong agent can only
// change the copy) and whose /run/withruntime/host/etc offers the files
// LinkHostFiles would link, then checks the copy is as it was.
func TestPID1OnAHostLeavesEtcAlone(t *testing.T) {
	dir, agent := agentInNamespaces(t)

	// The /etc the agent will see: what it needs to run (users), and the
	// three files a sandbox's agent replaces or changes.
	etc := filepath.Join(dir, "etc")
	files := map[string]string{
		"hosts":                         "127.0.0.1 localhost # the host's own\n",
		"resolv.conf":                   "nameserver 127.0.0.53 # the host's own\n",
		"ssl/certs/ca-certificates.crt": "the host's own CA bundle\n",
	}
	for _, name := range []string{"passwd", "group"} {
		b, err := os.ReadFile(filepath.Join("/etc", name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
	}
	for name, body := range files {
		writeFile(t, filepath.Join(etc, name), body)
	}
	offered := filepath.Join(dir, "offered")
	for _, name := range []string{"hosts", "resolv.conf", "ca-certificates.crt"} {
		writeFile(t, filepath.Join(offered, name), "offered to a sandbox\n")
	}
	trust := filepath.Join(dir, "runtime-ca.pem")
	writeFile(t, trust, "-----BEGIN CERTIFICATE-----\nnot a host's\n-----END CERTIFICATE-----\n")

	sock := filepath.Join(dir, "a.sock")
	script := `set -e
mount --make-rprivate /
mount --bind "$1/etc" /etc
mount -t tmpfs tmpfs /run
mkdir -p /run/withruntime/host/etc
mount --bind "$1/offered" /run/withruntime/host/etc
exec "$0" -socket "$1/a.sock" -user root -workspace "$1/ws" -trust "$1/runtime-ca.pem"`
	cmd := exec.Command("unshare", "--pid", "--mount", "--fork", "--kill-child", "sh", "-c", script, agent, dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The agent changes /etc, if it does, before it listens.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the agent did not listen within 30 s: %s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// unshare forwards no signal; killed, it takes the agent with it
	// (--kill-child).
	_ = cmd.Process.Kill()
	_ = cmd.Wait()

	for name, want := range files {
		p := filepath.Join(etc, name)
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatalf("/etc/%s: %v", name, err)
		}
		if !fi.Mode().IsRegular() {
			t.Errorf("/etc/%s became %v, want the host's regular file", name, fi.Mode())
			continue
		}
		if got, _ := os.ReadFile(p); string(got) != want {
			t.Errorf("/etc/%s changed: %q, want %q", name, got, want)
		}
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
