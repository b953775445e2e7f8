package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAddTrust: the Runtime CA is appended to the image's bundle (whose
// roots stay), once however often the agent boots, and a bundle that is a
// link is replaced, never written through.
func TestAddTrust(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "trust.crt")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nRUNTIME\n-----END CERTIFICATE-----\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "elsewhere.crt")
	if err := os.WriteFile(target, []byte("-----BEGIN CERTIFICATE-----\nIMAGE ROOT\n-----END CERTIFICATE-----"), 0o644); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "etc/ssl/certs/ca-certificates.crt")
	if err := os.MkdirAll(filepath.Dir(bundle), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, bundle); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := addTrust(ca, bundle); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := os.ReadFile(bundle)
	if strings.Count(string(got), "RUNTIME") != 1 || !strings.HasPrefix(string(got), "-----BEGIN CERTIFICATE-----\nIMAGE ROOT\n-----END CERTIFICATE-----\n-----BEGIN") {
		t.Fatalf("bundle %q: want the image's root, then the Runtime CA once", got)
	}
	if old, _ := os.ReadFile(target); strings.Contains(string(old), "RUNTIME") {
		t.Fatal("wrote through the link")
	}
	// No bundle in the image: one is made.
	fresh := filepath.Join(dir, "none/ca-certificates.crt")
	if err := addTrust(ca, fresh); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(fresh); !strings.Contains(string(got), "RUNTIME") {
		t.Fatalf("new bundle %q", got)
	}
}
