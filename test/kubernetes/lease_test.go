package kubernetes_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSetTimeoutWithinPodDeadline: through `serve --driver kubernetes`, a
// sandbox created with a 60 s lease whose lease is then extended to an hour
// (POST /v1/sandboxes/{id}/timeout, E2B's set_timeout) keeps a pod the
// kubelet does not kill at the first lease: its activeDeadlineSeconds,
// which Kubernetes never lets be raised, covers the new lease end (it is
// the server's longest lease from the create, plus the backstop). An
// extension past that deadline (the longest lease again, some seconds
// after the create) is refused with 400 saying the largest timeoutSeconds
// still possible, and the sandbox runs on with the lease it had.
func TestSetTimeoutWithinPodDeadline(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	api := "http://" + s.addr
	id, _ := create(t, s, `{"template": "base", "timeoutSeconds": 60}`)
	name := "wr-" + strings.ReplaceAll(id, "_", "-")

	status, b := call(t, "POST", api+"/v1/sandboxes/"+id+"/timeout", s.key, `{"timeoutSeconds": 3600}`)
	if status != http.StatusOK {
		t.Fatalf("extend to an hour: %d %s", status, b)
	}
	var sb struct {
		LeaseEndsAt time.Time `json:"leaseEndsAt"`
	}
	if err := json.Unmarshal(b, &sb); err != nil || time.Until(sb.LeaseEndsAt) < 59*time.Minute {
		t.Fatalf("extend answer %s (%v): want the lease an hour from now", b, err)
	}
	pod, err := s.c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.ActiveDeadlineSeconds == nil || pod.Status.StartTime == nil {
		t.Fatalf("pod %s: deadline %v, start %v; want both", name, pod.Spec.ActiveDeadlineSeconds, pod.Status.StartTime)
	}
	killedAt := pod.Status.StartTime.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second)
	if !killedAt.After(sb.LeaseEndsAt) {
		t.Fatalf("the kubelet kills pod %s at %s (activeDeadlineSeconds %d), before the extended lease ends at %s",
			name, killedAt.Format(time.RFC3339), *pod.Spec.ActiveDeadlineSeconds, sb.LeaseEndsAt.Format(time.RFC3339))
	}

	// Past the deadline: refused, saying what is possible.
	status, b = call(t, "POST", api+"/v1/sandboxes/"+id+"/timeout", s.key, `{"timeoutSeconds": 86400}`)
	if status != http.StatusBadRequest || !strings.Contains(string(b), "activeDeadlineSeconds") || !strings.Contains(string(b), "timeoutSeconds can be at most") {
		t.Fatalf("extend past the pod's deadline: %d %s, want 400 saying the largest timeoutSeconds", status, b)
	}
	status, b = call(t, "GET", api+"/v1/sandboxes/"+id, s.key, "")
	var after struct {
		State       string
		LeaseEndsAt time.Time `json:"leaseEndsAt"`
	}
	if err := json.Unmarshal(b, &after); status != http.StatusOK || err != nil || after.State != "running" || !after.LeaseEndsAt.Equal(sb.LeaseEndsAt) {
		t.Fatalf("after the refused extension: %d %s, want running with the lease ending at %s", status, b, sb.LeaseEndsAt)
	}
	if status, b := call(t, "POST", api+"/v1/sandboxes/"+id+"/exec", s.key, `{"command": "echo $((6*7))"}`); status != http.StatusOK || !strings.Contains(string(b), "42") {
		t.Fatalf("exec after the refused extension: %d %s", status, b)
	}
	if status, b := call(t, "DELETE", api+"/v1/sandboxes/"+id, s.key, ""); status/100 != 2 {
		t.Fatalf("delete: %d %s", status, b)
	}
	assertNothingLeft(t, s)
}
