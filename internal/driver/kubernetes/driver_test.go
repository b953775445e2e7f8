package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/kube/kubetest"
	"withruntime.dev/runtime/internal/kube/kubetest/fakenode"
)

const testNS = "withruntime"

// env is a control plane with the fake node (a test double: see fakenode)
// and a driver on it.
type env struct {
	c    *kubetest.Cluster
	node *fakenode.Node
	d    *Driver
}

func newEnv(t *testing.T, configure ...func(*Config)) *env {
	t.Helper()
	c := kubetest.Start(t, kubetest.Options{Scheduler: true})
	ctx := context.Background()
	if err := c.EnsureNamespace(ctx, testNS); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(t.TempDir(), "withruntime-agent")
	build := exec.Command("go", "build", "-o", agent, "withruntime.dev/runtime/cmd/withruntime-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build agent: %v: %s", err, out)
	}
	node, err := fakenode.Start(ctx, fakenode.Config{Client: c.Client, Dir: t.TempDir(),
		Binaries: map[string]string{imageAgentPath: agent},
		MainArgs: func(dir string) []string {
			return []string{"-user", "root", "-workspace", filepath.Join(dir, "workspace")}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	cfg := Config{Client: c.Client, Namespace: testNS, AgentImage: "withruntime/agent:test", ReadyTimeout: time.Minute}
	for _, f := range configure {
		f(&cfg)
	}
	d, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &env{c: c, node: node, d: d}
}

func testSpec(id string) driver.Spec {
	return driver.Spec{ID: id, Owner: "key_alice", RootFS: "/var/lib/withruntime/templates/base/rootfs", CPU: 0.5,
		MemoryBytes: 512 << 20, DiskBytes: 1 << 30, TmpBytes: 64 << 20, PidsLimit: 256,
		Env: []string{"FOO=bar"}, LeaseEndsAt: time.Now().Add(10 * time.Minute)}
}

// TestCreateAndDestroy: a sandbox is a pod of the documented shape whose
// agent answers over the authenticated channel, and Destroy leaves nothing.
func TestCreateAndDestroy(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	start := time.Now()
	h, err := e.d.Create(ctx, testSpec("sbx_one"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("create (pod scheduled, running, agent answering): %v", time.Since(start).Round(time.Millisecond))
	pod, err := e.c.Client.CoreV1().Pods(testNS).Get(ctx, "wr-sbx-one", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pod.Spec.RuntimeClassName; got == nil || *got != "gvisor" {
		t.Errorf("runtimeClassName %v, want gvisor", got)
	}
	if pod.Labels[LabelOwner] != "key_alice" || pod.Labels[LabelSandbox] != "sbx_one" {
		t.Errorf("labels %v", pod.Labels)
	}
	main := pod.Spec.Containers[0]
	lim := main.Resources.Limits
	if !lim.Cpu().Equal(resource.MustParse("500m")) || !lim.Memory().Equal(resource.MustParse("512Mi")) ||
		!lim.StorageEphemeral().Equal(resource.MustParse("1Gi")) {
		t.Errorf("limits %v", lim)
	}
	// The deadline is the longest lease (24 h by default) plus the
	// backstop, not the 10-minute lease: a running pod's deadline can
	// never be raised, and the lease may be extended.
	if d := pod.Spec.ActiveDeadlineSeconds; d == nil || *d < 86400+60 || *d > 86400+60+5 {
		t.Errorf("activeDeadlineSeconds %v, want the longest lease (86400 s) plus the 60 s backstop", d)
	}
	latest, err := e.d.LatestLeaseEnd(ctx, "sbx_one")
	if want := pod.Status.StartTime.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds)*time.Second - leaseBackstop); err != nil || !latest.Equal(want) {
		t.Errorf("LatestLeaseEnd: %v %v, want %v (the pod's start plus its deadline, less the backstop)", latest, err, want)
	}
	if len(pod.Spec.InitContainers) != 1 || pod.Spec.InitContainers[0].Image != "withruntime/agent:test" {
		t.Errorf("init containers %+v", pod.Spec.InitContainers)
	}
	if main.Image != "withruntime/template-base:latest" || main.Command[0] != agentPath {
		t.Errorf("main container image %q command %v", main.Image, main.Command)
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Error("the pod gets a service account token")
	}
	if err := ping(ctx, h.Dial); err != nil {
		t.Fatalf("agent: %v", err)
	}
	ids, err := e.d.List(ctx)
	if err != nil || len(ids) != 1 || ids[0] != "sbx_one" {
		t.Fatalf("List: %v %v", ids, err)
	}
	// A server restart re-attaches from the persisted state.
	if _, err := e.d.Recover(ctx, "sbx_one", h.State); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	start = time.Now()
	if err := e.d.Destroy(ctx, "sbx_one"); err != nil {
		t.Fatal(err)
	}
	t.Logf("destroy: %v", time.Since(start).Round(time.Millisecond))
	assertNothingLeft(t, e)
	if _, err := e.d.Recover(ctx, "sbx_one", h.State); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("Recover after Destroy: %v, want ErrNotFound", err)
	}
	if err := e.d.Destroy(ctx, "sbx_one"); err != nil {
		t.Fatalf("second Destroy: %v", err)
	}
}

func assertNothingLeft(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	pods, _ := e.c.Client.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{})
	secs, _ := e.c.Client.CoreV1().Secrets(testNS).List(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + managedBy})
	nps, _ := e.c.Client.NetworkingV1().NetworkPolicies(testNS).List(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + managedBy})
	if len(pods.Items) != 0 || len(secs.Items) != 0 || len(nps.Items) != 0 {
		t.Errorf("left in the cluster: %d pods, %d secrets, %d network policies", len(pods.Items), len(secs.Items), len(nps.Items))
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.node.Running() != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := e.node.Running(); n != 0 {
		t.Errorf("%d pod processes still run on the node", n)
	}
}

// The attack: the state's credentials are not that pod's (a tampered or
// stale record, or the pod IP now another sandbox's). The channel refuses
// it and Recover says the sandbox is gone rather than talk to it.
func TestChannelRefusesOtherCredentials(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, err := e.d.Create(ctx, testSpec("sbx_a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.d.Create(ctx, testSpec("sbx_b"))
	if err != nil {
		t.Fatal(err)
	}
	var sa, sb state
	json.Unmarshal(a.State, &sa)
	json.Unmarshal(b.State, &sb)
	// a's pod dialed with b's certificate and token.
	mixed := sa
	mixed.CertPEM, mixed.Token = sb.CertPEM, sb.Token
	if _, err := e.d.dialer(mixed)(ctx); !errors.Is(err, driver.ErrChannel) {
		t.Fatalf("dial of a's agent with b's credentials: %v, want ErrChannel", err)
	}
	raw, _ := json.Marshal(mixed)
	if _, err := e.d.Recover(ctx, "sbx_a", raw); !errors.Is(err, driver.ErrNotFound) || !errors.Is(err, driver.ErrChannel) {
		t.Fatalf("Recover with b's credentials: %v, want ErrNotFound and ErrChannel (b's certificate names sbx_b)", err)
	}
	// Another server attaching from a's record (internal/sandbox/attach.go)
	// checks the pinned credentials before any connection: a state whose
	// token is not one agentauth makes attaches to nothing.
	badToken := sa
	badToken.Token = "not-a-token"
	raw, _ = json.Marshal(badToken)
	if _, err := e.d.Recover(ctx, "sbx_a", raw); !errors.Is(err, driver.ErrChannel) {
		t.Fatalf("Recover with a malformed token: %v, want ErrChannel", err)
	}
	// a's state cannot name b's pod.
	if _, err := e.d.Recover(ctx, "sbx_a", b.State); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("Recover of a with b's state: %v, want ErrNotFound", err)
	}
	for _, id := range []string{"sbx_a", "sbx_b"} {
		if err := e.d.Destroy(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	assertNothingLeft(t, e)
}

// TestWaitSeesTheEnd: a sandbox whose lease ends with no server to stop it
// ends itself (the agent's backstop, agent.LeaseGrace after the lease), its
// pod ends, and Wait says so.
func TestWaitSeesTheEnd(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	spec := testSpec("sbx_short")
	spec.LeaseEndsAt = time.Now().Add(2 * time.Second)
	if _, err := e.d.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ex, err := e.d.Wait(wctx, "sbx_short")
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	t.Logf("exit: %+v", ex)
	if err := e.d.Destroy(ctx, "sbx_short"); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, e)
	if _, err := e.c.Client.CoreV1().Secrets(testNS).Get(ctx, "wr-sbx-short", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("secret: %v", err)
	}
}
