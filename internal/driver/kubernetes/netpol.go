package kubernetes

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/egress/policy"
	"withruntime.dev/runtime/internal/errs"
)

var _ driver.Networker = (*Driver)(nil)

// Default peers of the sandboxes' NetworkPolicy objects.
const (
	// DefaultServerNamespace is the namespace of the Runtime server's pods
	// (deploy/kubernetes/): the only pods that may reach a sandbox's agent.
	DefaultServerNamespace = "withruntime-system"
	// DefaultServerSelector selects the Runtime server's pods in it.
	DefaultServerSelector = "app.kubernetes.io/name=withruntime-server"
)

// DefaultServerPeer is Config.ServerPeer's default: pods labelled
// DefaultServerSelector in the namespace DefaultServerNamespace.
func DefaultServerPeer() networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: DefaultServerNamespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "withruntime-server"}},
	}
}

// DefaultDNSPeer is Config.DNSPeer's default: the cluster DNS pods
// (k8s-app=kube-dns in kube-system, CoreDNS's usual labels).
func DefaultDNSPeer() networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "kube-system"}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
	}
}

// noEgressProxy is why host names and secrets are refused without the
// egress proxy.
const noEgressProxy = "the Kubernetes driver enforces network policies as NetworkPolicy objects, which match addresses only; " +
	"host names, wildcards and secrets need Runtime's egress proxy in the cluster, which this server was not given " +
	"(serve --kubernetes-egress-proxy, see README, Kubernetes)"

// CheckNetwork implements driver.Networker: internet on or off, and allow
// and deny lists of addresses and CIDRs, are always enforced (NetworkPolicy
// ipBlocks); host names, wildcards and secrets only with Config.EgressProxy
// (through the proxy) and are refused (errs.Invalid) without it, never
// ignored.
func (d *Driver) CheckNetwork(p policy.Policy, secrets int) error {
	if d.cfg.EgressProxy.IsValid() {
		return nil
	}
	if secrets > 0 {
		return errs.New(errs.Invalid, "secrets: %s; create the sandbox without secrets on this server", noEgressProxy)
	}
	for field, list := range map[string][]string{"allow": p.Allow, "deny": p.Deny} {
		for _, e := range list {
			if _, err := parseNet(e); err != nil {
				return errs.New(errs.Invalid, "network.%s %q: %s; give IP addresses or CIDRs (e.g. 203.0.113.0/24) instead", field, e, noEgressProxy)
			}
		}
	}
	return nil
}

// hasNames says whether list holds an entry that is not an address or a
// CIDR (a host name or a wildcard).
func hasNames(list []string) bool {
	for _, e := range list {
		if _, err := parseNet(e); err != nil {
			return true
		}
	}
	return false
}

// parseNet reads a normalized allow or deny entry that is an address or a
// CIDR.
func parseNet(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// SetNetwork implements driver.Networker: it replaces the sandbox's
// NetworkPolicy (creating it if it is missing).
func (d *Driver) SetNetwork(ctx context.Context, id string, p policy.Policy) error {
	if err := validID(id); err != nil {
		return fmt.Errorf("kubernetes network: %w", err)
	}
	if err := d.CheckNetwork(p, 0); err != nil {
		return err
	}
	nps := d.cfg.Client.NetworkingV1().NetworkPolicies(d.cfg.Namespace)
	want := d.networkPolicy(driver.Spec{ID: id}, &p)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := nps.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = nps.Create(ctx, want, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		cur.Spec = want.Spec
		_, err = nps.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("kubernetes network %s: %w", id, err)
	}
	return nil
}

// networkPolicy is the sandbox's NetworkPolicy: it selects its pod only,
// lets in the Runtime server on the agent's port and nothing else, and
// lets out what p allows (nil: nothing). Whatever p says, the ranges no
// sandbox may reach (policy.BlockedPrefixes: private, loopback,
// link-local, CGNAT, metadata, ...) stay closed, as on a single host; with
// internet on, DNS to the cluster DNS pods is let out too.
//
// With the egress proxy, the server's pods on its port are let out too
// (always: the proxy itself refuses what p does not allow, at once instead
// of a silent drop), and host names go through it only: an allow list's
// names add no ipBlock, and a deny list with names takes the direct
// internet away (the proxy, which checks names, is then the only way out).
func (d *Driver) networkPolicy(spec driver.Spec, p *policy.Policy) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	udp := corev1.ProtocolUDP
	port := intstr.FromInt32(int32(d.cfg.AgentPort))
	dns := intstr.FromInt32(53)
	labels := map[string]string{LabelManagedBy: managedBy, LabelSandbox: spec.ID}
	if spec.Owner != "" {
		labels[LabelOwner] = ownerLabel(spec.Owner)
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: objectName(spec.ID), Namespace: d.cfg.Namespace, Labels: labels},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelManagedBy: managedBy, LabelSandbox: spec.ID}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{d.cfg.ServerPeer},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{}, // none: nothing out
		},
	}
	if d.cfg.EgressProxy.IsValid() {
		proxyPort := intstr.FromInt32(int32(d.cfg.EgressProxyPort))
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{d.cfg.ServerPeer},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &proxyPort}},
		})
	}
	if p == nil {
		return np
	}
	var deny []netip.Prefix
	for _, e := range p.Deny {
		if n, err := parseNet(e); err == nil {
			deny = append(deny, n)
		}
	}
	never := append(policy.BlockedPrefixes(), deny...)
	var allow []netip.Prefix
	if p.Internet && hasNames(p.Deny) {
		// Names are denied: only the proxy can tell them apart.
	} else if p.Internet {
		allow = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{d.cfg.DNSPeer},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}},
		})
	} else {
		for _, e := range p.Allow {
			if n, err := parseNet(e); err == nil {
				allow = append(allow, n)
			}
		}
	}
	var to []networkingv1.NetworkPolicyPeer
	for _, a := range allow {
		if block := ipBlock(a, never); block != nil {
			to = append(to, networkingv1.NetworkPolicyPeer{IPBlock: block})
		}
	}
	if len(to) > 0 {
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: to})
	}
	return np
}

// ipBlock is allowed range a minus the never ranges: nil when one of them
// covers all of a, otherwise a with every never range inside it as an
// exception. (A never range that only overlaps a's start cannot: CIDRs
// either nest or are disjoint.)
func ipBlock(a netip.Prefix, never []netip.Prefix) *networkingv1.IPBlock {
	b := &networkingv1.IPBlock{CIDR: a.String()}
	seen := map[netip.Prefix]bool{}
	for _, n := range never {
		n = n.Masked()
		// IPv4-mapped IPv6 ranges are not valid in an ipBlock (the API
		// refuses them); their IPv4 ranges are excepted as such.
		if n.Addr().Is4In6() || n.Addr().Is4() != a.Addr().Is4() || !n.Overlaps(a) {
			continue
		}
		if n.Bits() <= a.Bits() {
			return nil // n covers a
		}
		if !seen[n] {
			seen[n] = true
			b.Except = append(b.Except, n.String())
		}
	}
	return b
}
