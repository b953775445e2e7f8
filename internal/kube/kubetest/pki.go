package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the control plane's throw-away certificates: one CA that signs the
// API server's serving certificate (127.0.0.1) and the admin client's
// (group system:masters), and the service-account signing key.
type pki struct {
	caPEM                     []byte
	serverCert, serverKey     string // files
	adminCertPEM, adminKeyPEM []byte
	saPub, saKey              string // files
}

func writePEM(path, typ string, der []byte) ([]byte, error) {
	b := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	return b, os.WriteFile(path, b, 0o600)
}

func newPKI(dir string) (*pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubetest-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p := &pki{}
	if p.caPEM, err = writePEM(filepath.Join(dir, "ca.crt"), "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	leaf := func(serial int64, subject pkix.Name, usage x509.ExtKeyUsage, ips []net.IP) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: subject, NotBefore: now.Add(-time.Hour),
			NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips, DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
	}
	sc, sk, err := leaf(2, pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")})
	if err != nil {
		return nil, err
	}
	p.serverCert, p.serverKey = filepath.Join(dir, "apiserver.crt"), filepath.Join(dir, "apiserver.key")
	if err := os.WriteFile(p.serverCert, sc, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.serverKey, sk, 0o600); err != nil {
		return nil, err
	}
	if p.adminCertPEM, p.adminKeyPEM, err = leaf(3, pkix.Name{CommonName: "kubetest-admin",
		Organization: []string{"system:masters"}}, x509.ExtKeyUsageClientAuth, nil); err != nil {
		return nil, err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	p.saPub, p.saKey = filepath.Join(dir, "sa.pub"), filepath.Join(dir, "sa.key")
	if _, err := writePEM(p.saPub, "PUBLIC KEY", pub); err != nil {
		return nil, err
	}
	if _, err := writePEM(p.saKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)); err != nil {
		return nil, err
	}
	return p, nil
}
