package main

import "testing"

func TestDetacher(t *testing.T) {
	for _, c := range []struct {
		in     []string
		out    string
		detach bool
	}{
		{[]string{"ls\r"}, "ls\r", false},
		{[]string{"a\x10\x11b"}, "a", true},
		{[]string{"a\x10", "\x11"}, "a", true},      // split across reads
		{[]string{"\x10x"}, "\x10x", false},         // Ctrl-P then another key: both go
		{[]string{"\x10\x10", "y"}, "\x10y", false}, // Ctrl-P twice sends one
		{[]string{"\x10"}, "", false},               // held back
		{[]string{"\x03"}, "\x03", false},           // Ctrl-C goes to the program
	} {
		var d detacher
		var out []byte
		detach := false
		for _, in := range c.in {
			o, dt := d.feed([]byte(in))
			out = append(out, o...)
			if dt {
				detach = true
				break
			}
		}
		if string(out) != c.out || detach != c.detach {
			t.Errorf("%q: sent %q detach %v, want %q %v", c.in, out, detach, c.out, c.detach)
		}
	}
}
