// Package secretkey seals secret values at rest. A value is sealed with NaCl
// secretbox (XSalsa20-Poly1305, golang.org/x/crypto/nacl/secretbox) under a
// 32-byte key kept in a file of its own, apart from the database: a copy of
// the database alone gives no value away.
//
// The key file holds the key as 64 hexadecimal characters and a newline
// (`openssl rand -hex 32` writes one), and must be readable by its owner
// only (mode 0600 or stricter). A sealed value is bound to a context (for
// secrets: the owner and the name), so a sealed value copied into another
// row does not open there.
package secretkey

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/crypto/nacl/secretbox"
)

// Size is a key's length in bytes.
const Size = 32

const nonceSize = 24

// ErrOpen says a sealed value does not decrypt with the key: it was sealed
// with another key, for another context, or it was altered.
var ErrOpen = errors.New("sealed value does not decrypt")

// Key is a secrets key. Its zero value is not usable; get one from New,
// Parse or Load.
type Key struct {
	k  [Size]byte
	id string
}

// New returns a fresh random key (crypto/rand).
func New() (*Key, error) {
	var b [Size]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	return fromBytes(b), nil
}

func fromBytes(b [Size]byte) *Key {
	sum := sha256.Sum256(append([]byte("withruntime secrets key id\x00"), b[:]...))
	return &Key{k: b, id: hex.EncodeToString(sum[:8])}
}

// Parse reads a key from its text form: 64 hexadecimal characters,
// surrounding white space ignored.
func Parse(text []byte) (*Key, error) {
	t := bytes.TrimSpace(text)
	if len(t) != 2*Size {
		return nil, fmt.Errorf("secrets key: want %d hexadecimal characters (a 32-byte key, e.g. from `openssl rand -hex 32`), got %d characters", 2*Size, len(t))
	}
	var b [Size]byte
	if _, err := hex.Decode(b[:], t); err != nil {
		return nil, fmt.Errorf("secrets key: not hexadecimal (a 32-byte key, e.g. from `openssl rand -hex 32`): %w", err)
	}
	return fromBytes(b), nil
}

// Derive returns a 32-byte key for one purpose (a label no other use
// shares): HMAC-SHA256 of the purpose under k. It gives signing keys that
// change with the secrets key and tell nothing of it.
func (k *Key) Derive(purpose string) []byte {
	m := hmac.New(sha256.New, k.k[:])
	m.Write([]byte("withruntime derived key\x00" + purpose))
	return m.Sum(nil)
}

// ID names the key: 16 hexadecimal characters of a hash of it, which tell
// keys apart and give nothing of the key away. The database records, for
// each sealed value, the ID of the key that sealed it.
func (k *Key) ID() string { return k.id }

// String shows the key's ID only.
func (k *Key) String() string { return "secrets key " + k.id }

// GoString hides the key from %#v too.
func (k *Key) GoString() string { return k.String() }

// Seal encrypts value for context (which Open must be given again) and
// returns the nonce followed by the box.
func (k *Key) Seal(context, value []byte) []byte {
	var nonce [nonceSize]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		// crypto/rand does not fail on Linux (getrandom); a nonce that is
		// not random must never be used.
		panic("secretkey: no randomness: " + err.Error())
	}
	msg := make([]byte, 0, len(context)+1+len(value))
	msg = append(append(append(msg, context...), 0), value...)
	return secretbox.Seal(nonce[:], msg, &nonce, &k.k)
}

// Open decrypts what Seal returned for the same context. Any failure is
// ErrOpen: nothing but the sealed value is ever returned.
func (k *Key) Open(context, sealed []byte) ([]byte, error) {
	if len(sealed) < nonceSize+secretbox.Overhead {
		return nil, ErrOpen
	}
	var nonce [nonceSize]byte
	copy(nonce[:], sealed)
	msg, ok := secretbox.Open(nil, sealed[nonceSize:], &nonce, &k.k)
	if !ok {
		return nil, ErrOpen
	}
	prefix := append(append([]byte{}, context...), 0)
	if !bytes.HasPrefix(msg, prefix) {
		return nil, fmt.Errorf("%w: it was sealed for another secret", ErrOpen)
	}
	return msg[len(prefix):], nil
}

// Load reads the key file at path. The file must be a regular file that
// only its owner can read or write.
func Load(path string) (*Key, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("secrets key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("secrets key file %s: not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("secrets key file %s: mode %04o lets others read or change it; make it the owner's only: chmod 600 %s", path, perm, path)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secrets key file: %w", err)
	}
	k, err := Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// Write stores k at path (mode 0600) atomically: a temporary file beside
// it, synced, then renamed over path, and the directory synced, so a crash
// leaves either the old file or the new one, never a partial key.
func Write(path string, k *Key) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("secrets key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("secrets key file: %w", err)
	}
	if _, err := tmp.WriteString(hex.EncodeToString(k.k[:]) + "\n"); err != nil {
		tmp.Close()
		return fmt.Errorf("secrets key file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("secrets key file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("secrets key file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("secrets key file: %w", err)
	}
	return SyncDir(dir)
}

// SyncDir makes a rename in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// Ring is the keys a store may open values with: the current key, which
// seals, and older ones (a rotation in progress), which only open. It is
// immutable.
type Ring struct {
	current *Key
	byID    map[string]*Key
}

// NewRing returns a ring that seals with current and opens with current and
// older.
func NewRing(current *Key, older ...*Key) *Ring {
	r := &Ring{current: current, byID: map[string]*Key{current.ID(): current}}
	for _, k := range older {
		if k != nil {
			r.byID[k.ID()] = k
		}
	}
	return r
}

// Current is the key that seals.
func (r *Ring) Current() *Key { return r.current }

// All is the ring's keys, the current one first, the others by ID.
func (r *Ring) All() []*Key {
	out := []*Key{r.current}
	ids := make([]string, 0, len(r.byID))
	for id := range r.byID {
		if id != r.current.ID() {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		out = append(out, r.byID[id])
	}
	return out
}

// Key returns the key with that ID, if the ring has it.
func (r *Ring) Key(id string) (*Key, bool) {
	k, ok := r.byID[id]
	return k, ok
}
