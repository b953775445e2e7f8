package api

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

// TestClientAddr: the client is the TCP peer; X-Forwarded-For is read only
// from a trusted proxy, from its end, up to the first address that is not
// a trusted proxy.
func TestClientAddr(t *testing.T) {
	trusting := &Server{cfg: Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}
	plain := &Server{}
	for _, c := range []struct {
		s      *Server
		remote string
		xff    []string
		want   string
	}{
		{plain, "192.0.2.1:5000", nil, "192.0.2.1"},
		{plain, "192.0.2.1:5000", []string{"198.51.100.9"}, "192.0.2.1"},                         // no proxy trusted: the header is ignored
		{plain, "[::ffff:192.0.2.1]:5000", nil, "192.0.2.1"},                                     // mapped: the IPv4 address
		{trusting, "192.0.2.1:5000", []string{"198.51.100.9"}, "192.0.2.1"},                      // the peer is no proxy of ours
		{trusting, "10.1.1.1:5000", []string{"198.51.100.9"}, "198.51.100.9"},                    // through our proxy
		{trusting, "10.1.1.1:5000", []string{"6.6.6.6, 198.51.100.9, 10.2.2.2"}, "198.51.100.9"}, // the client's own claim (6.6.6.6) is not used
		{trusting, "10.1.1.1:5000", []string{"6.6.6.6", "198.51.100.9"}, "198.51.100.9"},         // several header lines: one list
		{trusting, "10.1.1.1:5000", []string{"junk, 198.51.100.9"}, "198.51.100.9"},
		{trusting, "10.1.1.1:5000", []string{"198.51.100.9, junk"}, "10.1.1.1"}, // a bad hop: nothing before it is trusted
		{trusting, "10.1.1.1:5000", nil, "10.1.1.1"},
		{plain, "", nil, "invalid IP"},
	} {
		r := httptest.NewRequest("POST", "/v1/device/authorize", nil)
		r.RemoteAddr = c.remote
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := c.s.clientAddr(r).String(); got != c.want {
			t.Errorf("peer %s, X-Forwarded-For %q: client %s, want %s", c.remote, c.xff, got, c.want)
		}
	}
}
