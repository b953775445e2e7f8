package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultDataDir is where a server keeps its state unless told otherwise.
const DefaultDataDir = "/var/lib/withruntime"

// lockFile and holderFile are in the data directory: one server at a time
// holds an exclusive lock on lockFile for as long as it runs, and says in
// holderFile who it is and where it serves.
const (
	lockFile   = "server.lock"
	holderFile = "server.json"
)

// Holder is the server that runs on a data directory.
type Holder struct {
	// PID is its process id.
	PID int `json:"pid"`
	// URL is where it serves the API ("" for the embedded server of a CLI
	// command, which serves only itself).
	URL string `json:"url,omitempty"`
}

// ErrInUse says another server runs on the data directory. Two servers on
// one directory would each adopt the other's sandboxes and take over their
// networks, so Open refuses; use the running one (Holder.URL), or wait.
type ErrInUse struct {
	DataDir string
	Holder  Holder
}

func (e *ErrInUse) Error() string {
	who := fmt.Sprintf("another withruntime process (pid %d)", e.Holder.PID)
	if e.Holder.URL != "" {
		who = fmt.Sprintf("withruntime serve (pid %d, at %s)", e.Holder.PID, e.Holder.URL)
	}
	return fmt.Sprintf("data directory %s is in use by %s; use that server (WITHRUNTIME_URL), stop it, or give another --data-dir", e.DataDir, who)
}

// lockDataDir takes the data directory's lock or fails with *ErrInUse. The
// lock is the kernel's (flock), so a server that dies releases it.
func lockDataDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			h, _ := ReadHolder(dir)
			return nil, &ErrInUse{DataDir: dir, Holder: h}
		}
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	if err := writeHolder(dir, Holder{PID: os.Getpid()}); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadHolder reads who holds (or last held) the data directory.
func ReadHolder(dir string) (Holder, error) {
	var h Holder
	b, err := os.ReadFile(filepath.Join(dir, holderFile))
	if err != nil {
		return h, err
	}
	err = json.Unmarshal(b, &h)
	return h, err
}

func writeHolder(dir string, h Holder) error {
	b, _ := json.Marshal(h)
	tmp := filepath.Join(dir, holderFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("data directory holder: %w", err)
	}
	return os.Rename(tmp, filepath.Join(dir, holderFile))
}

// Advertise records that this server serves the API at url, so that CLI
// commands on the same data directory use it instead of failing.
func (s *Server) Advertise(url string) error {
	return writeHolder(s.dataDir, Holder{PID: os.Getpid(), URL: url})
}

// EgressNames fills in the names a server on dataDir uses unless cfg sets
// them: on a data directory other than the default, its own nftables table,
// namespace names and veth prefix, so that servers on different directories
// never take each other's networks for leftovers. Open applies it; tests
// call it to know the names a server will use.
func EgressNames(cfg *EgressConfig, dataDir string) {
	abs, err := filepath.Abs(dataDir)
	if err != nil || abs == DefaultDataDir {
		return
	}
	sum := sha256Hex(abs)
	if cfg.Name == "" {
		cfg.Name = "withruntime-" + sum[:8]
	}
	if cfg.LinkPrefix == "" {
		cfg.LinkPrefix = "w" + sum[:5] // never "wr…", the default's prefix
	}
}

// namesDir holds a lock file per egress name and link prefix in use on
// this host (a tmpfs: cleared at boot, like the networks it guards).
var namesDir = "/run/withruntime/names"

// lockNames takes host-wide locks on the egress names a server on dataDir
// uses (its nftables table and namespace names, its veth prefix), held
// until the files are closed: two servers with the same names (a hash
// collision of two data directories, or names configured twice) would
// each clean up the other's networks and drop the other's traffic, so the
// second is refused. The kernel releases the locks of a server that dies.
func lockNames(cfg EgressConfig, dataDir string) ([]*os.File, error) {
	if cfg.Disabled {
		return nil, nil
	}
	name, prefix := cfg.Name, cfg.LinkPrefix
	if name == "" {
		name = "withruntime"
	}
	if prefix == "" {
		prefix = "wr"
	}
	if err := os.MkdirAll(namesDir, 0o700); err != nil {
		return nil, fmt.Errorf("egress name lock: %w", err)
	}
	var held []*os.File
	release := func() {
		for _, f := range held {
			f.Close()
		}
	}
	for _, n := range []struct{ kind, value string }{{"name", name}, {"link", prefix}} {
		if strings.ContainsAny(n.value, "/\x00") || n.value == "" {
			release()
			return nil, fmt.Errorf("egress %s %q: not a valid name", n.kind, n.value)
		}
		path := filepath.Join(namesDir, n.kind+"-"+n.value)
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			release()
			return nil, fmt.Errorf("egress name lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			owner, _ := os.ReadFile(path)
			f.Close()
			release()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("the sandbox network %s %q of this server (data directory %s) is in use by another server (%s): servers on one host need different ones; set EgressConfig.Name and LinkPrefix",
					n.kind, n.value, dataDir, strings.TrimSpace(string(owner)))
			}
			return nil, fmt.Errorf("egress name lock: %w", err)
		}
		_ = f.Truncate(0)
		_, _ = f.WriteAt([]byte(fmt.Sprintf("data directory %s, pid %d\n", dataDir, os.Getpid())), 0)
		held = append(held, f)
	}
	return held, nil
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
