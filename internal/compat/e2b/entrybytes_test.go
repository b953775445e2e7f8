package e2b

import (
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
)

// TestEntryBytesCountsMetadata: a listed entry's metadata (which root inside
// the sandbox may set on every file, up to 4 KiB) counts in what a listing
// books, so a directory of files heavy with metadata meets the listing's
// bound rather than the server's memory.
func TestEntryBytesCountsMetadata(t *testing.T) {
	bare := agentapi.FileInfo{Name: "f", Path: "/workspace/m/f"}
	heavy := bare
	heavy.Metadata = map[string]string{}
	for i := range 40 {
		heavy.Metadata[strings.Repeat("k", 8)+string(rune('a'+i%26))+string(rune('a'+i/26))] = strings.Repeat("v", 88)
	}
	if b, h := entryBytes(bare), entryBytes(heavy); h < b+2*40*98 {
		t.Errorf("an entry with 40 pairs of ~98 bytes books %d bytes, the bare one %d", h, b)
	}
	// 10,000 such files are over a third of the listing's bound.
	if n := 10_000 * entryBytes(heavy); n < maxListDirBytes/3 {
		t.Errorf("10,000 heavy entries book %d bytes of %d", n, maxListDirBytes)
	}
}
