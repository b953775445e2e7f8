package agentauth

import (
	"os"
	"path/filepath"
)

func writeFile(dir, name string, b []byte) error {
	return os.WriteFile(filepath.Join(dir, name), b, 0o600)
}
