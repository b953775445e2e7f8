package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/server"
)

func newServeCmd() *cobra.Command {
	var listen, data, templates string
	var maxUpload int64
	var noBuild bool
	var meter func() sandbox.MeterConfig
	var pool sandbox.PoolConfig
	var maxSandboxes int
	var pausedRetention time.Duration
	var sandboxCAs []string
	var secretsKey string
	var rotateKey, discardSecrets bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the Runtime API server (needs root)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if maxSandboxes < 0 || pool.Size < 0 {
				return fmt.Errorf("--max-sandboxes and --pool-size must be 0 or more (0: no limit, no pool)")
			}
			if pausedRetention <= 0 {
				return fmt.Errorf("--paused-retention must be positive (e.g. 168h); got %s", pausedRetention)
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			srv, err := server.Open(ctx, server.Config{DataDir: data, TemplatesDir: templates, MaxUploadBytes: maxUpload, Log: log, Metering: meter(), Pool: pool, Limits: limits(maxSandboxes, pausedRetention),
				Egress:         server.EgressConfig{SandboxCAs: sandboxCAs},
				SecretsKeyFile: secretsKey, RotateSecretsKey: rotateKey, DiscardUnreadableSecrets: discardSecrets})
			if err != nil {
				return err
			}
			defer srv.Close()
			if !noBuild {
				if _, err := srv.Templates.Ensure(ctx, "base", printProgress); err != nil {
					return fmt.Errorf("template base: %w", err)
				}
			}
			l, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			// CLI commands on this data directory use this server.
			if err := srv.Advertise("http://" + l.Addr().String()); err != nil {
				return err
			}
			log.Info("serving", "addr", l.Addr().String(), "dataDir", data,
				"localKeyFile", filepath.Join(data, server.LocalKeyFile))
			return srv.Serve(ctx, l)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7780", "address to serve the API on")
	cmd.Flags().StringArrayVar(&sandboxCAs, "sandbox-ca", nil, "PEM file of CA certificates every sandbox trusts besides its template's (repeatable): e.g. the CA of a TLS-intercepting proxy on the host's network, so pip, npm, curl and git work inside")
	cmd.Flags().StringVar(&data, "data-dir", dataDir(), "directory for the database, sandbox state and templates")
	cmd.Flags().StringVar(&templates, "templates-dir", os.Getenv("WITHRUNTIME_TEMPLATES_DIR"), "directory of templates (default DATA_DIR/templates)")
	cmd.Flags().Int64Var(&maxUpload, "max-upload-bytes", 0, "cap on one file upload in bytes (default 1.5 GiB)")
	cmd.Flags().BoolVar(&noBuild, "no-build", false, "do not build the base template at start if it is missing")
	cmd.Flags().IntVar(&maxSandboxes, "max-sandboxes", 0, "most sandboxes running at once; creates past it answer 503 unavailable (0: no limit; see README, Capacity)")
	cmd.Flags().DurationVar(&pausedRetention, "paused-retention", sandbox.DefaultPausedRetention, "how long a paused sandbox is kept; then it is destroyed (end reason retention)")
	cmd.Flags().IntVar(&pool.Size, "pool-size", 2, "booted sandboxes kept ready per pooled template, so a create of the default shape only claims one (0: no pool)")
	cmd.Flags().DurationVar(&pool.MaxAge, "pool-max-age", 10*time.Minute, "replace a pooled sandbox that waited this long")
	cmd.Flags().StringSliceVar(&pool.Templates, "pool-templates", []string{"base"}, "templates that get a warm pool")
	cmd.Flags().StringVar(&secretsKey, "secrets-key-file", os.Getenv(server.SecretsKeyEnv), "file of the key that seals secret values in the database (64 hex characters, mode 0600; created if missing) (default DATA_DIR/secrets.key)")
	cmd.Flags().BoolVar(&rotateKey, "rotate-secrets-key", false, "make a new secrets key at start, re-seal every secret value with it and replace the key file, then serve")
	cmd.Flags().BoolVar(&discardSecrets, "discard-unreadable-secrets", false, "delete the secrets sealed with a key this server does not have (a lost key) instead of refusing to start")
	meter = addMeterFlags(cmd)
	return cmd
}

// limits is the server's default limits with the --max-sandboxes cap and
// the --paused-retention.
func limits(maxSandboxes int, pausedRetention time.Duration) *sandbox.Limits {
	l := sandbox.DefaultLimits()
	l.MaxSandboxes = maxSandboxes
	l.PausedRetention = pausedRetention
	return &l
}
