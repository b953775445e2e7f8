package kubernetes

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"withruntime.dev/runtime/internal/agentauth"
	"withruntime.dev/runtime/internal/egress/policy"
	"withruntime.dev/runtime/internal/errs"
)

var testProxy = netip.MustParseAddrPort("10.96.0.50:3128")

func proxied(c *Config) { c.EgressProxy = testProxy; c.EgressProxyPort = 8443 }

// proxyRule finds np's egress rule to the server's pods on the proxy port.
func proxyRule(np *networkingv1.NetworkPolicy, port int) bool {
	for _, r := range np.Spec.Egress {
		if len(r.To) == 1 && r.To[0].PodSelector != nil && r.To[0].PodSelector.MatchLabels["app.kubernetes.io/name"] == "withruntime-server" &&
			len(r.Ports) == 1 && r.Ports[0].Port.IntValue() == port && *r.Ports[0].Protocol == corev1.ProtocolTCP {
			return true
		}
	}
	return false
}

// TestNetworkPolicyWithEgressProxy: with the proxy, host names and
// secrets are accepted; every sandbox may reach the server's pods on the
// proxy port and nothing else for its names (no ipBlock comes from a name,
// so a program that ignores the proxy gets nowhere), its CIDRs stay direct,
// and a deny list with names takes the direct internet (and DNS) away.
func TestNetworkPolicyWithEgressProxy(t *testing.T) {
	d := &Driver{cfg: Config{Namespace: "ns", AgentPort: 7000, ServerPeer: DefaultServerPeer(), DNSPeer: DefaultDNSPeer()}}
	if err := d.CheckNetwork(policy.Policy{Allow: []string{"example.com"}}, 1); !errors.Is(err, errs.Invalid) ||
		!strings.Contains(err.Error(), "--kubernetes-egress-proxy") {
		t.Fatalf("without the proxy: %v, want errs.Invalid naming the flag", err)
	}
	proxied(&d.cfg)
	for _, p := range []policy.Policy{{Allow: []string{"example.com", "*.example.org"}}, {Internet: true, Deny: []string{"example.com"}}} {
		if err := d.CheckNetwork(p, 2); err != nil {
			t.Fatalf("CheckNetwork(%+v, 2 secrets) with the proxy: %v", p, err)
		}
	}
	np := d.networkPolicy(testSpec("sbx_p"), &policy.Policy{Allow: []string{"example.com", "*.example.org", "203.0.113.0/24"}})
	if !proxyRule(np, 8443) {
		t.Fatalf("egress %+v: no rule to the server's pods on the proxy port", np.Spec.Egress)
	}
	if got := egressCIDRs(np); len(got) != 1 || got["203.0.113.0/24"] == nil && len(got) != 1 {
		t.Fatalf("ipBlocks %v: want only 203.0.113.0/24 (names go through the proxy)", got)
	} else if _, ok := got["203.0.113.0/24"]; !ok {
		t.Fatalf("ipBlocks %v: want 203.0.113.0/24", got)
	}
	if len(np.Spec.Egress) != 2 {
		t.Fatalf("egress rules %+v: want the proxy and the CIDR", np.Spec.Egress)
	}
	np = d.networkPolicy(testSpec("sbx_p"), &policy.Policy{Internet: true, Deny: []string{"example.com"}})
	if len(np.Spec.Egress) != 1 || !proxyRule(np, 8443) {
		t.Fatalf("internet with a denied name: egress %+v, want the proxy alone (no direct internet, no DNS)", np.Spec.Egress)
	}
	np = d.networkPolicy(testSpec("sbx_p"), &policy.Policy{Internet: true, Deny: []string{"203.0.113.0/24"}})
	if !proxyRule(np, 8443) || !slices.Contains(egressCIDRs(np)["0.0.0.0/0"], "203.0.113.0/24") {
		t.Fatalf("internet with a denied CIDR: egress %+v", np.Spec.Egress)
	}
	// Network off: the proxy's port only (it resets at once).
	np = d.networkPolicy(testSpec("sbx_p"), nil)
	if len(np.Spec.Egress) != 1 || !proxyRule(np, 8443) {
		t.Fatalf("network off: egress %+v, want the proxy port alone", np.Spec.Egress)
	}
}

// TestPodWithEgressProxy: the pod's programs are pointed at the proxy (by
// address: no DNS needed), a create's own variables win, and the trust
// certificates ride in the sandbox's secret for the agent to add at boot.
func TestPodWithEgressProxy(t *testing.T) {
	d := &Driver{cfg: Config{Namespace: "ns", RuntimeClass: "gvisor", AgentImage: "agent:1", AgentPort: 7000}}
	spec := testSpec("sbx_p")
	if env := d.pod(spec, "tpl:1", time.Now()).Spec.Containers[0].Env; slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == "HTTPS_PROXY" }) {
		t.Fatalf("without the proxy the pod got %+v", env)
	}
	proxied(&d.cfg)
	spec.Env = append(spec.Env, "no_proxy=internal.example")
	spec.TrustPEM = []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	c := d.pod(spec, "tpl:1", time.Now()).Spec.Containers[0]
	env := map[string][]string{}
	for _, e := range c.Env {
		env[e.Name] = append(env[e.Name], e.Value)
	}
	for _, n := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		if !slices.Equal(env[n], []string{"http://10.96.0.50:3128"}) {
			t.Errorf("%s = %v, want http://10.96.0.50:3128", n, env[n])
		}
	}
	if !slices.Equal(env["no_proxy"], []string{"internal.example"}) || !slices.Equal(env["NO_PROXY"], []string{noProxy}) {
		t.Errorf("no_proxy %v NO_PROXY %v", env["no_proxy"], env["NO_PROXY"])
	}
	if i := slices.Index(c.Args, "-trust"); i < 0 || c.Args[i+1] != credentialsDir+"/"+trustFile {
		t.Errorf("args %v: want -trust %s/%s", c.Args, credentialsDir, trustFile)
	}
	if got := d.secret(spec, testCreds(t)).Data[trustFile]; string(got) != string(spec.TrustPEM) {
		t.Errorf("secret's %s = %q", trustFile, got)
	}
}

// TestSandboxAtIsTheSourcePodOnly: the proxy's identity lookup answers by
// the pod's address as the informer saw it: a pod not running, being
// deleted, or sharing its address with another is nobody, and an address
// of a pod that is not the driver's is nobody.
func TestSandboxAtIsTheSourcePodOnly(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	pod := func(name, id, ip string, phase corev1.PodPhase, mutate ...func(*corev1.Pod)) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{LabelManagedBy: managedBy, LabelSandbox: id}},
			Status: corev1.PodStatus{Phase: phase, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}}
		for _, m := range mutate {
			m(p)
		}
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	now := metav1.Now()
	pod("wr-a", "sba", "10.244.0.5", corev1.PodRunning)
	pod("wr-b", "sbb", "10.244.0.6", corev1.PodPending)
	pod("wr-c", "sbc", "10.244.0.7", corev1.PodRunning, func(p *corev1.Pod) { p.DeletionTimestamp = &now })
	pod("wr-d", "sbd", "10.244.0.8", corev1.PodRunning)
	pod("wr-e", "sbe", "10.244.0.8", corev1.PodRunning)
	pod("other", "sbf", "10.244.0.9", corev1.PodRunning, func(p *corev1.Pod) { p.Labels[LabelManagedBy] = "someone-else" })
	pod("wr-g", "sbg", "fd00::7", corev1.PodRunning)
	d := &Driver{cfg: Config{Namespace: "ns"}, pods: listersv1.NewPodLister(idx)}
	for ip, want := range map[string]string{
		"10.244.0.5": "sba", "::ffff:10.244.0.5": "sba", "fd00::7": "sbg",
		"10.244.0.6": "", "10.244.0.7": "", "10.244.0.8": "", "10.244.0.9": "", "10.244.0.10": "",
	} {
		id, ok := d.SandboxAt(netip.MustParseAddr(ip))
		if id != want || ok != (want != "") {
			t.Errorf("SandboxAt(%s) = %q %v, want %q", ip, id, ok, want)
		}
	}
}

// TestEgressProxyObjects: against the real API server (which validates
// every object), a sandbox with host names on its allow list and a trusted
// CA is created with the proxy: its NetworkPolicy lets out only the
// server's pods on the proxy port and its CIDR, its pod is pointed at the
// proxy and given the CA, and the proxy's lookup knows the pod by its
// address.
func TestEgressProxyObjects(t *testing.T) {
	e := newEnv(t, proxied)
	ctx := context.Background()
	spec := testSpec("sbx_names")
	spec.Policy = &policy.Policy{Allow: []string{"example.com", "*.example.org", "203.0.113.0/24"}}
	spec.TrustPEM = []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	if _, err := e.d.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	np, err := e.c.Client.NetworkingV1().NetworkPolicies(testNS).Get(ctx, "wr-sbx-names", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !proxyRule(np, 8443) || len(np.Spec.Egress) != 2 {
		t.Fatalf("egress %+v: want the server's pods on 8443 and 203.0.113.0/24", np.Spec.Egress)
	}
	if _, ok := egressCIDRs(np)["203.0.113.0/24"]; !ok {
		t.Fatalf("egress %v", egressCIDRs(np))
	}
	pod, err := e.c.Client.CoreV1().Pods(testNS).Get(ctx, "wr-sbx-names", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	if !slices.ContainsFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == "HTTPS_PROXY" && v.Value == "http://10.96.0.50:3128" }) ||
		!slices.Contains(c.Args, "-trust") {
		t.Fatalf("pod env %+v args %v: want HTTPS_PROXY and -trust", c.Env, c.Args)
	}
	sec, err := e.c.Client.CoreV1().Secrets(testNS).Get(ctx, "wr-sbx-names", metav1.GetOptions{})
	if err != nil || string(sec.Data[trustFile]) != string(spec.TrustPEM) {
		t.Fatalf("secret: %v, %s missing", err, trustFile)
	}
	ip := netip.MustParseAddr(pod.Status.PodIP)
	if id, ok := e.d.SandboxAt(ip); !ok || id != "sbx_names" {
		t.Fatalf("SandboxAt(%s) = %q %v", ip, id, ok)
	}
	if err := e.d.Destroy(ctx, "sbx_names"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		id, ok := e.d.SandboxAt(ip)
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("SandboxAt(%s) after destroy = %q", ip, id)
		}
	}
	assertNothingLeft(t, e)
}

func testCreds(t *testing.T) agentauth.Credentials {
	t.Helper()
	c, err := agentauth.New("sbx_p", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
