package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/idna"
)

// e2bTLS is the TLS configuration of the E2B listener (nil without a
// certificate). The certificate and key are read again when either file
// changes, so a renewed certificate needs no restart.
func e2bTLS(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("--e2b-tls-cert and --e2b-tls-key go together: give both PEM files")
	}
	c := &certFiles{cert: certFile, key: keyFile}
	if _, err := c.get(nil); err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.get, NextProtos: []string{"h2", "http/1.1"}}, nil
}

// certFiles loads a certificate pair and reloads it when a file's
// modification time changes.
type certFiles struct {
	cert, key string
	mu        sync.Mutex
	loaded    *tls.Certificate
	stamp     [2]time.Time
}

func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	var stamp [2]time.Time
	for i, f := range []string{c.cert, c.key} {
		st, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("--e2b-tls: %w", err)
		}
		stamp[i] = st.ModTime()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded != nil && stamp == c.stamp {
		return c.loaded, nil
	}
	pair, err := tls.LoadX509KeyPair(c.cert, c.key)
	if err != nil {
		if c.loaded != nil {
			return c.loaded, nil // a renewal half written: keep serving the last good pair
		}
		return nil, fmt.Errorf("--e2b-tls-cert %s and --e2b-tls-key %s: %w", c.cert, c.key, err)
	}
	c.loaded, c.stamp = &pair, stamp
	return c.loaded, nil
}

// e2bDomain checks --e2b-domain: a DNS name of at least two labels,
// lower-cased, without a trailing dot.
func e2bDomain(d string) (string, error) {
	if d == "" {
		return "", nil
	}
	d = strings.TrimSuffix(strings.ToLower(d), ".")
	if _, err := idna.Lookup.ToASCII(d); err != nil || !strings.Contains(d, ".") || strings.HasPrefix(d, "*") {
		return "", fmt.Errorf("--e2b-domain %q is not a domain name such as sandbox.example.com (its hosts are api.DOMAIN and PORT-SANDBOX.DOMAIN)", d)
	}
	return d, nil
}
