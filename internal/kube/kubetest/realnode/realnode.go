// Package realnode starts a real Kubernetes node for tests: kubelet (built
// by scripts/k8s-bins.sh), Debian's containerd with gVisor's
// containerd-shim-runsc-v1 as the handler `runsc`, the CNI bridge plugins
// and a NetworkPolicy enforcer (sigs.k8s.io/kube-network-policies, built by
// scripts/k8s-bins.sh --node from test/kubernetes/bins/netpol). Pods really
// run, under gVisor, on a bridge with their own IPs, and their
// NetworkPolicies drop packets.
//
// The enforcer judges the first packet of each connection of a pod some
// NetworkPolicy selects on nftables' POSTROUTING hook (nfqueue), so it
// filters what a pod sends through the node (to other namespaces, other
// hosts), not what it sends to the node's own addresses (INPUT: the
// bridge's gateway, the node IP). Tests reach a "host outside" in a
// network namespace of their own, routed through the node.
//
// It only runs inside a network namespace of the test's own (the script
// runs the test binary under `unshare --net`), where it adds a dummy
// interface with a default route (kubelet wants a non-loopback node IP)
// (a veth pair) and the CNI bridge; the host's network is never touched. Images are made
// on the host and imported, or pulled from a registry the test serves in that namespace
// (Start's plainHTTP); the host reaches no outside registry.
package realnode

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"withruntime.dev/runtime/internal/kube/kubetest"
)

// ShimEnv names the directory holding containerd-shim-runsc-v1 (default:
// the control plane's binary directory).
const ShimEnv = "WITHRUNTIME_K8S_SHIM_DIR"

// ContainerdEnv names a directory holding containerd 2 and its ctr (built by
// scripts/k8s-bins.sh --node); without it Debian's containerd 1.6 runs,
// whose shim protocol today's gVisor shim no longer speaks.
const ContainerdEnv = "WITHRUNTIME_K8S_CONTAINERD_DIR"

// NodeIP is the node's address on its veth.
const NodeIP = "10.99.0.1"

// Node is a running node.
type Node struct {
	Name string
	dir  string
	sock string
	ctr  string
	v2   bool // containerd 2: configuration version 3
	// EnforcerReady is how long the NetworkPolicy enforcer took to set
	// its nftables rules.
	EnforcerReady time.Duration
}

// Start brings the node up and waits until it is Ready, importing images
// first. Containerd pulls any other image from a registry, and from each of
// plainHTTP (host:port, e.g. a registry the test serves on loopback) over
// plain HTTP. It skips the test when not in a network namespace of its own
// or when a part is missing, saying which.
func Start(t testing.TB, c *kubetest.Cluster, images []Image, plainHTTP ...string) *Node {
	t.Helper()
	self, _ := os.Readlink("/proc/self/ns/net")
	init, _ := os.Readlink("/proc/1/ns/net")
	if self == init {
		t.Skip("realnode: not in a network namespace of its own: run under `unshare --net` (scripts/test-kubernetes.sh --real-node)")
	}
	shimDir := os.Getenv(ShimEnv)
	if shimDir == "" {
		shimDir = c.BinDir
	}
	ctrdDir := os.Getenv(ContainerdEnv)
	if ctrdDir == "" {
		ctrdDir = "/usr/bin"
	}
	need := map[string]string{
		"kubelet":                  filepath.Join(c.BinDir, "kubelet"),
		"containerd-shim-runsc-v1": filepath.Join(shimDir, "containerd-shim-runsc-v1"),
		"containerd":               filepath.Join(ctrdDir, "containerd"),
		"ctr":                      filepath.Join(ctrdDir, "ctr"),
		"CNI bridge":               "/usr/lib/cni/bridge",
		"kube-network-policies":    filepath.Join(c.BinDir, "kube-network-policies"),
		"nft":                      "/usr/sbin/nft",
		"runsc":                    "/usr/local/bin/runsc",
	}
	for what, path := range need {
		if _, err := os.Stat(path); err != nil {
			t.Skipf("realnode: no %s at %s (scripts/k8s-bins.sh --node; apt-get install containerd containernetworking-plugins)", what, path)
		}
	}
	dir := filepath.Join(c.Dir, "node")
	n := &Node{Name: "realnode", dir: dir, sock: filepath.Join(dir, "containerd.sock"), ctr: filepath.Join(ctrdDir, "ctr"),
		v2: os.Getenv(ContainerdEnv) != ""}
	if err := n.network(); err != nil {
		t.Fatalf("realnode: network: %v", err)
	}
	pathEnv := "PATH=" + shimDir + ":/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	if err := n.writeConfigs(plainHTTP); err != nil {
		t.Fatalf("realnode: %v", err)
	}
	if err := c.Run("containerd", []string{pathEnv}, filepath.Join(ctrdDir, "containerd"), "--config", filepath.Join(dir, "containerd.toml")); err != nil {
		t.Fatalf("realnode: %v", err)
	}
	if err := waitFile(n.sock, 30*time.Second); err != nil {
		t.Fatalf("realnode: containerd: %v (see containerd.log in %s)", err, c.Dir)
	}
	for _, img := range images {
		tarPath := filepath.Join(dir, filepath.Base(img.Root)+"-"+strconv.Itoa(len(img.Ref))+".tar")
		start := time.Now()
		if err := writeImage(img, tarPath); err != nil {
			t.Fatalf("realnode: image %s: %v", img.Ref, err)
		}
		out, err := exec.Command(n.ctr, "--address", n.sock, "-n", "k8s.io", "images", "import", "--no-unpack", tarPath).CombinedOutput()
		if err != nil {
			t.Fatalf("realnode: import %s: %v: %s", img.Ref, err, out)
		}
		os.Remove(tarPath)
		t.Logf("realnode: image %s made and imported in %v", img.Ref, time.Since(start).Round(time.Millisecond))
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubelet.yaml"), []byte(kubeletConfig(n.sock, port)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Run("kubelet", []string{pathEnv}, filepath.Join(c.BinDir, "kubelet"),
		"--config", filepath.Join(dir, "kubelet.yaml"), "--kubeconfig", c.Kubeconfig,
		"--hostname-override", n.Name, "--node-ip", NodeIP, "--root-dir", filepath.Join(dir, "kubelet"),
		"--cert-dir", filepath.Join(dir, "kubelet-pki"), "--v", "2"); err != nil {
		t.Fatalf("realnode: %v", err)
	}
	t.Cleanup(func() { n.cleanup(t, c) })
	if err := n.waitReady(c, 2*time.Minute); err != nil {
		t.Fatalf("realnode: %v (see kubelet.log and containerd.log in %s)", err, c.Dir)
	}
	if err := n.startEnforcer(c); err != nil {
		t.Fatalf("realnode: %v (see kube-network-policies.log in %s)", err, c.Dir)
	}
	t.Logf("realnode: NetworkPolicy enforcer's rules in place in %v", n.EnforcerReady.Round(time.Millisecond))
	return n
}

// enforcerTable is the nftables table (family inet) the enforcer makes in
// the node's (the test's) network namespace.
const enforcerTable = "kube-network-policies"

// startEnforcer starts the NetworkPolicy enforcer and waits until its
// nftables table is there (made once its informers synced), so that no
// pod of the test runs before policies are enforced.
func (n *Node) startEnforcer(c *kubetest.Cluster) error {
	start := time.Now()
	if err := c.Run("kube-network-policies", nil, filepath.Join(c.BinDir, "kube-network-policies"),
		"-kubeconfig", c.Kubeconfig, "-hostname-override", n.Name, "-v", "2"); err != nil {
		return err
	}
	for {
		out, err := exec.Command("nft", "list", "table", "inet", enforcerTable).CombinedOutput()
		if err == nil && bytes.Contains(out, []byte("postrouting")) {
			n.EnforcerReady = time.Since(start)
			return nil
		}
		if time.Since(start) > 30*time.Second {
			return fmt.Errorf("the NetworkPolicy enforcer made no nftables table %s in 30 s: %v: %s", enforcerTable, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// network gives this (the test's own) namespace an interface with the
// node IP and a default route, or keeps those an earlier node made.
func (n *Node) network() error {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		// A veth pair (the host's kernel may have no dummy driver);
		// its other end stays in this namespace too.
		{"link", "add", "kt0", "type", "veth", "peer", "name", "kt1"},
		{"addr", "add", NodeIP + "/24", "dev", "kt0"},
		{"link", "set", "kt0", "up"},
		{"link", "set", "kt1", "up"},
		{"route", "add", "default", "via", "10.99.0.2", "dev", "kt0"},
	} {
		// A second node in the same test binary (namespace) finds them
		// made by the first.
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil && !bytes.Contains(out, []byte("File exists")) && !bytes.Contains(out, []byte("already assigned")) {
			return fmt.Errorf("ip %v: %v: %s", args, err, out)
		}
	}
	// Pods reach hosts outside the node (test namespaces routed
	// through it) by forwarding, in this namespace only.
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("ip forwarding in the node's namespace: %w", err)
	}
	return nil
}

func (n *Node) writeConfigs(plainHTTP []string) error {
	hosts := filepath.Join(n.dir, "certs.d")
	for _, h := range plainHTTP {
		if err := os.MkdirAll(filepath.Join(hosts, h), 0o700); err != nil {
			return err
		}
		conf := fmt.Sprintf("server = %[1]q\n[host.%[1]q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+h)
		if err := os.WriteFile(filepath.Join(hosts, h, "hosts.toml"), []byte(conf), 0o600); err != nil {
			return err
		}
	}
	for _, d := range []string{"cni", "root", "state"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o700); err != nil {
			return err
		}
	}
	cni := `{"cniVersion": "1.0.0", "name": "kubetest", "plugins": [
  {"type": "bridge", "bridge": "kt-cni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/16"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}`
	if err := os.WriteFile(filepath.Join(n.dir, "cni", "10-kubetest.conflist"), []byte(cni), 0o600); err != nil {
		return err
	}
	toml := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "withruntime/pause:test"
  enable_selinux = false
  # The test host may lack CAP_SYS_RESOURCE: no container's oom_score_adj
  # below containerd's own (the kubelet asks -998 for pause containers).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runsc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]
      runtime_type = "io.containerd.runsc.v1"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[4]q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[5]q
`, filepath.Join(n.dir, "root"), filepath.Join(n.dir, "state"), n.sock, filepath.Join(n.dir, "cni"), hosts)
	if n.v2 {
		toml = fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
# Images pulled (not imported) are unpacked by the transfer service, which
# knows only the default snapshotter's platform unless told.
[plugins.'io.containerd.transfer.v1.local']
  [[plugins.'io.containerd.transfer.v1.local'.unpack_config]]
    platform = 'linux/amd64'
    snapshotter = 'native'
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'native'
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = %[5]q
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = 'withruntime/pause:test'
[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runsc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc]
      runtime_type = 'io.containerd.runsc.v1'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/usr/lib/cni']
    conf_dir = %[4]q
`, filepath.Join(n.dir, "root"), filepath.Join(n.dir, "state"), n.sock, filepath.Join(n.dir, "cni"), hosts)
	}
	return os.WriteFile(filepath.Join(n.dir, "containerd.toml"), []byte(toml), 0o600)
}

func kubeletConfig(sock string, port int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzPort: 0
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
containerRuntimeEndpoint: unix://%s
failSwapOn: false
failCgroupV1: false
evictionHard: {"memory.available": "0%%", "nodefs.available": "0%%", "imagefs.available": "0%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: ""
registerNode: true
`, port, sock)
}

func (n *Node) waitReady(c *kubetest.Cluster, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err == nil {
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			if node != nil {
				return fmt.Errorf("node %s not ready in %v: %+v", n.Name, timeout, node.Status.Conditions)
			}
			return fmt.Errorf("node %s not registered in %v: %v", n.Name, timeout, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func waitFile(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear in %v", path, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
