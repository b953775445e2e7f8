package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/client"
	"withruntime.dev/runtime/internal/server"
	"withruntime.dev/runtime/internal/template"
)

func dataDir() string {
	if d := os.Getenv("WITHRUNTIME_DATA_DIR"); d != "" {
		return d
	}
	return server.DefaultDataDir
}

// fileConfig is ~/.config/withruntime/config.json.
type fileConfig struct {
	URL    string `json:"url"`
	APIKey string `json:"apiKey"`
}

func configPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "withruntime", "config.json")
}

// session is a connection to a server: a remote one, or an embedded one that
// lives as long as this process.
type session struct {
	*client.Client
	embedded *server.Server
	close    func()
}

func (s *session) Close() {
	if s.close != nil {
		s.close()
	}
}

// connect finds the server to talk to. For an embedded server it makes sure
// the template needTemplate exists first (building it with progress on
// stderr); pass "" when no sandbox will be created.
func connect(ctx context.Context, needTemplate string) (*session, error) {
	if url := os.Getenv("WITHRUNTIME_URL"); url != "" {
		key := os.Getenv("WITHRUNTIME_API_KEY")
		if fc, err := readConfig(); key == "" && err == nil && strings.TrimRight(fc.URL, "/") == strings.TrimRight(url, "/") {
			key = fc.APIKey // saved by `withruntime login` for this server
		}
		return &session{Client: &client.Client{BaseURL: url, APIKey: key}}, nil
	}
	if p := configPath(); p != "" {
		if b, err := os.ReadFile(p); err == nil {
			var fc fileConfig
			if err := json.Unmarshal(b, &fc); err != nil {
				return nil, fmt.Errorf("config file %s: %w", p, err)
			}
			if fc.URL != "" {
				return &session{Client: &client.Client{BaseURL: fc.URL, APIKey: fc.APIKey}}, nil
			}
		}
	}
	return embed(ctx, needTemplate)
}

func embed(ctx context.Context, needTemplate string) (*session, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("no server configured, and the embedded server needs root for gVisor: run with sudo, or set WITHRUNTIME_URL and WITHRUNTIME_API_KEY to use a running server")
	}
	srv, remote, err := openOrShare(ctx, dataDir())
	if err != nil {
		return nil, err
	}
	if remote != nil {
		return remote, nil
	}
	if needTemplate != "" {
		// Builds the template on first use, and again when this
		// withruntime's recipe for it differs from the one it was built from.
		announced := false
		progress := func(p template.Progress) {
			if !announced {
				announced = true
				fmt.Fprintf(os.Stderr, "withruntime: building template %q (first use of this version only; a few minutes)\n", needTemplate)
			}
			printProgress(p)
		}
		if _, err := srv.Templates.Ensure(ctx, needTemplate, progress); err != nil {
			srv.Close()
			return nil, err
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(sctx, l); close(done) }()
	return &session{
		Client:   &client.Client{BaseURL: "http://" + l.Addr().String(), APIKey: srv.LocalKey, HTTP: &http.Client{}},
		embedded: srv,
		close: func() {
			cancel()
			<-done
			srv.Close()
		},
	}, nil
}

// openOrShare opens the embedded server on dir, unless another process
// runs a server there: a `withruntime serve` is used as a remote server (its
// URL and the local key); another CLI command's embedded server is waited
// for, since two servers on one directory would take over each other's
// sandboxes and networks.
func openOrShare(ctx context.Context, dir string) (*server.Server, *session, error) {
	said := false
	for {
		srv, err := server.Open(ctx, server.Config{DataDir: dir, TemplatesDir: os.Getenv("WITHRUNTIME_TEMPLATES_DIR")})
		var inUse *server.ErrInUse
		if !errors.As(err, &inUse) {
			return srv, nil, err
		}
		if inUse.Holder.URL != "" {
			key, kerr := os.ReadFile(filepath.Join(dir, server.LocalKeyFile))
			if kerr != nil {
				return nil, nil, fmt.Errorf("%v; and its local key cannot be read: %w", err, kerr)
			}
			return nil, &session{Client: &client.Client{BaseURL: inUse.Holder.URL, APIKey: strings.TrimSpace(string(key))}}, nil
		}
		if !said {
			said = true
			fmt.Fprintf(os.Stderr, "withruntime: waiting for another withruntime command on %s (pid %d) to finish; `withruntime serve` lets commands share one server\n", dir, inUse.Holder.PID)
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// printProgress shows template build steps with elapsed time on stderr.
func printProgress(p template.Progress) {
	mark := "  "
	if p.Done {
		mark = "✓ "
	}
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s%s\n", p.Elapsed.Round(100*time.Millisecond).Seconds(), mark, p.Step)
}
