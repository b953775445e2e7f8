// Package agentauth is the agent's channel over TCP, used where the host's
// unix socket does not exist (the Kubernetes driver: the server reaches the
// agent by pod IP). The channel is authenticated both ways per sandbox with
// credentials that the server makes at create and hands to the pod (a
// Kubernetes Secret), and keeps itself; nothing the pod says about them is
// ever trusted:
//
//   - the agent proves it is this sandbox's agent with a TLS 1.3 certificate
//     made for this sandbox alone, which the server pins (the exact DER bytes;
//     no CA, no names), so a pod IP that now belongs to another sandbox, or
//     anything else listening there, is refused with driver.ErrChannel;
//   - the server proves it is the server with the sandbox's token, sent
//     inside TLS as the first line; the agent compares it in constant time,
//     answers "ok\n", and only then serves HTTP on the connection. A wrong
//     token gets the connection closed with nothing served.
//
// Root inside the sandbox can read its own credentials: it can then pose as
// its own agent, which it controls anyway, and as nothing else.
package agentauth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/driver"
)

// File names of the credentials in the directory the agent reads
// (Kubernetes' own names for a TLS secret's keys, plus the token).
const (
	CertFile  = "tls.crt"
	KeyFile   = "tls.key"
	TokenFile = "token"
)

// ackLine is the agent's answer to a good token.
const ackLine = "ok\n"

// handshakeTimeout bounds the TLS handshake and the token exchange.
const handshakeTimeout = 10 * time.Second

// Credentials are one sandbox's: the agent's certificate and key (PEM) and
// the server's token (64 hex digits).
type Credentials struct {
	CertPEM []byte
	KeyPEM  []byte
	Token   string
}

// New makes fresh credentials for sandbox id: a P-256 key, a self-signed
// certificate naming id (valid from a minute ago for validFor), and a
// 256-bit random token.
func New(id string, validFor time.Duration) (Credentials, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Credentials{}, fmt.Errorf("agent credentials: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return Credentials{}, fmt.Errorf("agent credentials: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: id},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(validFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Credentials{}, fmt.Errorf("agent credentials: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Credentials{}, fmt.Errorf("agent credentials: %w", err)
	}
	var tok [32]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return Credentials{}, fmt.Errorf("agent credentials: %w", err)
	}
	return Credentials{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		Token:   hex.EncodeToString(tok[:]),
	}, nil
}

// Load reads credentials from dir (CertFile, KeyFile, TokenFile), as the
// agent does from its mounted secret.
func Load(dir string) (Credentials, error) {
	var c Credentials
	var err error
	if c.CertPEM, err = os.ReadFile(filepath.Join(dir, CertFile)); err != nil {
		return Credentials{}, fmt.Errorf("agent credentials: %w", err)
	}
	if c.KeyPEM, err = os.ReadFile(filepath.Join(dir, KeyFile)); err != nil {
		return Credentials{}, fmt.Errorf("agent credentials: %w", err)
	}
	tok, err := os.ReadFile(filepath.Join(dir, TokenFile))
	if err != nil {
		return Credentials{}, fmt.Errorf("agent credentials: %w", err)
	}
	c.Token = strings.TrimSpace(string(tok))
	if len(c.Token) < 32 {
		return Credentials{}, fmt.Errorf("agent credentials: token in %s is %d characters; want at least 32", dir, len(c.Token))
	}
	return c, nil
}

// Listen listens on the TCP address addr (e.g. ":7000") and returns a
// listener whose Accept yields only connections that passed the TLS
// handshake with c's certificate and sent c's token. Connections that fail
// are closed and never returned; handshakes run concurrently, so one slow
// client delays nobody.
func Listen(addr string, c Credentials) (net.Listener, error) {
	cert, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("agent credentials: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	l := &listener{Listener: ln, token: []byte(c.Token), conns: make(chan net.Conn), done: make(chan struct{}),
		cfg: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}}
	go l.acceptLoop()
	return l, nil
}

type listener struct {
	net.Listener
	cfg   *tls.Config
	token []byte
	conns chan net.Conn
	done  chan struct{}
	err   error
}

func (l *listener) acceptLoop() {
	defer close(l.done)
	for {
		raw, err := l.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.err = err
			return
		}
		go func() {
			conn, err := l.handshake(raw)
			if err != nil {
				raw.Close()
				return
			}
			select {
			case l.conns <- conn:
			case <-l.done:
				conn.Close()
			}
		}()
	}
}

// handshake runs TLS, reads the token line and acknowledges it.
func (l *listener) handshake(raw net.Conn) (net.Conn, error) {
	_ = raw.SetDeadline(time.Now().Add(handshakeTimeout))
	conn := tls.Server(raw, l.cfg)
	if err := conn.Handshake(); err != nil {
		return nil, err
	}
	line, err := readLine(conn, 256)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(line), l.token) != 1 {
		return nil, errors.New("wrong token")
	}
	if _, err := conn.Write([]byte(ackLine)); err != nil {
		return nil, err
	}
	_ = raw.SetDeadline(time.Time{})
	return conn, nil
}

// Accept implements net.Listener.
func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, l.err
	}
}

// readLine reads one "\n"-ended line of at most max bytes, one byte at a
// time so that nothing after it is consumed.
func readLine(conn net.Conn, max int) (string, error) {
	var b [1]byte
	var line []byte
	for len(line) <= max {
		if _, err := conn.Read(b[:]); err != nil {
			return "", err
		}
		if b[0] == '\n' {
			return string(line), nil
		}
		line = append(line, b[0])
	}
	return "", errors.New("line too long")
}

// Dial connects to the agent at addr (host:port) and returns the connection
// once the agent has shown the pinned certificate certPEM and accepted
// token. Any other certificate, or an agent that refuses the token, gives
// driver.ErrChannel (wrapped): nothing was sent but the token's TLS
// handshake.
func Dial(ctx context.Context, addr string, certPEM []byte, token string) (net.Conn, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, fmt.Errorf("agent at %s: no pinned certificate: %w", addr, driver.ErrChannel)
	}
	pinned := block.Bytes
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("agent at %s: %w", addr, err)
	}
	deadline := time.Now().Add(handshakeTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = raw.SetDeadline(deadline)
	conn := tls.Client(raw, &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The certificate is checked by VerifyPeerCertificate against the
		// pinned one, byte for byte; there is no CA or name to check.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(certs [][]byte, _ [][]*x509.Certificate) error {
			if len(certs) != 1 || !bytes.Equal(certs[0], pinned) {
				return errNotPinned
			}
			return nil
		},
	})
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		if errors.Is(err, errNotPinned) {
			return nil, fmt.Errorf("agent at %s: %w: %w", addr, errNotPinned, driver.ErrChannel)
		}
		return nil, fmt.Errorf("agent at %s: tls: %w", addr, err)
	}
	if _, err := conn.Write([]byte(token + "\n")); err != nil {
		conn.Close()
		return nil, fmt.Errorf("agent at %s: %w", addr, err)
	}
	ack := make([]byte, len(ackLine))
	if _, err := io.ReadFull(conn, ack); err != nil || string(ack) != ackLine {
		conn.Close()
		return nil, fmt.Errorf("agent at %s refused the token (%v): %w", addr, err, driver.ErrChannel)
	}
	_ = raw.SetDeadline(time.Time{})
	return conn, nil
}

var errNotPinned = errors.New("the agent's certificate is not this sandbox's")
