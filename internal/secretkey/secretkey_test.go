package secretkey

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSealOpen(t *testing.T) {
	k, err := New()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := New()
	value := []byte("sk-live-0123456789abcdef")
	ctx := []byte("key_a\x00API_KEY")
	sealed := k.Seal(ctx, value)
	if bytes.Contains(sealed, value) {
		t.Fatal("the sealed value holds the value in clear")
	}
	if again := k.Seal(ctx, value); bytes.Equal(again, sealed) {
		t.Error("two seals of one value are equal: the nonce is not fresh")
	}
	got, err := k.Open(ctx, sealed)
	if err != nil || !bytes.Equal(got, value) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	for name, try := range map[string]func() ([]byte, error){
		"another key":     func() ([]byte, error) { return other.Open(ctx, sealed) },
		"another context": func() ([]byte, error) { return k.Open([]byte("key_b\x00API_KEY"), sealed) },
		"altered":         func() ([]byte, error) { return k.Open(ctx, tampered) },
		"truncated":       func() ([]byte, error) { return k.Open(ctx, sealed[:20]) },
		"empty":           func() ([]byte, error) { return k.Open(ctx, nil) },
	} {
		got, err := try()
		if !errors.Is(err, ErrOpen) || got != nil {
			t.Errorf("%s: Open = %q, %v; want nothing and ErrOpen", name, got, err)
		}
	}
}

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secrets.key")
	k, _ := New()
	if err := Write(path, k); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v; want mode 0600", fi.Mode(), err)
	}
	got, err := Load(path)
	if err != nil || got.ID() != k.ID() {
		t.Fatalf("Load = %v, %v; want %v", got, err, k)
	}
	if s := fmt.Sprintf("%v %+v %#v %s", k, k, k, k); strings.Contains(s, fmt.Sprintf("%x", k.k[:])) {
		t.Errorf("the key prints itself: %s", s)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("Write left %d files, want the key file only", len(entries))
	}

	// An operator's own key, as `openssl rand -hex 32` writes it.
	own := filepath.Join(dir, "own.key")
	_ = os.WriteFile(own, []byte(strings.Repeat("ab", 32)+"\n"), 0o400)
	if _, err := Load(own); err != nil {
		t.Errorf("Load of a hex key file: %v", err)
	}
	for name, c := range map[string]struct {
		text string
		mode os.FileMode
		want string
	}{
		"readable by others": {strings.Repeat("ab", 32), 0o644, "chmod 600"},
		"group writable":     {strings.Repeat("ab", 32), 0o620, "chmod 600"},
		"short":              {strings.Repeat("ab", 16), 0o600, "64 hexadecimal"},
		"not hex":            {strings.Repeat("zz", 32), 0o600, "not hexadecimal"},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		_ = os.WriteFile(p, []byte(c.text), c.mode)
		_ = os.Chmod(p, c.mode)
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Load = %v, want an error saying %q", name, err, c.want)
		}
	}
	if _, err := Load(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want ErrNotExist", err)
	}
}

func TestRing(t *testing.T) {
	a, _ := New()
	b, _ := New()
	r := NewRing(b, a, nil)
	if r.Current() != b {
		t.Error("the current key is not the one that seals")
	}
	for _, k := range []*Key{a, b} {
		if got, ok := r.Key(k.ID()); !ok || got != k {
			t.Errorf("ring lacks %v", k)
		}
	}
	if _, ok := r.Key("0000000000000000"); ok {
		t.Error("ring has an unknown key")
	}
}
