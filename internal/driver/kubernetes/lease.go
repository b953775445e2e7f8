package kubernetes

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"withruntime.dev/runtime/internal/driver"
)

var _ driver.LeaseBounder = (*Driver)(nil)

// LatestLeaseEnd implements driver.LeaseBounder: the pod's start plus its
// activeDeadlineSeconds, less leaseBackstop (so that the server and the
// agent still end the sandbox before the kubelet kills it). Kubernetes
// never lets a running pod's deadline be raised, so a lease extended past
// this would end with the pod killed while the record says it runs. A pod
// without a deadline (a warm-pool pod not yet claimed) has no bound: the
// zero time. It reads the pod from the API server, not the informer's
// cache, so a claim just made is seen. A pod that is gone is
// driver.ErrNotFound (wrapped).
func (d *Driver) LatestLeaseEnd(ctx context.Context, id string) (time.Time, error) {
	if err := validID(id); err != nil {
		return time.Time{}, fmt.Errorf("kubernetes lease bound: %w", err)
	}
	pod, err := d.cfg.Client.CoreV1().Pods(d.cfg.Namespace).Get(ctx, objectName(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return time.Time{}, fmt.Errorf("kubernetes lease bound %s: %w", id, driver.ErrNotFound)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("kubernetes lease bound %s: %w", id, err)
	}
	if pod.Labels[LabelSandbox] != id || pod.Labels[LabelManagedBy] != managedBy {
		return time.Time{}, fmt.Errorf("kubernetes lease bound %s: pod %s is not this sandbox's", id, pod.Name)
	}
	secs := pod.Spec.ActiveDeadlineSeconds
	if secs == nil {
		return time.Time{}, nil
	}
	return podStart(pod).Add(time.Duration(*secs)*time.Second - leaseBackstop), nil
}
