package agent

import (
	"errors"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/agentapi"
)

// File metadata (agentapi/metadata.go) as extended attributes.

// setMetadata gives the file f (a new upload, before it takes its name)
// the pairs of m. A file system without user extended attributes keeps
// none, as E2B's envd does: the answer's FileInfo then shows none.
func setMetadata(f *os.File, m map[string]string) error {
	for k, v := range m {
		err := unix.Fsetxattr(int(f.Fd()), agentapi.MetadataXattrPrefix+k, []byte(v), 0)
		if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readMetadata is the metadata of path (not following a final symlink):
// its MetadataXattrPrefix attributes that a write could have set, nil
// when none or when the file system has no extended attributes.
func readMetadata(path string) map[string]string {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(path, buf)
	if errors.Is(err, unix.ERANGE) {
		if sz, err2 := unix.Llistxattr(path, nil); err2 == nil && sz <= 64<<10 {
			buf = make([]byte, sz)
			n, err = unix.Llistxattr(path, buf)
		}
	}
	if err != nil || n <= 0 {
		return nil
	}
	var m map[string]string
	val := make([]byte, agentapi.MaxMetadataBytes+1)
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		key, ok := strings.CutPrefix(name, agentapi.MetadataXattrPrefix)
		if !ok || key == "" {
			continue
		}
		vn, err := unix.Lgetxattr(path, name, val)
		if err != nil || vn > agentapi.MaxMetadataBytes {
			continue
		}
		if m == nil {
			m = map[string]string{}
		}
		m[key] = string(val[:vn])
	}
	return agentapi.CleanMetadata(m)
}
