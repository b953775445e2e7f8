package kubernetes_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEgressProxyThroughServer: `serve --driver kubernetes
// --kubernetes-egress-proxy` accepts what the in-cluster egress proxy
// enforces (host names, wildcards, a secret): the pod holds the secret's
// placeholder only, is pointed at the proxy and given the Runtime CA, and
// its NetworkPolicy lets it out to the proxy's port and nowhere else. The
// proxy serves the pod's address as that sandbox (its policy read from the
// store: a host off the list gets 403 saying so), resets an address no
// sandbox has, and forgets the pod once it is deleted.
//
// On the fake node (a TEST DOUBLE) a pod's address is a loopback address
// the test sends from itself, standing in for the pod's own traffic.
func TestEgressProxyThroughServer(t *testing.T) {
	if os.Getenv("WITHRUNTIME_K8S_NODE") == "real" {
		t.Skip("on a real node TestEgressProxyOnRealNode sends the pod's own traffic through the proxy")
	}
	proxyAddr := freeAddr(t)
	s := startServer(t, "--kubernetes-egress-proxy", proxyAddr, "--kubernetes-egress-proxy-listen", proxyAddr)
	api, key, ctx := "http://"+s.addr, s.key, context.Background()

	if status, b := call(t, "POST", api+"/v1/secrets", key, `{"name": "API_TOKEN", "value": "s3cret-value", "hosts": ["api.example.com"]}`); status/100 != 2 {
		t.Fatalf("create secret: %d %s", status, b)
	}
	status, b := call(t, "POST", api+"/v1/sandboxes", key,
		`{"template": "base", "network": {"allow": ["api.example.com", "*.example.org"]}, "secrets": ["API_TOKEN"]}`)
	if status != http.StatusOK && status != http.StatusCreated {
		t.Fatalf("create with host names and a secret: %d %s", status, b)
	}
	var sb struct{ ID string }
	if err := json.Unmarshal(b, &sb); err != nil {
		t.Fatal(err)
	}
	name := "wr-" + strings.ReplaceAll(sb.ID, "_", "-")
	pod, err := s.c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["HTTPS_PROXY"] != "http://"+proxyAddr || env["HTTP_PROXY"] != "http://"+proxyAddr {
		t.Errorf("pod proxy env %v, want http://%s", env, proxyAddr)
	}
	if ph := env["API_TOKEN"]; ph == "" || strings.Contains(ph, "s3cret") {
		t.Errorf("pod's API_TOKEN %q: want a placeholder, never the value", ph)
	}
	if env["SSL_CERT_FILE"] != "/etc/ssl/certs/ca-certificates.crt" {
		t.Errorf("pod's SSL_CERT_FILE %q", env["SSL_CERT_FILE"])
	}
	for _, c := range append(pod.Spec.Containers, pod.Spec.InitContainers...) {
		for _, e := range c.Env {
			if strings.Contains(e.Value, "s3cret") {
				t.Fatalf("the secret's value is in the pod spec (%s)", e.Name)
			}
		}
	}
	if !slices.Contains(pod.Spec.Containers[0].Args, "-trust") {
		t.Errorf("agent args %v: want -trust", pod.Spec.Containers[0].Args)
	}
	sec, err := s.c.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	ca, caErr := os.ReadFile(s.data + "/egress/ca.pem")
	if err != nil || caErr != nil || !bytes.Contains(ca, []byte("BEGIN CERTIFICATE")) || !bytes.Equal(sec.Data["trust.crt"], ca) {
		t.Errorf("the pod's trust.crt: %v, want the server's Runtime CA", err)
	}
	for k, v := range sec.Data {
		if bytes.Contains(v, []byte("s3cret")) {
			t.Fatalf("the secret's value is in the pod's Secret (%s)", k)
		}
	}
	np, err := s.c.Client.NetworkingV1().NetworkPolicies(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(proxyAddr)
	if len(np.Spec.Egress) != 1 || len(np.Spec.Egress[0].Ports) != 1 || np.Spec.Egress[0].Ports[0].Port.String() != port || np.Spec.Egress[0].To[0].IPBlock != nil {
		t.Errorf("egress %+v: want the server's pods on the proxy port alone", np.Spec.Egress)
	}

	// The proxy knows the pod by its address.
	podIP := pod.Status.PodIP
	status, body := viaProxy(t, podIP, proxyAddr, "other.example.net")
	if status != http.StatusForbidden || !strings.Contains(body, "not on this sandbox's allow list") {
		t.Errorf("the pod to a host off its list: %d %q, want 403 saying why", status, body)
	}
	if status, body := viaProxy(t, "127.0.0.1", proxyAddr, "api.example.com"); status != 0 {
		t.Errorf("an address no sandbox has: %d %q, want the connection reset", status, body)
	}
	if status, b := call(t, "DELETE", api+"/v1/sandboxes/"+sb.ID, key, ""); status/100 != 2 {
		t.Fatalf("delete: %d %s", status, b)
	}
	assertNothingLeft(t, s)
	if status, body := viaProxy(t, podIP, proxyAddr, "other.example.net"); status != 0 {
		t.Errorf("the deleted pod's address: %d %q, want the connection reset", status, body)
	}
}

// viaProxy sends a plain proxy request for http://host/ from src through
// the proxy; status 0 means no answer (reset or closed).
func viaProxy(t *testing.T, src, proxy, host string) (int, string) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", proxy)
	if err != nil {
		return 0, err.Error() // reset at once
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", host, host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
