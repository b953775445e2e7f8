package agentapi

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// File metadata (E2B's, envd 0.6.2): short text pairs kept on a file as
// its extended attributes, MetadataXattrPrefix + key, so they live and die
// with the file (a rename keeps them, a copy or a new write does not).
// PUT /files?path=P&metadata=JSON (a JSON object of strings) replaces the
// file's metadata with those pairs; every write replaces the file, so a
// write without metadata leaves none. FileInfo.Metadata reports them.
// Whatever is inside the sandbox can set, change or remove them (they are
// the file's, as its bytes are): they are data, never a proof of who
// wrote the file, and the host reads them back as hostile (CleanMetadata).

// MetadataXattrPrefix is the extended attributes' namespace (E2B's).
const MetadataXattrPrefix = "user.e2b."

// Bounds of file metadata, as E2B's envd sets them.
const (
	// MaxMetadataKey caps a key (bytes): the Linux xattr name limit (255)
	// less MetadataXattrPrefix.
	MaxMetadataKey = 255 - len(MetadataXattrPrefix)
	// MaxMetadataBytes caps a file's metadata: the keys, with the prefix
	// counted for each, plus the values.
	MaxMetadataBytes = 4096
)

// metadataKeyChars are the characters of a key: an HTTP header name's
// (E2B sends keys as X-Metadata-KEY headers), lower-case.
const metadataKeyChars = "abcdefghijklmnopqrstuvwxyz0123456789!#$%&'*+-.^_`|~"

// CheckMetadata returns nil when m can be a file's metadata, else an error
// saying why: keys non-empty, lower-case HTTP token characters, at most
// MaxMetadataKey bytes; values printable US-ASCII; MaxMetadataBytes in all.
func CheckMetadata(m map[string]string) error {
	total := 0
	for k, v := range m {
		if k == "" || len(k) > MaxMetadataKey || strings.Trim(k, metadataKeyChars) != "" {
			return fmt.Errorf("metadata key %q: give 1-%d lower-case letters, digits or !#$%%&'*+-.^_`|~", k, MaxMetadataKey)
		}
		for i := 0; i < len(v); i++ {
			if v[i] < 0x20 || v[i] > 0x7e {
				return fmt.Errorf("the value of metadata key %q holds a byte outside printable US-ASCII (0x%02x)", k, v[i])
			}
		}
		total += len(MetadataXattrPrefix) + len(k) + len(v)
	}
	if total > MaxMetadataBytes {
		return fmt.Errorf("the metadata is %d bytes (keys with their %q prefix, and values); a file holds at most %d", total, MetadataXattrPrefix, MaxMetadataBytes)
	}
	return nil
}

// ParseMetadata reads the metadata query parameter: a JSON object of
// strings, checked (CheckMetadata). "" is none.
func ParseMetadata(q string) (map[string]string, error) {
	if q == "" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(q), &m); err != nil {
		return nil, fmt.Errorf("metadata is not a JSON object of strings: %v", err)
	}
	if err := CheckMetadata(m); err != nil {
		return nil, err
	}
	return m, nil
}

// CleanMetadata returns the pairs of m (read from inside a sandbox) that a
// write could have set, in key order until MaxMetadataBytes; nil when none.
func CleanMetadata(m map[string]string) map[string]string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out map[string]string
	total := 0
	for _, k := range keys {
		one := map[string]string{k: m[k]}
		n := len(MetadataXattrPrefix) + len(k) + len(m[k])
		if CheckMetadata(one) != nil || total+n > MaxMetadataBytes {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = m[k]
		total += n
	}
	return out
}
