package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/driver/kubernetes"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/template/registry"
)

// addDriverFlags adds serve's --driver and the Kubernetes driver's flags,
// and returns what makes the chosen driver: nil for gvisor (the server's
// default), the Kubernetes driver for "kubernetes"; with
// --kubernetes-egress-proxy, where to serve the sandboxes' egress proxy;
// and, for "kubernetes", where the manager finds templates (a
// registry.Catalog: images in a registry, no root filesystem here).
func addDriverFlags(cmd *cobra.Command) func(ctx context.Context) (driver.Driver, string, sandbox.Templates, error) {
	var egressProxy, egressListen string
	var templateRefresh time.Duration
	var name, kubeconfig, namespace, runtimeClass, agentImage, templateImagePrefix, serverNamespace, serverSelector, serverCIDR string
	f := cmd.Flags()
	f.StringVar(&name, "driver", "gvisor", "what runs the sandboxes: gvisor (runsc on this host) or kubernetes (a pod each; see README, Kubernetes)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "with --driver kubernetes: kubeconfig file (default: the in-cluster service account)")
	f.StringVar(&namespace, "kubernetes-namespace", "withruntime", "with --driver kubernetes: namespace of the sandboxes' pods (must exist)")
	f.StringVar(&runtimeClass, "kubernetes-runtime-class", "gvisor", "with --driver kubernetes: the pods' runtimeClassName")
	f.StringVar(&agentImage, "kubernetes-agent-image", "", "with --driver kubernetes: image holding the static agent at /withruntime-agent (required)")
	f.StringVar(&templateImagePrefix, "kubernetes-template-image-prefix", "withruntime/template-", "with --driver kubernetes: a template NAME's image is PREFIX+NAME+:latest, as `withruntime template push NAME --image PREFIX+NAME` writes it; read from the registry at first use (docker config credentials), each pod pinned to its digest")
	f.DurationVar(&templateRefresh, "kubernetes-template-refresh", registry.DefaultRefresh, "with --driver kubernetes: how long a template's image digest is used before the registry is asked again (a re-push reaches new sandboxes after this)")
	f.StringVar(&serverNamespace, "kubernetes-server-namespace", kubernetes.DefaultServerNamespace, "with --driver kubernetes: namespace of the Runtime server's pods, the only ones each sandbox's NetworkPolicy lets reach its agent")
	f.StringVar(&serverSelector, "kubernetes-server-selector", kubernetes.DefaultServerSelector, "with --driver kubernetes: label selector of the Runtime server's pods in --kubernetes-server-namespace")
	f.StringVar(&serverCIDR, "kubernetes-server-cidr", "", "with --driver kubernetes: the addresses (a CIDR) the Runtime server reaches sandboxes from, when it runs outside the cluster; replaces --kubernetes-server-namespace and --kubernetes-server-selector")
	f.StringVar(&egressProxy, "kubernetes-egress-proxy", "", "with --driver kubernetes: IP:PORT at which sandbox pods reach this server's egress proxy (the proxy Service's cluster IP and port: no DNS needed); enables host names, wildcards and secrets in network policies (default: they are refused)")
	f.StringVar(&egressListen, "kubernetes-egress-proxy-listen", ":3128", "with --kubernetes-egress-proxy: where this server serves the egress proxy (the Service's targetPort)")
	makeDriver := func(ctx context.Context, egressProxy, egressListen string) (driver.Driver, error) {
		switch name {
		case "gvisor":
			if egressProxy != "" {
				return nil, fmt.Errorf("--kubernetes-egress-proxy needs --driver kubernetes")
			}
			return nil, nil
		case "kubernetes":
		default:
			return nil, fmt.Errorf("--driver %q: want gvisor or kubernetes", name)
		}
		var proxyAddr netip.AddrPort
		var proxyPort int
		if egressProxy != "" {
			var err error
			if proxyAddr, err = netip.ParseAddrPort(egressProxy); err != nil {
				return nil, fmt.Errorf("--kubernetes-egress-proxy %q: %w (want the proxy Service's cluster IP and port, e.g. 10.96.0.50:3128)", egressProxy, err)
			}
			_, port, err := net.SplitHostPort(egressListen)
			if proxyPort, _ = strconv.Atoi(port); err != nil || proxyPort <= 0 || proxyPort > 65535 {
				return nil, fmt.Errorf("--kubernetes-egress-proxy-listen %q: want [HOST]:PORT, e.g. :3128", egressListen)
			}
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--driver kubernetes: %w (set --kubeconfig, or run in a pod with a service account)", err)
		}
		client, err := k8s.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("--driver kubernetes: %w", err)
		}
		var peer networkingv1.NetworkPolicyPeer
		if serverCIDR != "" {
			pfx, err := netip.ParsePrefix(serverCIDR)
			if err != nil {
				return nil, fmt.Errorf("--kubernetes-server-cidr %q: %w (want a CIDR, e.g. 192.0.2.10/32)", serverCIDR, err)
			}
			peer.IPBlock = &networkingv1.IPBlock{CIDR: pfx.Masked().String()}
		} else if peer, err = serverPeer(serverNamespace, serverSelector); err != nil {
			return nil, err
		}
		return kubernetes.New(ctx, kubernetes.Config{Client: client, Namespace: namespace, RuntimeClass: runtimeClass,
			AgentImage: agentImage, ServerPeer: peer, EgressProxy: proxyAddr, EgressProxyPort: proxyPort,
			TemplateImage: func(t string) string { return templateImagePrefix + t + ":latest" },
			// Each pod's deadline covers the longest lease the server
			// gives, since it can never be raised (see LatestLeaseEnd).
			MaxLease: sandbox.DefaultLimits().MaxTimeout})
	}
	return func(ctx context.Context) (driver.Driver, string, sandbox.Templates, error) {
		d, err := makeDriver(ctx, egressProxy, egressListen)
		if err != nil || d == nil {
			return d, "", nil, err
		}
		if templateRefresh <= 0 {
			return nil, "", nil, fmt.Errorf("--kubernetes-template-refresh must be positive (e.g. 1m); got %s", templateRefresh)
		}
		cat := &registry.Catalog{Prefix: templateImagePrefix, Refresh: templateRefresh}
		if _, err := cat.Tag("base"); err != nil {
			return nil, "", nil, err
		}
		if egressProxy == "" {
			return d, "", cat, nil
		}
		return d, egressListen, cat, nil
	}
}

// serverPeer is the NetworkPolicy peer of the server's pods: those
// matching selector in namespace.
func serverPeer(namespace, selector string) (networkingv1.NetworkPolicyPeer, error) {
	podSel, err := metav1.ParseToLabelSelector(selector)
	if err != nil {
		return networkingv1.NetworkPolicyPeer{}, fmt.Errorf("--kubernetes-server-selector %q: %w (want e.g. app.kubernetes.io/name=withruntime-server)", selector, err)
	}
	if namespace == "" {
		return networkingv1.NetworkPolicyPeer{}, fmt.Errorf("--kubernetes-server-namespace is empty: name the namespace the Runtime server's pods run in")
	}
	return networkingv1.NetworkPolicyPeer{PodSelector: podSel, NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{corev1.LabelMetadataName: namespace}}}, nil
}
