package kubernetes_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// call sends one API request and returns its status and body.
func call(t *testing.T, method, url, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func egressCIDRs(np *networkingv1.NetworkPolicy) []string {
	var out []string
	for _, r := range np.Spec.Egress {
		for _, to := range r.To {
			if to.IPBlock != nil {
				out = append(out, to.IPBlock.CIDR)
			}
		}
	}
	return out
}

// checkNetworkPolicies: through `serve --driver kubernetes`, a create's
// network policy becomes its pod's NetworkPolicy and a PUT .../network
// changes it; what only the egress proxy could enforce (host names,
// secrets) is refused with 400, never ignored; and the server makes no
// network of its own on the host (no egress names locked, no namespaces).
func checkNetworkPolicies(t *testing.T, s *server) {
	t.Helper()
	c, api, key, data := s.c, "http://"+s.addr, s.key, s.data
	ctx := context.Background()
	for _, body := range []string{
		`{"template": "base", "network": {"allow": ["example.com"]}}`,
		`{"template": "base", "network": {"internet": true, "deny": ["*.example.org"]}}`,
		`{"template": "base", "secrets": ["TOKEN"]}`,
	} {
		status, b := call(t, "POST", api+"/v1/sandboxes", key, body)
		if status != http.StatusBadRequest || !bytes.Contains(b, []byte("egress proxy")) {
			t.Errorf("create %s: %d %s, want 400 saying the egress proxy is needed", body, status, b)
		}
	}
	status, b := call(t, "POST", api+"/v1/sandboxes", key, `{"template": "base", "network": {"allow": ["203.0.113.0/24"]}}`)
	if status != http.StatusOK && status != http.StatusCreated {
		t.Fatalf("create with an allow list: %d %s", status, b)
	}
	var sb struct{ ID string }
	if err := json.Unmarshal(b, &sb); err != nil || sb.ID == "" {
		t.Fatalf("create answer %s: %v", b, err)
	}
	name := "wr-" + strings.ReplaceAll(sb.ID, "_", "-")
	nps := c.Client.NetworkingV1().NetworkPolicies(ns)
	np, err := nps.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the sandbox's NetworkPolicy: %v", err)
	}
	if got := egressCIDRs(np); len(got) != 1 || got[0] != "203.0.113.0/24" {
		t.Fatalf("egress %v, want 203.0.113.0/24 only", got)
	}
	// serve's defaults: only the server's pods in withruntime-system may
	// reach the agent.
	if in := np.Spec.Ingress; len(in) != 1 || len(in[0].From) != 1 || in[0].From[0].NamespaceSelector == nil ||
		in[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "withruntime-system" ||
		in[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "withruntime-server" {
		t.Errorf("ingress %+v, want the server's pods in withruntime-system only", in)
	}
	if status, b := call(t, "PUT", api+"/v1/sandboxes/"+sb.ID+"/network", key, `{"allow": ["example.com"]}`); status != http.StatusBadRequest {
		t.Errorf("PUT a host name: %d %s, want 400", status, b)
	}
	if status, b := call(t, "PUT", api+"/v1/sandboxes/"+sb.ID+"/network", key, `{"internet": false}`); status != http.StatusOK {
		t.Fatalf("PUT {internet: false}: %d %s", status, b)
	}
	if np, err = nps.Get(ctx, name, metav1.GetOptions{}); err != nil || len(np.Spec.Egress) != 0 {
		t.Fatalf("after PUT {internet: false}: %v, egress %+v, want none", err, np.Spec.Egress)
	}
	if status, b := call(t, "GET", api+"/v1/sandboxes/"+sb.ID+"/network", key, ""); status != http.StatusOK || !bytes.Contains(b, []byte(`"internet":false`)) {
		t.Errorf("GET network: %d %s", status, b)
	}
	// The server made nothing for sandbox networks on this host.
	abs, _ := filepath.Abs(data)
	sum := sha256.Sum256([]byte(abs))
	egressName := "withruntime-" + hex.EncodeToString(sum[:])[:8]
	if _, err := os.Stat("/run/withruntime/names/name-" + egressName); err == nil {
		t.Errorf("the server locked the egress name %s: it set up host networks", egressName)
	}
	if entries, _ := os.ReadDir("/run/netns"); len(entries) > 0 {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), egressName) {
				t.Errorf("network namespace %s on the host", e.Name())
			}
		}
	}
	// A policy object lost or changed while no server ran (or never made,
	// by an older server) is made again from the record when the next
	// server adopts the sandbox.
	for _, tamper := range []func() error{
		func() error { return nps.Delete(ctx, name, metav1.DeleteOptions{}) },
		func() error {
			cur, err := nps.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}} // everything out
			_, err = nps.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		},
	} {
		s.stop()
		if err := tamper(); err != nil {
			t.Fatal(err)
		}
		s.start(t)
		key = s.key
		if np, err = nps.Get(ctx, name, metav1.GetOptions{}); err != nil || len(np.Spec.Egress) != 0 {
			t.Fatalf("after a restart with the policy object lost or changed: %v, %+v, want it again with no egress", err, np)
		}
	}
	if status, b := call(t, "DELETE", api+"/v1/sandboxes/"+sb.ID, key, ""); status/100 != 2 {
		t.Fatalf("delete: %d %s", status, b)
	}
}
