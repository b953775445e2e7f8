// Package dnsserver is the DNS server a networked sandbox talks to: it
// answers only names its policy allows, resolving them with the host's
// (injectable) resolver, and answers NXDOMAIN for every other name without
// sending any query anywhere.
package dnsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"withruntime.dev/runtime/internal/egress/policy"
)

// Resolver resolves a host name to addresses (network "ip4" or "ip6").
// *net.Resolver implements it; tests inject a map.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Handler answers a sandbox's DNS queries under its current policy.
type Handler struct {
	// Policy returns the sandbox's current policy; nil refuses every name.
	Policy func() *policy.Matcher
	// Resolver resolves allowed names. Required.
	Resolver Resolver
	// Guard removes addresses no sandbox may reach from answers.
	Guard *policy.Guard
	// TTL of the answers (default 30 s), kept short so that policy changes
	// and upstream changes are seen soon.
	TTL uint32
	// Timeout bounds one upstream lookup (default 5 s).
	Timeout time.Duration
	// Log receives one debug line per query (optional).
	Log *slog.Logger
	// ViaUpstream, when set, says which allowed names the egress proxy
	// reaches through an upstream HTTP proxy. Those are not resolved on the
	// host (where only the upstream may resolve them): they are answered
	// with Gateway, whose ports 80 and 443 lead to the egress proxy like
	// every other address's.
	ViaUpstream func(name string) bool
	// Gateway is the sandbox's gateway address (with ViaUpstream).
	Gateway netip.Addr
	// Limit, when set, is the sandbox's rate of queries: one past it is
	// dropped unanswered (the client's resolver retries after its timeout,
	// so a burst of lookups slows down instead of failing), and Limited
	// hears it. For UDP the kernel drops most of them first (the nftables
	// limit in the sandbox's chain); this covers DNS over TCP as well.
	Limit *Bucket
	// Limited, when set, hears each query dropped by Limit.
	Limited func()
}

// ServeDNS implements dns.Handler.
//
// For an allowed name, A queries are answered with the name's public IPv4
// addresses; AAAA and every other type get an empty answer (sandbox links
// are IPv4 only), so clients fall back to A at once. A name that is not
// allowed gets NXDOMAIN whatever the type.
func (h *Handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	if h.Limit != nil && !h.Limit.Allow() {
		if h.Limited != nil {
			h.Limited()
		}
		return
	}
	resp := h.answer(req)
	if opt := req.IsEdns0(); opt != nil {
		resp.SetEdns0(max(opt.UDPSize(), dns.MinMsgSize), false)
	}
	if w.RemoteAddr() != nil && w.RemoteAddr().Network() == "udp" {
		size := dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = int(opt.UDPSize())
		}
		resp.Truncate(size)
	}
	_ = w.WriteMsg(resp)
}

func (h *Handler) answer(req *dns.Msg) *dns.Msg {
	resp := new(dns.Msg)
	if len(req.Question) != 1 {
		return resp.SetRcode(req, dns.RcodeFormatError)
	}
	resp.SetReply(req)
	resp.RecursionAvailable = true
	q := req.Question[0]
	name := strings.TrimSuffix(strings.ToLower(q.Name), ".")
	var m *policy.Matcher
	if h.Policy != nil {
		m = h.Policy()
	}
	if q.Qclass != dns.ClassINET || m == nil || !m.AllowName(name) || isAddrLiteral(name) {
		h.debug("dns: refused", name, q.Qtype)
		return resp.SetRcode(req, dns.RcodeNameError)
	}
	if q.Qtype != dns.TypeA {
		h.debug("dns: no data for type", name, q.Qtype)
		return resp
	}
	ttl := h.TTL
	if ttl == 0 {
		ttl = 30
	}
	if h.ViaUpstream != nil && h.Gateway.IsValid() && h.ViaUpstream(name) {
		h.debug("dns: answered for the upstream proxy", name, q.Qtype)
		resp.Answer = append(resp.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl},
			A:   h.Gateway.AsSlice(),
		})
		return resp
	}
	timeout := h.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	addrs, err := h.Resolver.LookupNetIP(ctx, "ip4", name)
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			return resp.SetRcode(req, dns.RcodeNameError)
		}
		h.debug("dns: upstream failed", name, q.Qtype, "err", err)
		return resp.SetRcode(req, dns.RcodeServerFailure)
	}
	for _, a := range addrs {
		a = a.Unmap()
		if !a.Is4() || h.Guard.Blocked(a) || m.DenyAddr(a) {
			continue
		}
		resp.Answer = append(resp.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl},
			A:   a.AsSlice(),
		})
	}
	h.debug("dns: answered", name, q.Qtype, "answers", len(resp.Answer))
	return resp
}

func isAddrLiteral(name string) bool {
	_, err := netip.ParseAddr(name)
	return err == nil
}

func (h *Handler) debug(msg, name string, qtype uint16, args ...any) {
	if h.Log != nil {
		h.Log.Debug(msg, append([]any{"name", name, "type", dns.TypeToString[qtype]}, args...)...)
	}
}

// Server serves one Handler on a UDP socket and a TCP listener.
type Server struct {
	udp, tcp *dns.Server
	wg       sync.WaitGroup
}

// Start serves h on pc (UDP) and l (TCP); either may be nil. It returns once
// both are serving. Close stops them and closes the sockets.
func Start(pc net.PacketConn, l net.Listener, h dns.Handler) (*Server, error) {
	s := &Server{}
	start := func(srv *dns.Server) error {
		started := make(chan struct{})
		errc := make(chan error, 1)
		srv.NotifyStartedFunc = func() { close(started) }
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			errc <- srv.ActivateAndServe()
		}()
		select {
		case <-started:
			return nil
		case err := <-errc:
			return fmt.Errorf("dns server: %w", err)
		}
	}
	if pc != nil {
		s.udp = &dns.Server{PacketConn: pc, Handler: h}
		if err := start(s.udp); err != nil {
			return nil, err
		}
	}
	if l != nil {
		s.tcp = &dns.Server{Listener: l, Handler: h, ReadTimeout: 5 * time.Second}
		if err := start(s.tcp); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close stops the server and waits for it.
func (s *Server) Close() error {
	var errs []error
	for _, srv := range []*dns.Server{s.udp, s.tcp} {
		if srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := srv.ShutdownContext(ctx); err != nil {
				errs = append(errs, err)
			}
			cancel()
		}
	}
	s.wg.Wait()
	return errors.Join(errs...)
}
