package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// HostFilesDir is where the host puts the files the sandbox's /etc needs
// from it: etc/ of the sandbox's host directory, which the gVisor driver
// mounts read-only inside the socket directory, beside the agent. One
// directory for all of them, since every mount costs the sandbox host
// threads for its whole life.
const HostFilesDir = "/run/withruntime/host/etc"

// hostFiles maps a file in HostFilesDir to where the sandbox sees it.
var hostFiles = []struct{ name, path string }{
	{"hosts", "/etc/hosts"},
	{"resolv.conf", "/etc/resolv.conf"},
	{"ca-certificates.crt", "/etc/ssl/certs/ca-certificates.crt"},
}

// LinkHostFiles points each file of hostFiles that dir holds at it: the
// path becomes a symbolic link to dir/NAME, replacing what the template
// had there (its parent directories are made when missing). The content
// stays the host's, read-only, and follows the host's changes (a resumed
// sandbox's new resolv.conf). Root inside may replace a link, as it may
// ignore the file: nothing the host enforces depends on them. Call it once
// at boot, as PID 1, before serving; it changes the sandbox's own root
// filesystem only. A file it cannot link is reported and the rest are
// still linked.
func LinkHostFiles(dir string) error {
	var errList []error
	for _, f := range hostFiles {
		src := filepath.Join(dir, f.name)
		if _, err := os.Lstat(src); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errList = append(errList, err)
			}
			continue
		}
		if err := linkHostFile(src, f.path); err != nil {
			errList = append(errList, fmt.Errorf("link %s to %s: %w", f.path, src, err))
		}
	}
	return errors.Join(errList...)
}

func linkHostFile(src, path string) error {
	if target, err := os.Readlink(path); err == nil && target == src {
		return nil // a restored or re-started agent: already linked
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Symlink(src, path)
}

// systemCABundle is the sandbox's system CA bundle, which the variables
// of secrets.TrustEnvNames point at.
const systemCABundle = "/etc/ssl/certs/ca-certificates.crt"

// maxTrustBytes caps the certificates AddTrust reads and the bundle it
// extends (16 MiB).
const maxTrustBytes = 16 << 20

// AddTrust adds the PEM certificates of file to the sandbox's system CA
// bundle (made when the image has none), unless it holds them already: the
// Kubernetes driver gives a sandbox with secrets the Runtime CA this way,
// the image's own roots staying trusted. Call it once at boot, as PID 1; it
// changes the sandbox's own root filesystem only (the file is replaced,
// never written through a link).
func AddTrust(file string) error { return addTrust(file, systemCABundle) }

func addTrust(file, bundlePath string) error {
	add, err := readCapped(file)
	if err != nil {
		return fmt.Errorf("add trust: %w", err)
	}
	bundle, err := readCapped(bundlePath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("add trust: %w", err)
	}
	if len(add) == 0 || strings.Contains(string(bundle), string(add)) {
		return nil
	}
	if len(bundle) > 0 && bundle[len(bundle)-1] != '\n' {
		bundle = append(bundle, '\n')
	}
	bundle = append(bundle, add...)
	if err := os.MkdirAll(filepath.Dir(bundlePath), 0o755); err != nil {
		return fmt.Errorf("add trust: %w", err)
	}
	tmp := bundlePath + ".withruntime"
	if err := os.WriteFile(tmp, bundle, 0o644); err != nil {
		return fmt.Errorf("add trust: %w", err)
	}
	if err := os.Rename(tmp, bundlePath); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("add trust: %w", err)
	}
	return nil
}

func readCapped(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTrustBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxTrustBytes {
		return nil, fmt.Errorf("%s: more than %d bytes", path, maxTrustBytes)
	}
	return b, nil
}
