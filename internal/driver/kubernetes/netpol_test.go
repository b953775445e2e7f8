package kubernetes

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"withruntime.dev/runtime/internal/egress/policy"
	"withruntime.dev/runtime/internal/errs"
)

// egressCIDRs is every ipBlock of np's egress rules, "cidr except a,b".
func egressCIDRs(np *networkingv1.NetworkPolicy) map[string][]string {
	out := map[string][]string{}
	for _, r := range np.Spec.Egress {
		for _, to := range r.To {
			if to.IPBlock != nil {
				out[to.IPBlock.CIDR] = to.IPBlock.Except
			}
		}
	}
	return out
}

// TestNetworkPolicyPerSandbox: against the real API server (which
// validates every object), each sandbox gets a NetworkPolicy that selects
// its pod alone, lets in only the Runtime server on the agent's port, and
// lets out what its policy says: nothing by default, the allowed CIDRs
// minus the denied ones and the never-reachable ranges, or the internet
// (still minus those ranges) with cluster DNS. A policy change replaces
// it; Destroy removes it. (Enforcing it is the CNI's job: the fake node
// enforces nothing.)
func TestNetworkPolicyPerSandbox(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.d.Create(ctx, testSpec("sbx_net")); err != nil {
		t.Fatal(err)
	}
	other := testSpec("sbx_other")
	other.Policy = &policy.Policy{Internet: true}
	if _, err := e.d.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	nps := e.c.Client.NetworkingV1().NetworkPolicies(testNS)
	get := func() *networkingv1.NetworkPolicy {
		t.Helper()
		np, err := nps.Get(ctx, "wr-sbx-net", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the sandbox's NetworkPolicy: %v", err)
		}
		return np
	}

	// Default: {internet: false}: no egress rule at all, both directions
	// restricted, its own pod selected and no other.
	np := get()
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Fatalf("policyTypes %v, want Ingress and Egress", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Egress) != 0 {
		t.Fatalf("egress rules %+v, want none (nothing out)", np.Spec.Egress)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := e.c.Client.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Name != "wr-sbx-net" {
		t.Fatalf("the policy selects %d pods (%v), want wr-sbx-net alone", len(pods.Items), err)
	}
	if len(np.OwnerReferences) != 1 || np.OwnerReferences[0].UID != pods.Items[0].UID {
		t.Errorf("owner references %+v, want the pod", np.OwnerReferences)
	}
	in := np.Spec.Ingress
	if len(in) != 1 || len(in[0].From) != 1 || in[0].From[0].NamespaceSelector.MatchLabels[corev1.LabelMetadataName] != DefaultServerNamespace ||
		in[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "withruntime-server" ||
		len(in[0].Ports) != 1 || in[0].Ports[0].Port.IntValue() != 7000 {
		t.Fatalf("ingress %+v, want only the server's pods on the agent port", in)
	}

	// An allow list of addresses: ipBlocks, minus the deny list.
	if err := e.d.SetNetwork(ctx, "sbx_net", policy.Policy{Allow: []string{"203.0.113.0/24", "198.51.100.7"}, Deny: []string{"203.0.113.128/25"}}); err != nil {
		t.Fatal(err)
	}
	got := egressCIDRs(get())
	if len(got) != 2 || !slices.Equal(got["203.0.113.0/24"], []string{"203.0.113.128/25"}) || got["198.51.100.7/32"] == nil && len(got) != 2 {
		t.Fatalf("egress %v, want 203.0.113.0/24 except 203.0.113.128/25, and 198.51.100.7/32", got)
	}
	if _, ok := got["198.51.100.7/32"]; !ok {
		t.Fatalf("egress %v, want 198.51.100.7/32", got)
	}

	// Internet: everything but the ranges no sandbox may reach, and DNS.
	if err := e.d.SetNetwork(ctx, "sbx_net", policy.Policy{Internet: true}); err != nil {
		t.Fatal(err)
	}
	np = get()
	got = egressCIDRs(np)
	for _, must := range []string{"10.0.0.0/8", "169.254.0.0/16", "127.0.0.0/8", "192.168.0.0/16"} {
		if !slices.Contains(got["0.0.0.0/0"], must) {
			t.Errorf("internet egress %v: %s is not excepted", got, must)
		}
	}
	if !slices.Contains(got["::/0"], "fe80::/10") {
		t.Errorf("internet egress %v: fe80::/10 is not excepted", got)
	}
	dns := false
	for _, r := range np.Spec.Egress {
		for _, to := range r.To {
			if to.PodSelector != nil && to.PodSelector.MatchLabels["k8s-app"] == "kube-dns" {
				dns = true
			}
		}
	}
	if !dns {
		t.Errorf("internet egress %+v: no rule for cluster DNS", np.Spec.Egress)
	}
	// Back to nothing.
	if err := e.d.SetNetwork(ctx, "sbx_net", policy.Policy{}); err != nil {
		t.Fatal(err)
	}
	if np = get(); len(np.Spec.Egress) != 0 {
		t.Fatalf("egress after {internet: false}: %+v", np.Spec.Egress)
	}
	// The other sandbox's policy is its own.
	if o, err := nps.Get(ctx, "wr-sbx-other", metav1.GetOptions{}); err != nil || len(o.Spec.Egress) == 0 {
		t.Fatalf("sbx_other's policy: %v %+v", err, o)
	}

	// What needs the egress proxy is refused, never ignored.
	for _, p := range []policy.Policy{{Allow: []string{"example.com"}}, {Allow: []string{"*.example.org"}}, {Internet: true, Deny: []string{"example.com"}}} {
		if err := e.d.SetNetwork(ctx, "sbx_net", p); !errors.Is(err, errs.Invalid) {
			t.Errorf("SetNetwork(%+v): %v, want errs.Invalid", p, err)
		}
		spec := testSpec("sbx_refused")
		spec.Policy = &p
		if _, err := e.d.Create(ctx, spec); !errors.Is(err, errs.Invalid) {
			t.Errorf("Create with %+v: %v, want errs.Invalid", p, err)
		}
	}
	if err := e.d.CheckNetwork(policy.Policy{}, 1); !errors.Is(err, errs.Invalid) {
		t.Errorf("CheckNetwork with a secret: %v, want errs.Invalid", err)
	}
	if np = get(); len(np.Spec.Egress) != 0 {
		t.Fatalf("a refused change changed the policy: %+v", np.Spec.Egress)
	}

	for _, id := range []string{"sbx_net", "sbx_other"} {
		if err := e.d.Destroy(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	assertNothingLeft(t, e)
}

// TestIPBlock: a never-reachable range inside an allowed one is an
// exception; one that covers it drops it.
func TestIPBlock(t *testing.T) {
	d := &Driver{cfg: Config{AgentPort: 7000, ServerPeer: DefaultServerPeer(), DNSPeer: DefaultDNSPeer()}}
	np := d.networkPolicy(testSpec("sbx_x"), &policy.Policy{Allow: []string{"0.0.0.0/1", "203.0.113.0/24"}, Deny: []string{"203.0.0.0/16"}})
	got := egressCIDRs(np)
	if _, ok := got["203.0.113.0/24"]; ok {
		t.Errorf("203.0.113.0/24 allowed although 203.0.0.0/16 is denied: %v", got)
	}
	if !slices.Contains(got["0.0.0.0/1"], "10.0.0.0/8") || !slices.Contains(got["0.0.0.0/1"], "127.0.0.0/8") {
		t.Errorf("0.0.0.0/1 without the private ranges excepted: %v", got)
	}
}
