package kubernetes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"withruntime.dev/runtime/internal/store"
)

// poolReady is how many pooled base sandboxes GET /v1/health says are ready.
func poolReady(t *testing.T, s *server) int {
	t.Helper()
	resp, err := http.Get("http://" + s.addr + "/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		Pool map[string]struct{ Ready int } `json:"pool"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h.Pool["base"].Ready
}

// pooledPods are the pods of no owner (the warm pool's), running.
func pooledPods(t *testing.T, s *server) []corev1.Pod {
	t.Helper()
	pods, err := s.c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "withruntime.dev/owner="})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	return out
}

func waitPool(t *testing.T, s *server, not string) corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if poolReady(t, s) == 1 {
			for _, p := range pooledPods(t, s) {
				if p.Name != not {
					return p
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the warm pool has no ready pod after 2 minutes (ready %d)", poolReady(t, s))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func create(t *testing.T, s *server, body string) (id string, took time.Duration) {
	t.Helper()
	start := time.Now()
	status, b := call(t, "POST", "http://"+s.addr+"/v1/sandboxes", s.key, body)
	took = time.Since(start)
	if status != http.StatusOK && status != http.StatusCreated {
		t.Fatalf("create %s: %d %s", body, status, b)
	}
	var sb struct{ ID string }
	if err := json.Unmarshal(b, &sb); err != nil || sb.ID == "" {
		t.Fatalf("create answer %s: %v", b, err)
	}
	return sb.ID, took
}

// TestWarmPoolOfPods: with `serve --driver kubernetes --pool-size 1` a pod
// is booted ahead (no owner, no deadline, nothing out); a create of the
// default shape claims it: its sandbox is that pod, relabelled with the
// creator's key, given the longest lease as its deadline and the create's
// NetworkPolicy, and it runs commands. The pool boots a new pod, never
// handing the claimed one out again; a create of another memory size
// starts cold. Nothing is left after the sandboxes are deleted and the
// server stops.
func TestWarmPoolOfPods(t *testing.T) {
	s := startServer(t, "--pool-size", "1", "--pool-max", "1")
	ctx := context.Background()
	pooled := waitPool(t, s, "")
	if pooled.Spec.ActiveDeadlineSeconds != nil {
		t.Errorf("pooled pod %s has activeDeadlineSeconds %d before any claim", pooled.Name, *pooled.Spec.ActiveDeadlineSeconds)
	}
	np, err := s.c.Client.NetworkingV1().NetworkPolicies(ns).Get(ctx, pooled.Name, metav1.GetOptions{})
	if err != nil || len(np.Spec.Egress) != 0 {
		t.Fatalf("pooled pod's NetworkPolicy: %v, egress %+v; want one letting nothing out", err, np.Spec.Egress)
	}

	id, warm := create(t, s, `{"template": "base", "timeoutSeconds": 600, "env": {"FOO": "claimed"}, "network": {"allow": ["203.0.113.0/24"]}}`)
	if want := pooled.Labels["withruntime.dev/sandbox"]; id != want {
		t.Fatalf("create made sandbox %s, want the pooled pod's %s", id, want)
	}
	pod, err := s.c.Client.CoreV1().Pods(ns).Get(ctx, pooled.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := pod.Labels["withruntime.dev/owner"]
	if owner == "" || pod.UID != pooled.UID {
		t.Fatalf("claimed pod: owner %q, uid %s (pooled %s); want the creator's key on the same pod", owner, pod.UID, pooled.UID)
	}
	if d := pod.Spec.ActiveDeadlineSeconds; d == nil || *d < 86400 {
		t.Errorf("claimed pod's activeDeadlineSeconds %v, want the longest lease (86400 s) plus the backstop", d)
	}
	if np, err = s.c.Client.NetworkingV1().NetworkPolicies(ns).Get(ctx, pooled.Name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := egressCIDRs(np); len(got) != 1 || got[0] != "203.0.113.0/24" || np.Labels["withruntime.dev/owner"] != owner {
		t.Errorf("claimed pod's NetworkPolicy: egress %v labels %v, want 203.0.113.0/24 and owner %s", got, np.Labels, owner)
	}
	status, b := call(t, "POST", "http://"+s.addr+"/v1/sandboxes/"+id+"/exec", s.key, `{"command": "echo $FOO $((6*7))"}`)
	if status != http.StatusOK || !strings.Contains(string(b), "claimed 42") {
		t.Fatalf("exec in the claimed sandbox: %d %s", status, b)
	}

	// The pool refills with a new pod; the claimed one is never pooled again.
	next := waitPool(t, s, pooled.Name)
	if next.Labels["withruntime.dev/sandbox"] == id {
		t.Fatalf("the claimed sandbox is back in the pool")
	}
	// Deleted first: a real node here has room for two pods of one vCPU.
	if status, b := call(t, "DELETE", "http://"+s.addr+"/v1/sandboxes/"+id, s.key, ""); status != http.StatusOK && status != http.StatusNoContent {
		t.Fatalf("delete %s: %d %s", id, status, b)
	}
	cold, coldTook := create(t, s, `{"template": "base", "memoryMiB": 256}`)
	if cold == next.Labels["withruntime.dev/sandbox"] {
		t.Fatal("a create of another memory size claimed the pooled pod")
	}
	cpod, err := s.c.Client.CoreV1().Pods(ns).Get(ctx, "wr-"+strings.ReplaceAll(cold, "_", "-"), metav1.GetOptions{})
	if err != nil || cpod.Labels["withruntime.dev/owner"] != owner {
		t.Fatalf("cold pod: %v, owner %q, want %q", err, cpod.Labels["withruntime.dev/owner"], owner)
	}
	node := "fake node"
	if s.nodeDir == "" {
		node = "real node"
	}
	t.Logf("create that claimed a pooled pod: %v; cold create: %v (%s)", warm.Round(time.Millisecond), coldTook.Round(time.Millisecond), node)

	if status, b := call(t, "DELETE", "http://"+s.addr+"/v1/sandboxes/"+cold, s.key, ""); status != http.StatusOK && status != http.StatusNoContent {
		t.Fatalf("delete %s: %d %s", cold, status, b)
	}
	s.stop() // the pool's pod goes with the server
	assertNothingLeft(t, s)
}

// TestWarmPoolWithSecrets: with the egress proxy, pooled pods boot
// trusting the Runtime CA (in their Secret), so a create with secrets
// claims one too: its commands get the secret's placeholder (never the
// value) and the CA bundle variables, and the store binds the secret to
// the sandbox for the proxy.
func TestWarmPoolWithSecrets(t *testing.T) {
	if os.Getenv("WITHRUNTIME_K8S_NODE") == "real" {
		t.Skip("on a real node TestEgressProxyOnRealNode sends a pod's traffic through the proxy")
	}
	proxyAddr := freeAddr(t)
	s := startServer(t, "--pool-size", "1", "--pool-max", "1",
		"--kubernetes-egress-proxy", proxyAddr, "--kubernetes-egress-proxy-listen", proxyAddr)
	ctx, api := context.Background(), "http://"+s.addr
	pooled := waitPool(t, s, "")
	sec, err := s.c.Client.CoreV1().Secrets(ns).Get(ctx, pooled.Name, metav1.GetOptions{})
	ca, caErr := os.ReadFile(s.data + "/egress/ca.pem")
	if err != nil || caErr != nil || !bytes.Equal(sec.Data["trust.crt"], ca) {
		t.Fatalf("the pooled pod's trust.crt: %v %v, want the server's Runtime CA", err, caErr)
	}
	if status, b := call(t, "POST", api+"/v1/secrets", s.key, `{"name": "API_TOKEN", "value": "s3cret-value", "hosts": ["api.example.com"]}`); status/100 != 2 {
		t.Fatalf("create secret: %d %s", status, b)
	}
	id, _ := create(t, s, `{"template": "base", "network": {"allow": ["api.example.com"]}, "secrets": ["API_TOKEN"]}`)
	if want := pooled.Labels["withruntime.dev/sandbox"]; id != want {
		t.Fatalf("the create with a secret made sandbox %s, want the pooled pod's %s", id, want)
	}
	status, b := call(t, "POST", api+"/v1/sandboxes/"+id+"/exec", s.key, `{"command": "echo \"$API_TOKEN|$SSL_CERT_FILE\""}`)
	if status != http.StatusOK {
		t.Fatalf("exec: %d %s", status, b)
	}
	var res struct{ Stdout string }
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	token, bundle, _ := strings.Cut(strings.TrimSpace(res.Stdout), "|")
	if token == "" || strings.Contains(token, "s3cret") || bundle != "/etc/ssl/certs/ca-certificates.crt" {
		t.Fatalf("in the claimed sandbox API_TOKEN=%q SSL_CERT_FILE=%q; want a placeholder and the CA bundle", token, bundle)
	}
	// The proxy reads the sandbox's secrets from the store.
	st, err := store.Open(ctx, filepath.Join(s.data, "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.GetSandboxNetwork(ctx, id)
	st.Close()
	if err != nil || !slices.Contains(rec.Secrets, "API_TOKEN") {
		t.Errorf("the sandbox's network record: %v %+v, want its secret API_TOKEN", err, rec)
	}
	if status, b := call(t, "DELETE", api+"/v1/sandboxes/"+id, s.key, ""); status/100 != 2 {
		t.Fatalf("delete: %d %s", status, b)
	}
	s.stop()
	assertNothingLeft(t, s)
}
