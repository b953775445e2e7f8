package kubernetes

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"withruntime.dev/runtime/internal/agentauth"
)

func TestObjectNamesAreDNSLabels(t *testing.T) {
	for _, id := range []string{"sbx_abc123", "a", "sbx_" + "0123456789012345678901234567890123456789"} {
		if errs := validation.IsDNS1123Label(objectName(id)); len(errs) != 0 {
			t.Errorf("objectName(%q) = %q: %v", id, objectName(id), errs)
		}
	}
	for _, bad := range []string{"", "../x", "sbx.a", "SBX", "sbx/a"} {
		if validID(bad) == nil {
			t.Errorf("validID(%q) accepted", bad)
		}
	}
}

func TestOwnerLabelIsAValidLabelValue(t *testing.T) {
	for _, owner := range []string{"", "key_abc", "a b/c:d", "-x-", string(make([]byte, 100))} {
		if errs := validation.IsValidLabelValue(ownerLabel(owner)); len(errs) != 0 {
			t.Errorf("ownerLabel(%q) = %q: %v", owner, ownerLabel(owner), errs)
		}
	}
}

func TestPodShape(t *testing.T) {
	d := &Driver{cfg: Config{Namespace: "ns", RuntimeClass: "gvisor", AgentImage: "agent:1", AgentPort: 7000, MaxLease: 2 * time.Hour}}
	now := time.Unix(1_700_000_000, 0)
	spec := testSpec("sbx_x")
	spec.LeaseEndsAt = now.Add(5 * time.Minute)
	spec.CPU = 1.5
	p := d.pod(spec, "tpl:1", now)
	c := p.Spec.Containers[0]
	if !c.Resources.Requests.Cpu().Equal(resource.MustParse("1500m")) || !c.Resources.Limits.Memory().Equal(resource.MustParse("512Mi")) {
		t.Errorf("resources %+v", c.Resources)
	}
	// The longest lease plus the backstop, whatever the create's lease: a
	// running pod's deadline can never be raised.
	if got := *p.Spec.ActiveDeadlineSeconds; got != 7200+60 {
		t.Errorf("activeDeadlineSeconds %d, want the 2 h longest lease + 60", got)
	}
	if got := *deadlineSeconds(now.Add(-time.Hour), now); got != 1 {
		t.Errorf("deadline of a past end %d, want 1", got)
	}
	if *p.Spec.RuntimeClassName != "gvisor" || p.Spec.InitContainers[0].Image != "agent:1" || c.Image != "tpl:1" {
		t.Errorf("images/runtime class: %+v", p.Spec)
	}
	creds, _ := agentauth.New("sbx_x", time.Hour)
	sec := d.secret(spec, creds)
	if string(sec.Data[agentauth.TokenFile]) != creds.Token || sec.Name != p.Spec.Volumes[1].Secret.SecretName {
		t.Errorf("secret %s does not carry the token or is not the pod's volume", sec.Name)
	}
	if templateName("/var/lib/withruntime/templates/base/rootfs") != "base" {
		t.Error("templateName")
	}
}

// TestImageOfRootFS: a template directory maps to its image by name; an
// image reference (registry.Catalog's, pinned by digest) is the image.
func TestImageOfRootFS(t *testing.T) {
	d := &Driver{cfg: Config{TemplateImage: func(n string) string { return "reg/t-" + n + ":latest" }}}
	pinned := "127.0.0.1:5000/wr/template-base@sha256:" + strings.Repeat("a", 64)
	for rootfs, want := range map[string]string{
		"/var/lib/withruntime/templates/base/rootfs": "reg/t-base:latest",
		pinned: pinned,
	} {
		if got := d.image(rootfs); got != want {
			t.Errorf("image(%q) = %q, want %q", rootfs, got, want)
		}
	}
}
