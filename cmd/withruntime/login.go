package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/client"
	"withruntime.dev/runtime/internal/device"
	"withruntime.dev/runtime/internal/server"
)

// defaultServerURL is where login looks when nothing names a server: the
// address `withruntime serve` listens on by default.
const defaultServerURL = "http://127.0.0.1:7780"

func newLoginCmd() *cobra.Command {
	var trial bool
	cmd := &cobra.Command{
		Use:   "login [URL]",
		Short: "Get an API key for a server by approving a code in its dashboard",
		Long: `Asks the server for a device login (RFC 8628), prints a link and a code,
and waits while an administrator approves the code in the server's dashboard
(choosing the key's name and daily limit). Then writes the server's URL and
the new key to ~/.config/withruntime/config.json (mode 0600), where the CLI
and the Go, Python and TypeScript SDKs find it.

URL defaults to WITHRUNTIME_URL, then the config file's server, then the
server on this host's data directory, then ` + defaultServerURL + `.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			url := ""
			if len(args) == 1 {
				url = args[0]
			}
			_, err := login(cmd.Context(), loginURL(url), trial, os.Stderr)
			return err
		},
	}
	cmd.Flags().BoolVar(&trial, "trial", false, "ask for a trial key (the administrator decides)")
	return cmd
}

func newLogoutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Forget the server and key saved by login",
		Long: `Removes ~/.config/withruntime/config.json. The key itself stays valid until
an administrator revokes it (dashboard, Keys; or withruntime keys revoke ID).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := configPath()
			if p == "" {
				return errors.New("no config directory: set HOME or XDG_CONFIG_HOME")
			}
			err := os.Remove(p)
			if errors.Is(err, os.ErrNotExist) {
				fmt.Fprintf(os.Stderr, "withruntime: not logged in (no %s)\n", p)
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "withruntime: logged out: removed %s\n", p)
			return nil
		},
	}
}

// loginURL is the server to log in to: arg, WITHRUNTIME_URL, the config
// file's, the server advertised on this host's data directory, or the
// default address.
func loginURL(arg string) string {
	if arg != "" {
		return arg
	}
	if u := os.Getenv("WITHRUNTIME_URL"); u != "" {
		return u
	}
	if fc, err := readConfig(); err == nil && fc.URL != "" {
		return fc.URL
	}
	if h, err := server.ReadHolder(dataDir()); err == nil && h.URL != "" {
		return h.URL
	}
	return defaultServerURL
}

// configured reports whether the CLI has a server and key without login:
// WITHRUNTIME_URL and WITHRUNTIME_API_KEY, or a config file with both.
func configured() bool {
	if os.Getenv("WITHRUNTIME_URL") != "" && os.Getenv("WITHRUNTIME_API_KEY") != "" {
		return true
	}
	fc, err := readConfig()
	return err == nil && fc.URL != "" && fc.APIKey != ""
}

// login runs a device login against baseURL, printing what the user must do
// on w, and saves the key in the config file.
func login(ctx context.Context, baseURL string, trial bool, w io.Writer) (fileConfig, error) {
	baseURL = strings.TrimRight(baseURL, "/")
	if !strings.HasPrefix(baseURL, "http://") && !strings.HasPrefix(baseURL, "https://") {
		return fileConfig{}, fmt.Errorf("server URL %q must start with http:// or https://", baseURL)
	}
	path := configPath()
	if path == "" {
		return fileConfig{}, errors.New("no config directory to save the key in: set HOME or XDG_CONFIG_HOME")
	}
	c := &client.Client{BaseURL: baseURL}
	g, err := c.DeviceAuthorize(ctx, api.DeviceAuthorizeRequest{ClientName: clientName(), Trial: trial})
	if err != nil {
		return fileConfig{}, fmt.Errorf("login to %s: %w", baseURL, err)
	}
	fmt.Fprintf(w, "To use %s, open\n\n    %s\n\nand have an administrator approve the code %s (it expires in %s).\nWaiting for approval...\n",
		baseURL, g.VerificationURIComplete, g.UserCode, shortDuration(time.Duration(g.ExpiresIn)*time.Second))
	interval := time.Duration(max(g.Interval, 1)) * time.Second
	deadline := time.Now().Add(time.Duration(g.ExpiresIn) * time.Second)
	for {
		select {
		case <-ctx.Done():
			return fileConfig{}, interruption(ctx)
		case <-time.After(interval):
		}
		tok, err := c.DeviceToken(ctx, g.DeviceCode)
		var ae *client.APIError
		switch {
		case err == nil:
			fc := fileConfig{URL: baseURL, APIKey: tok.APIKey}
			if err := writeConfig(path, fc); err != nil {
				return fileConfig{}, fmt.Errorf("saving the key: %w", err)
			}
			what := fmt.Sprintf("key %s (%s)", tok.KeyName, tok.KeyID)
			if tok.TrialHours > 0 {
				what += ", a trial of " + sandboxHours(tok.TrialHours)
			}
			fmt.Fprintf(w, "Logged in to %s with %s; saved in %s\n", baseURL, what, path)
			return fc, nil
		case errors.As(err, &ae) && ae.Code == device.CodePending:
		case errors.As(err, &ae) && ae.Code == device.CodeSlowDown:
			interval += 5 * time.Second
		case errors.As(err, &ae) && ae.Code == device.CodeDenied:
			return fileConfig{}, errors.New("login refused: an administrator denied the code " + g.UserCode)
		case errors.As(err, &ae):
			return fileConfig{}, fmt.Errorf("login: %s", ae.Message)
		case time.Now().After(deadline):
			return fileConfig{}, fmt.Errorf("login: %w", err)
		default:
			// The server may be restarting: keep polling until the code expires.
			fmt.Fprintf(w, "withruntime: %v; retrying\n", err)
		}
	}
}

// clientName tells the approver who asks: user@host.
func clientName() string {
	host, _ := os.Hostname()
	name := "someone"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	s := name + "@" + host
	if len(s) > 100 {
		s = s[:100]
	}
	return s
}

func readConfig() (fileConfig, error) {
	var fc fileConfig
	p := configPath()
	if p == "" {
		return fc, os.ErrNotExist
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return fc, err
	}
	if err := json.Unmarshal(b, &fc); err != nil {
		return fc, fmt.Errorf("config file %s: %w", p, err)
	}
	return fc, nil
}

// writeConfig replaces the config file at path with fc atomically: a
// temporary file (0600) in the same directory (0700), synced, renamed over
// it. A reader sees the old file or the new one, never a part.
func writeConfig(path string, fc fileConfig) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	data, err := json.MarshalIndent(fc, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".config-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after the rename there is nothing to remove
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
