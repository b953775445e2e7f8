package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"withruntime.dev/runtime/internal/driver"
)

var _ driver.Claimer = (*Driver)(nil)

// Claim implements driver.Claimer: it binds the warm-pool pod of sandbox id
// (made by Create with Spec.Pooled: owner label "", no deadline, a
// NetworkPolicy that lets nothing out) to owner and the lease ending at
// leaseEndsAt. In one update of the pod, conditional on the version read,
// it sets the owner label and activeDeadlineSeconds (Config.MaxLease from
// now plus leaseBackstop, counted from the pod's start: see
// deadlineSeconds); then it relabels the
// pod's Secret and NetworkPolicy. It refuses a pod that is not running,
// is being deleted, already has an owner or a deadline (claimed before,
// or never pooled), so no pod is handed out twice.
//
// The lease of a claimed pod is enforced as for a cold one: the server's
// timer first, the agent's own lease end (set by the claim's configure)
// next, activeDeadlineSeconds last. Before the claim a pooled pod has no
// deadline: the pool replaces it after its maximum age, the agent ends it
// at its boot-time lease (the pool's maximum age plus a minute; nothing but
// our agent ever ran in it), and a server that starts destroys pods no
// record knows.
func (d *Driver) Claim(ctx context.Context, id, owner string, leaseEndsAt time.Time) error {
	if err := validID(id); err != nil {
		return fmt.Errorf("kubernetes claim: %w", err)
	}
	label := ownerLabel(owner)
	if label == "" {
		return fmt.Errorf("kubernetes claim %s: owner %q has no label value", id, owner)
	}
	name := objectName(id)
	pods := d.cfg.Client.CoreV1().Pods(d.cfg.Namespace)
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("kubernetes claim %s: %w", id, err)
	}
	switch {
	case pod.Labels[LabelSandbox] != id || pod.Labels[LabelManagedBy] != managedBy:
		return fmt.Errorf("kubernetes claim %s: pod %s is not this sandbox's", id, name)
	case pod.Labels[LabelOwner] != "" || pod.Spec.ActiveDeadlineSeconds != nil:
		return fmt.Errorf("kubernetes claim %s: pod %s is not an unclaimed pooled pod (owner %q)", id, name, pod.Labels[LabelOwner])
	case pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning:
		return fmt.Errorf("kubernetes claim %s: pod %s is not running (%s)", id, name, describe(pod))
	}
	start := podStart(pod)
	latest := time.Now().Add(d.cfg.MaxLease)
	if leaseEndsAt.After(latest) {
		latest = leaseEndsAt
	}
	// The resource version makes the patch fail with a conflict if the pod
	// changed since it was read (another claim among them).
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": pod.ResourceVersion, "labels": map[string]string{LabelOwner: label}},
		"spec":     map[string]any{"activeDeadlineSeconds": *deadlineSeconds(latest, start)},
	})
	if err != nil {
		return fmt.Errorf("kubernetes claim %s: %w", id, err)
	}
	if _, err := pods.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("kubernetes claim %s: pod: %w", id, err)
	}
	relabel, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{LabelOwner: label}}})
	if _, err := d.cfg.Client.CoreV1().Secrets(d.cfg.Namespace).Patch(ctx, name, types.MergePatchType, relabel, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("kubernetes claim %s: secret: %w", id, err)
	}
	if _, err := d.cfg.Client.NetworkingV1().NetworkPolicies(d.cfg.Namespace).Patch(ctx, name, types.MergePatchType, relabel, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("kubernetes claim %s: network policy: %w", id, err)
	}
	return nil
}
