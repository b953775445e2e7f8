package benchenv

import (
	"context"
	"net"
	"net/http"

	"withruntime.dev/runtime/bench/internal/apiclient"
	"withruntime.dev/runtime/internal/server"
)

// Served is an in-process server serving its API on a loopback port, and
// a client of it.
type Served struct {
	Srv *server.Server    // the server (its Manager, LocalKey)
	C   *apiclient.Client // a client of its API with its local key

	cancel context.CancelFunc
	done   chan struct{}
}

// Serve opens a server with cfg and serves it on 127.0.0.1 (a free port)
// until Stop. Its client sends requests through hc and health probes
// through health (hc when nil).
func Serve(ctx context.Context, cfg server.Config, hc, health *http.Client) (*Served, error) {
	srv, err := server.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &Served{Srv: srv, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = srv.Serve(sctx, l)
	}()
	s.C = apiclient.New("http://"+l.Addr().String(), srv.LocalKey, hc, health)
	return s, nil
}

// Stop stops serving, then closes the server (which destroys its pooled
// sandboxes); it returns Close's error. Call it once.
func (s *Served) Stop() error {
	s.cancel()
	<-s.done
	return s.Srv.Close()
}
