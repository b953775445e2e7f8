package gvisor

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

const agentName = "withruntime-agent"

// installAgent copies the agent binary into dir (when it differs), writing a
// temporary file and renaming it so that a sandbox booting meanwhile never
// sees a half-written binary.
func installAgent(src, dir string) error {
	want, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("agent binary %q: %w (build it with scripts/install.sh or set WITHRUNTIME_AGENT)", src, err)
	}
	dst := filepath.Join(dir, agentName)
	if have, err := os.ReadFile(dst); err == nil && bytes.Equal(have, want) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".agent-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, bytes.NewReader(want)); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
