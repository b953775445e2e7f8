package agentapi

import (
	"strings"
	"testing"
)

// TestMetadataRules: E2B's bounds (a key's characters and length, values
// printable US-ASCII, 4 KiB in all); a hostile set read back from a file
// is cut to what a write could have made.
func TestMetadataRules(t *testing.T) {
	ok := map[string]string{"owner": "agent-7", "x.y-z_1": "", "k": " ~printable~ "}
	if err := CheckMetadata(ok); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]string{
		{"": "v"}, {"Upper": "v"}, {"sp ace": "v"}, {"k": "tab\there"}, {"k": "caf\u00e9"}, {"k": "nul\x00"},
		{strings.Repeat("k", MaxMetadataKey+1): "v"}, {"a": strings.Repeat("v", MaxMetadataBytes)},
	} {
		if CheckMetadata(bad) == nil {
			t.Errorf("%q was taken", bad)
		}
	}
	if err := CheckMetadata(map[string]string{strings.Repeat("k", MaxMetadataKey): "v"}); err != nil {
		t.Errorf("a key of the longest length: %v", err)
	}
	if m, err := ParseMetadata(`{"a":"1","b":"2"}`); err != nil || m["a"] != "1" || len(m) != 2 {
		t.Errorf("parse: %v %v", m, err)
	}
	for _, q := range []string{`[]`, `{"a":1}`, `{"A":"x"}`, `not json`} {
		if _, err := ParseMetadata(q); err == nil {
			t.Errorf("%s was taken", q)
		}
	}
	if m, err := ParseMetadata(""); m != nil || err != nil {
		t.Errorf("none: %v %v", m, err)
	}
	hostile := map[string]string{"good": "yes", "Bad": "x", "bin": "\xff\xfe", "big1": strings.Repeat("a", 3000), "big2": strings.Repeat("b", 3000)}
	clean := CleanMetadata(hostile)
	if clean["good"] != "yes" || clean["big1"] == "" || len(clean) != 2 {
		t.Errorf("cleaned: %d keys %v", len(clean), clean["good"])
	}
	if CleanMetadata(map[string]string{"Bad": "x"}) != nil {
		t.Error("nothing left should be nil")
	}
}
