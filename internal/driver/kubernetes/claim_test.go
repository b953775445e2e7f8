package kubernetes

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestClaimPooledPod: a warm-pool pod belongs to no one, has no deadline
// and a NetworkPolicy that lets nothing out; a claim binds it to its owner
// (pod, Secret and NetworkPolicy labels) and gives it the longest lease
// from the claim as activeDeadlineSeconds. The attack: a second claim of the same pod (one
// tenant handed a pod another used) and a claim of a pod that was never
// pooled are refused.
func TestClaimPooledPod(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	spec := testSpec("sbx_pooled")
	spec.Owner, spec.Pooled, spec.Env = "", true, nil
	spec.LeaseEndsAt = time.Now().Add(11 * time.Minute)
	if _, err := e.d.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	pods := e.c.Client.CoreV1().Pods(testNS)
	nps := e.c.Client.NetworkingV1().NetworkPolicies(testNS)
	pod, err := pods.Get(ctx, "wr-sbx-pooled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Labels[LabelOwner] != "" || pod.Spec.ActiveDeadlineSeconds != nil {
		t.Fatalf("pooled pod: owner %q, deadline %v; want no owner and no deadline", pod.Labels[LabelOwner], pod.Spec.ActiveDeadlineSeconds)
	}
	if latest, err := e.d.LatestLeaseEnd(ctx, "sbx_pooled"); err != nil || !latest.IsZero() {
		t.Errorf("pooled pod's LatestLeaseEnd %v %v, want no bound", latest, err)
	}
	np, err := nps.Get(ctx, "wr-sbx-pooled", metav1.GetOptions{})
	if err != nil || len(np.Spec.Egress) != 0 || len(np.Spec.PolicyTypes) != 2 {
		t.Fatalf("pooled pod's NetworkPolicy: %v, egress %+v, types %v; want nothing out", err, np.Spec.Egress, np.Spec.PolicyTypes)
	}

	lease := time.Now().Add(time.Hour)
	start := time.Now()
	if err := e.d.Claim(ctx, "sbx_pooled", "key_bob", lease); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	t.Logf("claim: %v", time.Since(start).Round(time.Millisecond))
	if pod, err = pods.Get(ctx, "wr-sbx-pooled", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if pod.Labels[LabelOwner] != "key_bob" {
		t.Errorf("claimed pod's owner %q, want key_bob", pod.Labels[LabelOwner])
	}
	want := start.Add(24 * time.Hour).Add(leaseBackstop).Sub(pod.Status.StartTime.Time).Seconds()
	if d := pod.Spec.ActiveDeadlineSeconds; d == nil || float64(*d) < want-1 || float64(*d) > want+2 {
		t.Errorf("claimed pod's activeDeadlineSeconds %v, want about %.0f (the longest lease from the claim plus the backstop, from the pod's start)", d, want)
	}
	if latest, err := e.d.LatestLeaseEnd(ctx, "sbx_pooled"); err != nil || latest.Before(start.Add(24*time.Hour-time.Second)) {
		t.Errorf("claimed pod's LatestLeaseEnd %v %v, want 24 h after the claim", latest, err)
	}
	if np, err = nps.Get(ctx, "wr-sbx-pooled", metav1.GetOptions{}); err != nil || np.Labels[LabelOwner] != "key_bob" {
		t.Errorf("claimed pod's NetworkPolicy: %v, labels %v", err, np.Labels)
	}
	secs, err := e.c.Client.CoreV1().Secrets(testNS).List(ctx, metav1.ListOptions{LabelSelector: LabelSandbox + "=sbx_pooled"})
	if err != nil || len(secs.Items) != 1 || secs.Items[0].Labels[LabelOwner] != "key_bob" {
		t.Errorf("claimed pod's Secret: %v %+v", err, secs)
	}

	// Claimed once only: another tenant cannot be handed it.
	if err := e.d.Claim(ctx, "sbx_pooled", "key_mallory", time.Now().Add(time.Hour)); err == nil {
		t.Error("a second claim of the same pod succeeded")
	}
	if pod, _ = pods.Get(ctx, "wr-sbx-pooled", metav1.GetOptions{}); pod.Labels[LabelOwner] != "key_bob" {
		t.Errorf("after a refused claim the owner is %q", pod.Labels[LabelOwner])
	}
	// A pod made for a create (owned, with a deadline) is never claimable.
	if _, err := e.d.Create(ctx, testSpec("sbx_cold")); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Claim(ctx, "sbx_cold", "key_mallory", time.Now().Add(time.Hour)); err == nil {
		t.Error("a claim of a pod that was never pooled succeeded")
	}
	if err := e.d.Claim(ctx, "sbx_missing", "key_bob", time.Now().Add(time.Hour)); err == nil {
		t.Error("a claim of a missing pod succeeded")
	}
	for _, id := range []string{"sbx_pooled", "sbx_cold"} {
		if err := e.d.Destroy(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	assertNothingLeft(t, e)
}
