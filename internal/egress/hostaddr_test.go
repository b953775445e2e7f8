package egress

import (
	"crypto/rand"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
)

// addHostAddr puts addr/32 on an interface of the host made for the test (a
// dummy; a veth pair whose peer stays down where the kernel has no dummy
// driver) and deletes the interface at the end of the test, whatever
// happens. Nothing is routed through it: a local address is reached over
// loopback.
func addHostAddr(t *testing.T, addr netip.Addr) {
	t.Helper()
	name := "wrtestdummy" + randHex(1)
	var link netlink.Link = &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := netlink.LinkAdd(link); err != nil {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}
		if verr := netlink.LinkAdd(veth); verr != nil {
			t.Fatalf("creating %s: dummy: %v; veth: %v", name, err, verr)
		}
		link = veth
	}
	t.Cleanup(func() {
		if err := netlink.LinkDel(link); err != nil {
			t.Errorf("deleting %s: %v", name, err)
		}
	})
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	ipn := &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(addr.BitLen(), addr.BitLen())}
	if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: ipn}); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
}

// countingListener is a host service on addr that counts its connections.
func countingListener(t *testing.T, addr netip.AddrPort) *atomic.Int32 {
	t.Helper()
	l, err := net.Listen("tcp", addr.String())
	if err != nil {
		t.Fatalf("listening on %s (is something on the host listening on *:%d?): %v", addr, addr.Port(), err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			_, _ = c.Write([]byte("HTTP/1.0 200 OK\r\nContent-Length: 16\r\n\r\nthe host itself\n"))
			_ = c.Close()
		}
	}()
	return &n
}

// TestHostAddressesRefused: with internet: true, a service of the host on
// 80 is out of reach through every address of the host's interfaces, a
// public-looking one added while the Manager runs and one inside the
// exempt test range (the fake internet's gateway, the host end of its
// veth), whether the sandbox connects to it, names it in Host or SNI, or
// resolves a name to it.
func TestHostAddressesRefused(t *testing.T) {
	w := newWorld(t, Policy{Internet: true})
	b := make([]byte, 1)
	_, _ = rand.Read(b)
	// A documentation address (not the 192.0.2.0/24 a host may really sit
	// on), away from the ones other tests use.
	self := netip.AddrFrom4([4]byte{203, 0, 113, 200 + b[0]%50})
	gw := w.in.link.Gateway
	w.res.mu.Lock()
	w.res.addrs["self.site.test"] = []netip.Addr{self}
	w.res.addrs["gw.site.test"] = []netip.Addr{gw}
	w.res.addrs["mixed.site.test"] = []netip.Addr{self, w.in.ip}
	w.res.mu.Unlock()

	// The guard reads the host's addresses now, before self exists...
	if resp, _, err := w.sb.get("http", "api.egress.test", w.httpAddr(), nil, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("internet: true: %v %v", resp, err)
	}
	if r, err := w.sb.resolve("self.site.test"); err != nil || len(r.Answer) != 1 {
		t.Fatalf("self.site.test before it is a host address: %v %v", r, err)
	}
	// ...and must see it once it appears (after its cache of one second).
	addHostAddr(t, self)
	selfHits := countingListener(t, netip.AddrPortFrom(self, 80))
	gwHits := countingListener(t, netip.AddrPortFrom(gw, 80))
	c, err := net.DialTimeout("tcp", netip.AddrPortFrom(self, 80).String(), 2*time.Second)
	if err != nil {
		t.Fatalf("the host cannot reach its own listener: %v", err)
	}
	c.Close()
	// The listener counts the connection when Accept returns, which may be
	// after the dial did: wait for it before starting from zero.
	for deadline := time.Now().Add(2 * time.Second); selfHits.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	selfHits.Store(0)
	time.Sleep(1500 * time.Millisecond)

	for _, tc := range []struct {
		name, scheme, host string
		dst                netip.AddrPort
		want               string
	}{
		{"literal", "http", self.String(), netip.AddrPortFrom(self, 80), "this host's own"},
		{"Host header to another address", "http", self.String(), w.httpAddr(), "this host's own"},
		{"name resolving to it", "http", "self.site.test", w.httpAddr(), "resolves only to"},
		{"exempt range, literal", "http", gw.String(), netip.AddrPortFrom(gw, 80), "this host's own"},
		{"exempt range, name", "http", "gw.site.test", w.httpAddr(), "resolves only to"},
	} {
		start := time.Now()
		resp, body, err := w.sb.get(tc.scheme, tc.host, tc.dst, nil, nil)
		if err != nil || resp.StatusCode != http.StatusForbidden || !strings.Contains(body, tc.want) {
			t.Errorf("%s (%s via %s): %v %q %v, want 403 with %q", tc.name, tc.host, tc.dst, resp, body, err, tc.want)
		}
		fast(t, tc.name, start)
	}
	// TLS: SNI naming the host, and a connection to it on 443.
	for _, host := range []string{"self.site.test", "gw.site.test"} {
		if _, _, err := w.sb.get("https", host, w.httpsAddr(), w.in.roots, nil); err == nil || !strings.Contains(err.Error(), "access denied") {
			t.Errorf("SNI %s: %v, want a TLS access_denied alert", host, err)
		}
	}
	// A name with a host address and a public one: only the public one is
	// answered and dialed.
	resp, body, err := w.sb.get("http", "mixed.site.test", w.httpAddr(), nil, nil)
	if err != nil || resp.StatusCode != 200 || body != "hello from mixed.site.test tls=false" {
		t.Errorf("mixed.site.test: %v %q %v", resp, body, err)
	}
	// DNS never answers a host address.
	for name, want := range map[string]string{"self.site.test": "", "gw.site.test": "", "mixed.site.test": w.in.ip.String()} {
		r, err := w.sb.resolve(name)
		if err != nil {
			t.Errorf("resolve %s: %v", name, err)
			continue
		}
		var got []string
		for _, rr := range r.Answer {
			got = append(got, rr.(*dns.A).A.String())
		}
		if strings.Join(got, ",") != want {
			t.Errorf("resolve %s: %v, want [%s]", name, got, want)
		}
	}
	// The fake internet itself, in the exempt range, is still reachable.
	if resp, _, err := w.sb.get("http", w.in.ip.String(), w.httpAddr(), nil, nil); err != nil || resp.StatusCode != 200 {
		t.Errorf("fake internet by address: %v %v", resp, err)
	}
	if n, m := selfHits.Load(), gwHits.Load(); n != 0 || m != 0 {
		t.Errorf("the host's own listeners were reached: %d times on %s, %d on %s", n, self, m, gw)
	}
}
