package kubernetes

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// SandboxAt returns the sandbox whose pod has address ip now, for the
// egress proxy to know whose a connection is by its source address alone
// (podproxy.Server.Identify). Only the driver's own running pods count, as
// the pod informer last saw them; a pod being deleted or ended does not
// (its address may already be another's), and an address two pods claim
// is nobody's. IPv4-mapped addresses are unmapped first.
func (d *Driver) SandboxAt(ip netip.Addr) (string, bool) {
	ip = ip.Unmap()
	pods, err := d.pods.Pods(d.cfg.Namespace).List(labels.SelectorFromSet(labels.Set{LabelManagedBy: managedBy}))
	if err != nil {
		return "", false
	}
	id, found := "", 0
	for _, pod := range pods {
		if !hasIP(pod, ip) {
			continue
		}
		found++
		if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning || pod.Spec.HostNetwork {
			return "", false
		}
		id = pod.Labels[LabelSandbox]
	}
	if found != 1 || validID(id) != nil {
		return "", false
	}
	return id, true
}

func hasIP(pod *corev1.Pod, ip netip.Addr) bool {
	for _, s := range append([]corev1.PodIP{{IP: pod.Status.PodIP}}, pod.Status.PodIPs...) {
		if a, err := netip.ParseAddr(s.IP); err == nil && a.Unmap() == ip {
			return true
		}
	}
	return false
}
