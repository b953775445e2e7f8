package secrets

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The environment variables that point common clients at a CA bundle.
var TrustEnvNames = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "PIP_CERT", "GIT_SSL_CAINFO"}

// CA is the Runtime CA: the proxy mints a certificate for each intercepted
// host with it, and sandboxes trust it.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	leafKey *ecdsa.PrivateKey
	// placeholderKey derives placeholders (see Placeholder).
	placeholderKey []byte

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

const (
	caCertFile = "ca.pem"
	caKeyFile  = "ca-key.pem"
	leafTTL    = 24 * time.Hour
)

// NewCA makes a CA in memory.
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Runtime egress CA", Organization: []string{"Runtime"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return fromParts(der, key)
}

// LoadOrCreateCA loads the CA from dir (ca.pem, ca-key.pem), creating it
// the first time. The key file is readable by root only.
func LoadOrCreateCA(dir string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile)
	certPEM, cerr := os.ReadFile(certPath)
	keyPEM, kerr := os.ReadFile(keyPath)
	if errors.Is(cerr, os.ErrNotExist) && errors.Is(kerr, os.ErrNotExist) {
		ca, err := NewCA()
		if err != nil {
			return nil, fmt.Errorf("egress CA: %w", err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("egress CA: %w", err)
		}
		der, err := x509.MarshalECPrivateKey(ca.key.(*ecdsa.PrivateKey))
		if err != nil {
			return nil, fmt.Errorf("egress CA: %w", err)
		}
		if err := writeAtomic(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			return nil, fmt.Errorf("egress CA: %w", err)
		}
		if err := writeAtomic(certPath, ca.certPEM, 0o644); err != nil {
			return nil, fmt.Errorf("egress CA: %w", err)
		}
		return ca, nil
	}
	if cerr != nil || kerr != nil {
		return nil, fmt.Errorf("egress CA in %s: %w", dir, errors.Join(cerr, kerr))
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("egress CA in %s: not PEM", dir)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("egress CA in %s: %w", dir, err)
	}
	return fromParts(cb.Bytes, key)
}

func fromParts(der []byte, key *ecdsa.PrivateKey) (*CA, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	kd, _ := key.Bytes()
	pk := sha256.Sum256(append([]byte("withruntime placeholder key\x00"), kd...))
	return &CA{
		cert: cert, key: key, leafKey: leafKey,
		certPEM:        pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		placeholderKey: pk[:],
		leaves:         map[string]*tls.Certificate{},
	}, nil
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// CertPEM returns the CA certificate for sandboxes to trust.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// PlaceholderKey is the key placeholders are derived with.
func (ca *CA) PlaceholderKey() []byte { return ca.placeholderKey }

// Bundle returns a CA bundle for a sandbox: the template's own bundle (its
// /etc/ssl/certs/ca-certificates.crt) followed by the Runtime CA.
func (ca *CA) Bundle(system []byte) []byte {
	out := append([]byte(nil), system...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, ca.certPEM...)
}

// Certificate returns a certificate for host signed by the CA, minted on
// first use and cached until close to expiry.
func (ca *CA) Certificate(host string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[host]; ok && time.Until(c.Leaf.NotAfter) > time.Hour {
		return c, nil
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(leafTTL),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &ca.leafKey.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("egress CA: certificate for %s: %w", host, err)
	}
	leaf, _ := x509.ParseCertificate(der)
	c := &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: ca.leafKey, Leaf: leaf}
	if len(ca.leaves) > 10000 {
		clear(ca.leaves)
	}
	ca.leaves[host] = c
	return c, nil
}
