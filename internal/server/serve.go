package server

import (
	"net"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/sys/unix"
)

// What one client may hold of the server's file descriptors. Every
// connection is one, a request forwarded to a sandbox's agent holds a second
// (a wait on a process costs the client nothing else), and a server out of
// file descriptors can no longer destroy sandboxes, run runsc or accept
// sandboxes' egress connections. So:
//   - a keep-alive connection that stays idle for idleTimeout is closed
//     (without one, net/http keeps it for ever: 20,000 idle connections to
//     /v1/health took every descriptor of a server);
//   - at most maxConns() connections are served at once; more wait in the
//     listen queue until one closes. That leaves at least half of the
//     process's descriptors to the server's own work.
var (
	idleTimeout = 2 * time.Minute
	maxConns    = connLimit
)

// connLimit is a quarter of the process's soft RLIMIT_NOFILE (which Go
// raises to the hard limit at start), at least 64.
func connLimit() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return 1 << 16
	}
	return max(64, int(min(rl.Cur/4, 1<<20)))
}

// limitListener caps the connections accepted from l at once.
func limitListener(l net.Listener) net.Listener {
	return netutil.LimitListener(l, maxConns())
}

// MaxHeaderBytes caps a request's head (request line and headers) on every
// listener of the server: the API, E2B and metrics listeners. net/http's
// default, 1 MiB, let a request carry a 1 MB method; a longer head is
// answered 431 before any handler runs. 64 KiB is eight times nginx's
// default for one header line.
const MaxHeaderBytes = 64 << 10

// IdleTimeout is how long an idle keep-alive connection of a listener of
// the server is kept (see above).
const IdleTimeout = 2 * time.Minute

// LimitE2BListener caps the connections accepted at once on the E2B
// listener (serve --e2b-listen) to half of the API's cap: with
// --e2b-domain its public ports are open to anyone who has a sandbox's
// host name, and each relayed request holds a second descriptor.
func LimitE2BListener(l net.Listener) net.Listener {
	return netutil.LimitListener(l, max(32, maxConns()/2))
}
