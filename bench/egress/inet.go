package main

// The benchmark's internet, after the integration tests' (internal/itest/
// network_test.go, which cannot be imported): one network namespace made
// here, holding an HTTPS server (certificate from a CA made here) on an
// address from the benchmarking range 198.18.0.0/15, names resolved by a
// map, and a plain DNS server on a loopback address that answers from the
// same map for the host-side baseline. No packet goes anywhere but these
// namespaces and loopback.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"time"

	"github.com/miekg/dns"
	vnetns "github.com/vishvananda/netns"

	"withruntime.dev/runtime/internal/egress/netns"
)

// inetNames is the fake internet's namespace and veth naming. The names are
// fixed so that a run killed before its cleanup is swept by the next one.
// The link prefix must not start with "wr": a production server's table
// drops everything from "wr*" links it does not know.
var inetNames = netns.Config{
	NamePrefix:  "wrbinet-",
	LinkPrefix:  "wbi",
	AliasPrefix: "wrbinet:",
	Pool:        netip.MustParsePrefix("198.18.0.0/15"),
}

const inetID = "up"

// mapResolver resolves from a fixed map (never real DNS).
type mapResolver map[string][]netip.Addr

func (r mapResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range r[strings.ToLower(strings.TrimSuffix(host, "."))] {
		if network == "ip" || network == "ip4" && a.Is4() || network == "ip6" && a.Is6() {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

type internet struct {
	ip       netip.Addr
	caPEM    []byte
	roots    *x509.CertPool
	resolver mapResolver
	srv      *http.Server
}

// newInternet creates the namespace and starts the HTTPS server in it on
// :443, answering a small body for every name in names.
func newInternet(names []string) (*internet, error) {
	link, err := inetNames.Create(inetID)
	if err != nil {
		return nil, err
	}
	in := &internet{ip: link.Addr.Addr(), resolver: mapResolver{}}
	for _, n := range names {
		in.resolver[n] = []netip.Addr{in.ip}
	}
	cert, err := in.certificate(names)
	if err != nil {
		return nil, err
	}
	var l net.Listener
	err = inNetns(link.NetnsPath, func() error {
		var err error
		l, err = net.Listen("tcp", net.JoinHostPort(in.ip.String(), "443"))
		return err
	})
	if err != nil {
		return nil, err
	}
	in.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello from %s\n", r.Host)
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
	}
	go func() { _ = in.srv.ServeTLS(l, "", "") }()
	return in, nil
}

func (in *internet) close() { _ = in.srv.Close() }

// inNetns runs fn on an OS thread inside the namespace at path; the thread
// is never returned to the scheduler (it exits with the goroutine).
func inNetns(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked
		ns, err := vnetns.GetFromPath(path)
		if err != nil {
			errc <- err
			return
		}
		defer ns.Close()
		if err := vnetns.Set(ns); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

func (in *internet) certificate(names []string) (tls.Certificate, error) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench fake internet CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: names, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	in.roots = x509.NewCertPool()
	in.roots.AddCert(ca)
	in.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// startDNS serves plain DNS over UDP on addr (a loopback address, port 53)
// from the resolver, for the host-side baseline: A records from the map,
// an empty NOERROR for AAAA and other types of known names, NXDOMAIN
// otherwise (as the egress DNS server does for allowed names).
func startDNS(addr string, r mapResolver) (*dns.Server, error) {
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		return nil, err
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		for _, qu := range q.Question {
			name := strings.ToLower(strings.TrimSuffix(qu.Name, "."))
			addrs, ok := r[name]
			if !ok {
				m.Rcode = dns.RcodeNameError
				continue
			}
			if qu.Qtype != dns.TypeA {
				continue
			}
			for _, a := range addrs {
				if a.Is4() {
					m.Answer = append(m.Answer, &dns.A{
						Hdr: dns.RR_Header{Name: qu.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1},
						A:   a.AsSlice(),
					})
				}
			}
		}
		_ = w.WriteMsg(m)
	})
	started := make(chan struct{})
	s := &dns.Server{PacketConn: pc, Handler: h, NotifyStartedFunc: func() { close(started) }}
	errc := make(chan error, 1)
	go func() { errc <- s.ActivateAndServe() }()
	select {
	case <-started:
		return s, nil
	case err := <-errc:
		return nil, err
	}
}
