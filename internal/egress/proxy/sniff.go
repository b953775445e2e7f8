package proxy

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

var errHelloRead = errors.New("client hello read")

// readClientHello parses a TLS ClientHello from r with the standard
// library's own parser (so fragmented and unusual hellos are handled as a
// TLS server would), stopping before anything is written back.
func readClientHello(r io.Reader) (*tls.ClientHelloInfo, error) {
	var hello *tls.ClientHelloInfo
	err := tls.Server(readOnlyConn{r: r}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			cp := *h
			hello = &cp
			return nil, errHelloRead
		},
	}).Handshake()
	if hello == nil {
		if err == nil {
			err = errors.New("no ClientHello")
		}
		return nil, err
	}
	return hello, nil
}

// readOnlyConn is a net.Conn that reads from r and refuses writes.
type readOnlyConn struct{ r io.Reader }

func (c readOnlyConn) Read(p []byte) (int, error)     { return c.r.Read(p) }
func (readOnlyConn) Write([]byte) (int, error)        { return 0, io.ErrClosedPipe }
func (readOnlyConn) Close() error                     { return nil }
func (readOnlyConn) LocalAddr() net.Addr              { return nil }
func (readOnlyConn) RemoteAddr() net.Addr             { return nil }
func (readOnlyConn) SetDeadline(time.Time) error      { return nil }
func (readOnlyConn) SetReadDeadline(time.Time) error  { return nil }
func (readOnlyConn) SetWriteDeadline(time.Time) error { return nil }

// soOriginalDst is SO_ORIGINAL_DST from linux/netfilter_ipv4.h.
const soOriginalDst = 80

// OriginalDst returns the destination of a connection that nftables
// redirected to this host (IPv4), from conntrack.
func OriginalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("original destination: not a TCP connection")
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var ap netip.AddrPort
	var serr error
	err = rc.Control(func(fd uintptr) {
		// The kernel writes a struct sockaddr_in (16 bytes); IPv6Mreq is a
		// 20-byte buffer that getsockopt fills from the start.
		m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IP, soOriginalDst)
		if err != nil {
			serr = err
			return
		}
		raw := m.Multiaddr
		port := binary.BigEndian.Uint16(raw[2:4])
		ap = netip.AddrPortFrom(netip.AddrFrom4([4]byte(raw[4:8])), port)
	})
	if err != nil {
		return netip.AddrPort{}, err
	}
	if serr != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", serr)
	}
	return ap, nil
}
