package kubernetes_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// upstreamIP is the test's fake internet: one HTTPS server in a network
// namespace of its own, reached from the test's namespace over a veth.
// 203.0.113.0/24 is a documentation range the guard lets through; the
// address is not the server's own (it is in the other namespace).
const upstreamIP = "203.0.113.10"

// TestEgressProxyOnRealNode: on a real node (pods under gVisor on the CNI
// bridge), a sandbox whose allow list names a host and which holds a secret
// for it runs curl: the request goes through HTTPS_PROXY to the server's
// egress proxy, which knows the pod by its IP, intercepts TLS with the
// Runtime CA (which the agent added to the image's bundle) and puts the
// secret's value in place of the placeholder; a host off the list is
// refused (TLS fails; plain HTTP gets 403 saying why). The fake internet is
// an HTTPS server in a network namespace the test makes; its DNS name is
// answered by a DNS server the test runs on the resolver address of
// /etc/resolv.conf inside the test's own namespace. A program ignoring the
// proxy is TestNetworkPolicyEnforcedOnRealNode's.
func TestEgressProxyOnRealNode(t *testing.T) {
	if os.Getenv("WITHRUNTIME_K8S_NODE") != "real" {
		t.Skip("needs the real node (scripts/test-kubernetes.sh --real-node): pods must send from their own IP")
	}
	dir := t.TempDir()
	caFile := fakeInternet(t, dir)
	// The server verifies intercepted hosts against its system roots: the
	// fake internet's CA here.
	t.Setenv("SSL_CERT_FILE", caFile)
	s := startServer(t, "--kubernetes-egress-proxy", "10.88.0.1:3128", "--kubernetes-egress-proxy-listen", ":3128")
	api, key := "http://"+s.addr, s.key

	if status, b := call(t, "POST", api+"/v1/secrets", key, `{"name": "API_TOKEN", "value": "s3cret-value", "hosts": ["api.example.com"]}`); status/100 != 2 {
		t.Fatalf("create secret: %d %s", status, b)
	}
	status, b := call(t, "POST", api+"/v1/sandboxes", key, `{"template": "base", "network": {"allow": ["api.example.com"]}, "secrets": ["API_TOKEN"]}`)
	if status/100 != 2 {
		t.Fatalf("create: %d %s", status, b)
	}
	var sb struct{ ID string }
	if err := json.Unmarshal(b, &sb); err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) (int, string, string) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"command": cmd, "timeoutSeconds": 60})
		status, b := call(t, "POST", api+"/v1/sandboxes/"+sb.ID+"/exec", key, string(body))
		if status != http.StatusOK {
			t.Fatalf("exec %q: %d %s", cmd, status, b)
		}
		var res struct {
			ExitCode       int
			Stdout, Stderr string
		}
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatal(err)
		}
		t.Logf("$ %s\nexit %d\nstdout: %s\nstderr: %s", cmd, res.ExitCode, res.Stdout, res.Stderr)
		return res.ExitCode, res.Stdout, res.Stderr
	}
	code, out, _ := run(`curl -sS --max-time 30 -H "Authorization: Bearer $API_TOKEN" https://api.example.com/`)
	if code != 0 || out != "upstream saw host=api.example.com auth=the secret's value" {
		t.Errorf("curl to the allowed host with the secret's placeholder: exit %d %q, want the value injected", code, out)
	}
	code, out, _ = run(`echo "$API_TOKEN"; echo "$HTTPS_PROXY"`)
	if code != 0 || strings.Contains(out, "s3cret") || !strings.Contains(out, "http://10.88.0.1:3128") {
		t.Errorf("the sandbox's environment: %q, want a placeholder and the proxy", out)
	}
	if code, out, _ = run(`curl -sS --max-time 30 https://other.example.net/`); code == 0 {
		t.Errorf("curl to a host off the list: exit 0 %q, want refused", out)
	}
	code, out, _ = run(`curl -sS --max-time 30 -w ' %{http_code}' http://other.example.net/`)
	if !strings.Contains(out, "not on this sandbox's allow list") || !strings.HasSuffix(out, " 403") {
		t.Errorf("plain HTTP to a host off the list: exit %d %q, want 403 saying why", code, out)
	}
	if status, b := call(t, "DELETE", api+"/v1/sandboxes/"+sb.ID, key, ""); status/100 != 2 {
		t.Fatalf("delete: %d %s", status, b)
	}
	assertNothingLeft(t, s)
}

// TestUpstreamHelper is the fake internet's HTTPS server when the test
// binary runs as it (WITHRUNTIME_TEST_UPSTREAM=dir, inside the upstream's
// namespace); otherwise it does nothing.
func TestUpstreamHelper(t *testing.T) {
	dir := os.Getenv("WITHRUNTIME_TEST_UPSTREAM")
	if dir == "" {
		t.Skip("only the fake internet's server")
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "leaf.pem"), filepath.Join(dir, "leaf-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Addr: net.JoinHostPort(upstreamIP, "443"), TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			auth := r.Header.Get("Authorization")
			if auth == "Bearer s3cret-value" {
				auth = "the secret's value" // never echoed back into the sandbox
			}
			fmt.Fprintf(w, "upstream saw host=%s auth=%s", r.Host, auth)
		})}
	t.Fatal(srv.ListenAndServeTLS("", ""))
}

// fakeInternet makes a CA and a certificate for the fake internet's names,
// a network namespace holding upstreamIP (its HTTPS server: this test
// binary as TestUpstreamHelper), and a DNS server answering those names on
// the resolver address of /etc/resolv.conf in the test's namespace. It
// returns the CA's file. Everything goes when the test ends.
func fakeInternet(t *testing.T, dir string) string {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fake internet CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject: pkix.Name{CommonName: "api.example.com"}, DNSNames: []string{"api.example.com", "other.example.net"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leafKeyDER, _ := x509.MarshalPKCS8PrivateKey(leafKey)
	for name, block := range map[string]*pem.Block{
		"ca.pem": {Type: "CERTIFICATE", Bytes: caDER}, "leaf.pem": {Type: "CERTIFICATE", Bytes: leafDER},
		"leaf-key.pem": {Type: "PRIVATE KEY", Bytes: leafKeyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// The upstream's namespace: a process of its own (unshare), one end
	// of a veth moved into it.
	holder := exec.Command("unshare", "--net", "--", "sleep", "3600")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	pid := strconv.Itoa(holder.Process.Pid)
	sh := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	time.Sleep(100 * time.Millisecond) // unshare has made the namespace
	sh("ip", "link", "add", "wrt-up0", "type", "veth", "peer", "name", "wrt-up1")
	t.Cleanup(func() { exec.Command("ip", "link", "del", "wrt-up0").Run() })
	sh("ip", "link", "set", "wrt-up1", "netns", pid)
	sh("ip", "addr", "add", "203.0.113.1/24", "dev", "wrt-up0")
	sh("ip", "link", "set", "wrt-up0", "up")
	sh("nsenter", "-t", pid, "-n", "ip", "addr", "add", upstreamIP+"/24", "dev", "wrt-up1")
	sh("nsenter", "-t", pid, "-n", "ip", "link", "set", "wrt-up1", "up")
	sh("nsenter", "-t", pid, "-n", "ip", "link", "set", "lo", "up")
	// Replies to pods (10.88.0.0/16, routed by the node) go back the same way.
	sh("nsenter", "-t", pid, "-n", "ip", "route", "add", "default", "via", "203.0.113.1")
	up := exec.Command("nsenter", "-t", pid, "-n", os.Args[0], "-test.run=^TestUpstreamHelper$")
	up.Env = append(os.Environ(), "WITHRUNTIME_TEST_UPSTREAM="+dir)
	up.Stdout, up.Stderr = os.Stderr, os.Stderr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Process.Kill(); up.Wait() })

	// DNS for the fake internet's names.
	resolver := "10.255.255.53"
	if b, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "nameserver" {
				resolver = f[1]
				break
			}
		}
	}
	if out, err := exec.Command("ip", "addr", "add", resolver+"/32", "dev", "lo").CombinedOutput(); err != nil && !strings.Contains(string(out), "File exists") &&
		!strings.Contains(string(out), "already assigned") { // an earlier test of this binary added it
		t.Fatalf("resolver address %s: %v: %s", resolver, err, out)
	}
	pc, err := net.ListenPacket("udp", net.JoinHostPort(resolver, "53"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go serveDNS(pc, map[string]net.IP{"api.example.com.": net.ParseIP(upstreamIP), "other.example.net.": net.ParseIP(upstreamIP)})

	// Wait for the upstream.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(upstreamIP, "443"), time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fake internet's server: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return filepath.Join(dir, "ca.pem")
}

// serveDNS answers A queries for names, NXDOMAIN for the rest.
func serveDNS(pc net.PacketConn, names map[string]net.IP) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
		ip, ok := names[strings.ToLower(q.Name.String())]
		if !ok {
			b = dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, RCode: dnsmessage.RCodeNameError})
		}
		b.EnableCompression()
		_ = b.StartQuestions()
		_ = b.Question(q)
		_ = b.StartAnswers()
		if ok && q.Type == dnsmessage.TypeA {
			var a [4]byte
			copy(a[:], ip.To4())
			_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: a})
		}
		msg, err := b.Finish()
		if err == nil {
			_, _ = pc.WriteTo(msg, from)
		}
	}
}
