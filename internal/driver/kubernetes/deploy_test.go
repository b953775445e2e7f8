package kubernetes

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"withruntime.dev/runtime/internal/egress/policy"
	"withruntime.dev/runtime/internal/leader"
)

// deployDir is deploy/kubernetes/ from this package.
const deployDir = "../../../deploy/kubernetes"

// applyManifests server-side applies every object in deploy/kubernetes/
// with strict field validation, so that an unknown or misplaced field, a
// wrong type or a value the API refuses fails the test. It returns the
// objects as applied.
func applyManifests(t *testing.T, cfg *rest.Config) []*unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(deployDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", deployDir, err)
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
			js, err := yaml.YAMLToJSON(doc)
			if err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			obj := &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON(js); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			gvk := obj.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("%s document %d (%s): %v", f, i, gvk, err)
			}
			var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
			if obj.GetNamespace() != "" {
				ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
			}
			force := true
			if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, js, metav1.PatchOptions{
				FieldManager: "withruntime-test", Force: &force, FieldValidation: "Strict"}); err != nil {
				t.Fatalf("%s: apply %s %s: %v", f, gvk.Kind, obj.GetName(), err)
			}
			out = append(out, obj)
		}
	}
	return out
}

// TestDeployManifests: deploy/kubernetes/ applies to a real API server as
// is (strict validation), and the server's identity there can run the
// driver's whole sandbox life (pods, secrets, network policies, with Pod
// Security admission on the namespace) and leader election (get, create,
// update of its Lease) and nothing else: its Roles are enough and no more
// than the driver and the election need.
func TestDeployManifests(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	objs := applyManifests(t, e.c.Config)

	// The Deployment runs the Kubernetes driver, labelled as the sandboxes'
	// NetworkPolicy expects, under the ServiceAccount bound below.
	var dep *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			dep = o
		}
	}
	if dep == nil {
		t.Fatal("no Deployment in deploy/kubernetes")
	}
	labels, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "labels")
	k, v, _ := strings.Cut(DefaultServerSelector, "=")
	if labels[k] != v || dep.GetNamespace() != DefaultServerNamespace {
		t.Errorf("server pods %s/%v, want %s in %s (DefaultServerPeer)", dep.GetNamespace(), labels, DefaultServerSelector, DefaultServerNamespace)
	}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	if !slices.Contains(args, "--driver=kubernetes") || !slices.Contains(args, "--kubernetes-namespace="+testNS) {
		t.Errorf("server args %v, want --driver=kubernetes --kubernetes-namespace=%s", args, testNS)
	}

	// Two replicas on the shared PostgreSQL store, electing a leader: the
	// store's URL and password and the secrets key (the same for every
	// replica) come from Secrets, nothing from a volume only one pod can
	// mount.
	if n, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas"); n != 2 || !slices.Contains(args, "--leader-election") {
		t.Errorf("server: %d replicas, args %v; want 2 with --leader-election", n, args)
	}
	env, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "env")
	fromSecret := map[string]string{}
	for _, e := range env {
		em := e.(map[string]any)
		if ref, ok, _ := unstructured.NestedStringMap(em, "valueFrom", "secretKeyRef"); ok {
			fromSecret[em["name"].(string)] = ref["name"] + "/" + ref["key"]
		} else if em["name"] == "WITHRUNTIME_SECRETS_KEY_FILE" {
			fromSecret[em["name"].(string)] = em["value"].(string)
		}
	}
	if fromSecret["WITHRUNTIME_STORE"] != "withruntime-store/url" || fromSecret["PGPASSWORD"] != "withruntime-store/password" ||
		fromSecret["WITHRUNTIME_SECRETS_KEY_FILE"] != "/var/run/withruntime/secrets-key/secrets.key" {
		t.Errorf("server env %v: want the store from withruntime-store and the secrets key file mounted from its Secret", fromSecret)
	}
	volumes, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
	for _, v := range volumes {
		vm := v.(map[string]any)
		if _, ok := vm["persistentVolumeClaim"]; ok {
			t.Errorf("volume %v: a ReadWriteOnce claim holds the replicas to one node; want none", vm["name"])
		}
		if name, _, _ := unstructured.NestedString(vm, "secret", "secretName"); name == "withruntime-secrets-key" || name == "withruntime-egress-ca" {
			if mode, _, _ := unstructured.NestedInt64(vm, "secret", "defaultMode"); mode&0o077 != 0 {
				t.Errorf("%s volume mode %o: want its owner's only", name, mode)
			}
		}
	}
	mounts := map[string]string{}
	vmounts, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "volumeMounts")
	for _, m := range vmounts {
		mm := m.(map[string]any)
		mounts[mm["name"].(string)] = mm["mountPath"].(string)
	}
	if mounts["egress-ca"] != "/var/lib/withruntime/data/egress" {
		t.Errorf("server mounts %v: want the shared egress CA on DATA_DIR/egress", mounts)
	}
	for _, name := range []string{"withruntime-store", "withruntime-secrets-key", "withruntime-egress-ca"} {
		if _, err := e.c.Client.CoreV1().Secrets(DefaultServerNamespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("Secret %s: %v", name, err)
		}
	}

	// The egress proxy: the server serves it on 3128, the Service
	// withruntime-egress fronts it (its address reaches the server's args
	// through service links), and the server's NetworkPolicy lets the
	// sandboxes' namespace in on 3128 (and anyone on the API port).
	if !slices.Contains(args, "--kubernetes-egress-proxy=$(WITHRUNTIME_EGRESS_SERVICE_HOST):$(WITHRUNTIME_EGRESS_SERVICE_PORT)") ||
		!slices.Contains(args, "--kubernetes-egress-proxy-listen=:3128") {
		t.Errorf("server args %v, want the egress proxy flags", args)
	}
	svc, err := e.c.Client.CoreV1().Services(DefaultServerNamespace).Get(ctx, "withruntime-egress", metav1.GetOptions{})
	if err != nil || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 3128 || svc.Spec.Ports[0].TargetPort.String() != "egress-proxy" ||
		svc.Spec.Selector[k] != v {
		t.Errorf("egress Service: %v %+v, want port 3128 to the server pods' egress-proxy", err, svc)
	}
	ports, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "ports")
	proxyPort := false
	for _, p := range ports {
		pm := p.(map[string]any)
		proxyPort = proxyPort || pm["name"] == "egress-proxy" && pm["containerPort"] == int64(3128)
	}
	if !proxyPort {
		t.Errorf("server ports %v, want egress-proxy 3128", ports)
	}
	snp, err := e.c.Client.NetworkingV1().NetworkPolicies(DefaultServerNamespace).Get(ctx, "withruntime-server", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the server's NetworkPolicy: %v", err)
	}
	fromSandboxes := false
	for _, r := range snp.Spec.Ingress {
		if len(r.From) == 1 && r.From[0].NamespaceSelector != nil && r.From[0].NamespaceSelector.MatchLabels[corev1.LabelMetadataName] == testNS &&
			len(r.Ports) == 1 && r.Ports[0].Port.IntValue() == 3128 {
			fromSandboxes = true
		}
	}
	if !fromSandboxes {
		t.Errorf("server NetworkPolicy ingress %+v: want the sandboxes' namespace on 3128", snp.Spec.Ingress)
	}

	// The driver as the server's ServiceAccount.
	sa := rest.CopyConfig(e.c.Config)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:withruntime-system:withruntime-server"}
	client, err := k8s.NewForConfig(sa)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(ctx, Config{Client: client, Namespace: testNS, AgentImage: "withruntime/agent:test",
		EgressProxy: netip.AddrPortFrom(netip.MustParseAddr(svc.Spec.ClusterIP), 3128), EgressProxyPort: 3128})
	if err != nil {
		t.Fatalf("driver as the server's ServiceAccount: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	spec := testSpec("sbx_rbac")
	spec.Policy = &policy.Policy{Allow: []string{"203.0.113.0/24", "example.com"}}
	spec.TrustPEM = []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	h, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatalf("create as the server's ServiceAccount: %v", err)
	}
	if err := ping(ctx, h.Dial); err != nil {
		t.Fatal(err)
	}
	if err := d.SetNetwork(ctx, "sbx_rbac", policy.Policy{Internet: true}); err != nil {
		t.Fatalf("network change as the server's ServiceAccount: %v", err)
	}
	// A warm-pool pod claimed by a create, as the server's ServiceAccount.
	pooled := testSpec("sbx_rbac_pooled")
	pooled.Owner, pooled.Pooled = "", true
	if _, err := d.Create(ctx, pooled); err != nil {
		t.Fatalf("pooled create as the server's ServiceAccount: %v", err)
	}
	if err := d.Claim(ctx, "sbx_rbac_pooled", "key_alice", time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("claim as the server's ServiceAccount: %v", err)
	}
	if err := d.Destroy(ctx, "sbx_rbac_pooled"); err != nil {
		t.Fatalf("destroy of the claimed pod as the server's ServiceAccount: %v", err)
	}
	if ids, err := d.List(ctx); err != nil || len(ids) != 1 {
		t.Fatalf("List as the server's ServiceAccount: %v %v", ids, err)
	}
	if _, err := d.Recover(ctx, "sbx_rbac", h.State); err != nil {
		t.Fatalf("Recover as the server's ServiceAccount: %v", err)
	}
	if err := d.Destroy(ctx, "sbx_rbac"); err != nil {
		t.Fatalf("destroy as the server's ServiceAccount: %v", err)
	}
	assertNothingLeft(t, e)

	// Leader election (serve --leader-election) as the server's
	// ServiceAccount: it takes the Lease in its own namespace and releases
	// it when it stops.
	el, err := leader.New(leader.Config{Client: client, Namespace: DefaultServerNamespace, Name: "withruntime-server",
		Identity: "rbac-test", LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	electCtx, stopElect := context.WithCancel(ctx)
	led, elected := make(chan struct{}), make(chan error, 1)
	var once sync.Once
	go func() {
		elected <- el.Run(electCtx, func(term context.Context) { once.Do(func() { close(led) }); <-term.Done() })
	}()
	select {
	case <-led:
	case <-time.After(15 * time.Second):
		t.Fatalf("leader election as the server's ServiceAccount: no term in 15 s (%+v)", el.Status())
	}
	stopElect()
	if err := <-elected; err != nil {
		t.Fatalf("leader election as the server's ServiceAccount: %v", err)
	}
	lease, err := e.c.Client.CoordinationV1().Leases(DefaultServerNamespace).Get(ctx, "withruntime-server", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the Lease is still held by %q after the elector stopped; want it released", *h)
	}

	// And nothing more: no secret read, nothing outside its namespaces.
	forbidden := map[string]error{}
	forbidden["delete the Lease"] = client.CoordinationV1().Leases(DefaultServerNamespace).Delete(ctx, "withruntime-server", metav1.DeleteOptions{})
	_, forbidden["list leases"] = client.CoordinationV1().Leases(DefaultServerNamespace).List(ctx, metav1.ListOptions{})
	_, forbidden["get a lease in kube-system"] = client.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{})
	_, forbidden["get a lease in the sandboxes' namespace"] = client.CoordinationV1().Leases(testNS).Get(ctx, "withruntime-server", metav1.GetOptions{})
	_, forbidden["get a secret"] = client.CoreV1().Secrets(testNS).Get(ctx, "any", metav1.GetOptions{})
	_, forbidden["list secrets in kube-system"] = client.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
	_, forbidden["list pods in default"] = client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	_, forbidden["list nodes"] = client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	_, forbidden["create a namespace"] = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s as the server's ServiceAccount: %v, want Forbidden", what, err)
		}
	}
}
