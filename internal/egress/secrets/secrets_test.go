package secrets

import (
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const value = "sk-live-0123456789abcdef"

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		s    Secret
		want string
	}{
		{Secret{Name: "1BAD", Value: value, Hosts: []string{"a.example.com"}}, "environment variable name"},
		{Secret{Name: "PATH", Value: value, Hosts: []string{"a.example.com"}}, "need this variable"},
		{Secret{Name: "LD_PRELOAD", Value: value, Hosts: []string{"a.example.com"}}, "need this variable"},
		{Secret{Name: "SSL_CERT_FILE", Value: value, Hosts: []string{"a.example.com"}}, "certificate authorities"},
		{Secret{Name: "SSL_CERT_DIR", Value: value, Hosts: []string{"a.example.com"}}, "certificate authorities"},
		{Secret{Name: "ssl_cert_dir", Value: value, Hosts: []string{"a.example.com"}}, "certificate authorities"},
		{Secret{Name: "HTTP_PROXY", Value: value, Hosts: []string{"a.example.com"}}, "pick the proxy"},
		{Secret{Name: "http_proxy", Value: value, Hosts: []string{"a.example.com"}}, "pick the proxy"},
		{Secret{Name: "Https_Proxy", Value: value, Hosts: []string{"a.example.com"}}, "pick the proxy"},
		{Secret{Name: "ALL_PROXY", Value: value, Hosts: []string{"a.example.com"}}, "pick the proxy"},
		{Secret{Name: "all_proxy", Value: value, Hosts: []string{"a.example.com"}}, "pick the proxy"},
		{Secret{Name: "NO_PROXY", Value: value, Hosts: []string{"a.example.com"}}, "pick the proxy"},
		{Secret{Name: "no_Proxy", Value: value, Hosts: []string{"a.example.com"}}, "pick the proxy"},
		{Secret{Name: "OK", Value: "", Hosts: []string{"a.example.com"}}, "empty value"},
		{Secret{Name: "OK", Value: "a\nb", Hosts: []string{"a.example.com"}}, "line breaks"},
		{Secret{Name: "OK", Value: value}, "no hosts"},
		{Secret{Name: "OK", Value: value, Hosts: []string{"https://a.example.com"}}, "not a URL"},
		{Secret{Name: "OK", Value: value, Hosts: []string{"203.0.113.5"}}, "host names only"},
	} {
		err := Validate(c.s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%v) = %v, want %q", c.s, err, c.want)
		}
		if err != nil && c.s.Value != "" && strings.Contains(err.Error(), c.s.Value) {
			t.Errorf("error shows the value: %v", err)
		}
	}
	// Names that only contain a reserved one stay free.
	for _, name := range []string{"HTTP_PROXY_TOKEN", "MY_HTTPS_PROXY", "NO_PROXY_KEY", "SSL_CERT_DIR_X", "PATHS"} {
		if err := Validate(Secret{Name: name, Value: value, Hosts: []string{"a.example.com"}}); err != nil {
			t.Errorf("Validate(%s) = %v, want it accepted", name, err)
		}
	}
}

func TestValueNeverPrinted(t *testing.T) {
	s := Secret{Name: "API_KEY", Value: value, Hosts: []string{"api.example.com"}}
	var b strings.Builder
	slog.New(slog.NewJSONHandler(&b, nil)).Info("x", "secret", s)
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s", s, s, s, s), b.String()} {
		if strings.Contains(out, value) {
			t.Errorf("value printed: %s", out)
		}
	}
}

func TestInjectAndScrub(t *testing.T) {
	key := []byte("k")
	set, env, err := NewSet(key, "sbx1", []Secret{
		{Name: "API_KEY", Value: value, Hosts: []string{"api.example.com", "*.example.org"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ph := env["API_KEY"]
	if ph != Placeholder(key, "sbx1", "API_KEY") || ph == Placeholder(key, "sbx2", "API_KEY") || strings.Contains(ph, value) {
		t.Fatalf("placeholder %q", ph)
	}
	if !set.Covers("api.example.com") || !set.Covers("x.example.org") || set.Covers("example.org") || set.Covers("evil.example.net") {
		t.Error("Covers is wrong")
	}
	h := http.Header{
		"Authorization": {"Bearer " + ph},
		"X-Api-Key":     {ph},
		"X-Other":       {"unrelated"},
	}
	if n := set.Inject(h, "api.example.com"); n != 2 {
		t.Errorf("Inject made %d replacements", n)
	}
	if h.Get("Authorization") != "Bearer "+value || h.Get("X-Api-Key") != value || h.Get("X-Other") != "unrelated" {
		t.Errorf("after Inject: %v", h)
	}
	basic := http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("git:"+ph))}}
	set.Inject(basic, "x.example.org")
	if raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(basic.Get("Authorization"), "Basic ")); string(raw) != "git:"+value {
		t.Errorf("Basic credentials after Inject: %q", raw)
	}
	other := http.Header{"Authorization": {"Bearer " + ph}}
	if n := set.Inject(other, "evil.example.net"); n != 0 || other.Get("Authorization") != "Bearer "+ph {
		t.Errorf("injected for a host the secret is not for: %v", other)
	}
	resp := http.Header{"X-Echo": {"your key is " + value}}
	set.Scrub(resp)
	if resp.Get("X-Echo") != "your key is "+ph {
		t.Errorf("Scrub: %v", resp)
	}
	if _, _, err := NewSet(key, "s", []Secret{{Name: "A", Value: "v", Hosts: []string{"a.example.com"}}, {Name: "A", Value: "w", Hosts: []string{"a.example.com"}}}); err == nil {
		t.Error("duplicate name accepted")
	}
	var nilSet *Set
	if nilSet.Covers("a.example.com") || nilSet.Inject(http.Header{}, "a") != 0 {
		t.Error("nil set does something")
	}
}

func TestCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, caKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	again, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if string(again.CertPEM()) != string(ca.CertPEM()) || string(again.PlaceholderKey()) != string(ca.PlaceholderKey()) {
		t.Fatal("reloaded CA differs")
	}
	cert, err := again.Certificate("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: "api.example.com", Roots: pool}); err != nil {
		t.Errorf("leaf does not verify: %v", err)
	}
	if c2, _ := again.Certificate("api.example.com"); c2 != cert {
		t.Error("leaf not cached")
	}
	b := ca.Bundle([]byte("SYSTEM"))
	if !strings.HasPrefix(string(b), "SYSTEM\n-----BEGIN CERTIFICATE-----") {
		t.Errorf("bundle = %q", b)
	}
}
