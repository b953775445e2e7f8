package kubetest

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestControlPlane(t *testing.T) {
	start := time.Now()
	c := Start(t, Options{Scheduler: true})
	t.Logf("control plane ready in %v", time.Since(start).Round(time.Millisecond))
	v, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v1.37.2" {
		t.Errorf("server version %q, want v1.37.2 (the build's version ldflags)", v.GitVersion)
	}
	if _, err := c.Client.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("default service account: %v", err)
	}
}
