package realnode

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"withruntime.dev/runtime/internal/kube/kubetest"
)

// Containers is the number of containers containerd has (pause containers
// and exited ones included, until the kubelet's garbage collection removes
// their records, within a minute of their pod's end).
func (n *Node) Containers() (int, error) {
	out, err := exec.Command(n.ctr, "--address", n.sock, "-n", "k8s.io", "containers", "ls", "-q").Output()
	if err != nil {
		return 0, err
	}
	return len(strings.Fields(string(out))), nil
}

// Running is the number of containers whose task (process) runs now:
// 0 once every pod has ended.
func (n *Node) Running() (int, error) {
	out, err := exec.Command(n.ctr, "--address", n.sock, "-n", "k8s.io", "tasks", "ls").Output()
	if err != nil {
		return 0, err
	}
	k := 0
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[2] == "RUNNING" {
			k++
		}
	}
	return k, nil
}

// cleanup deletes every pod on the node and waits for the kubelet to end
// them, then kills any shim of this node's containerd still running (found
// by its -address argument, one by one by pid).
func (n *Node) cleanup(t testing.TB, c *kubetest.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sel := fields.OneTermEqualSelector("spec.nodeName", n.Name).String()
	pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err == nil {
		grace := int64(1)
		for _, p := range pods.Items {
			_ = c.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		}
		for ctx.Err() == nil {
			if k, err := n.Containers(); err == nil && k == 0 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// Stop the kubelet and containerd (the whole cluster: this is the
	// test's end), then undo the kubelet's mounts under the node directory
	// (its root directory is a bind mount of itself), deepest first.
	c.Stop()
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		var mounts []string
		for _, line := range strings.Split(string(mi), "\n") {
			f := strings.Fields(line)
			if len(f) > 4 && strings.HasPrefix(f[4], n.dir+"/") {
				mounts = append(mounts, f[4])
			}
		}
		for i := len(mounts) - 1; i >= 0; i-- {
			_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("containerd-shim-runsc-v1")) || !bytes.Contains(b, []byte(n.sock)) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil {
			t.Logf("realnode: killing shim %d left running", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
