package agent

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// A capped stream keeps its head and its tail around a marker that counts
// the cut bytes exactly, within the cap, on character boundaries.
func TestCapBufferHeadAndTail(t *testing.T) {
	for _, c := range []struct {
		limit int
		input string
		want  string // "" means the input itself
	}{
		{200, strings.Repeat("a", 200), ""},
		{200, strings.Repeat("a", 199), ""},
		{128, strings.Repeat("x", 64) + strings.Repeat("-", 1000) + strings.Repeat("y", 64),
			strings.Repeat("x", 49) + "\n[... 1030 bytes omitted ...]\n" + strings.Repeat("y", 49)},
		{10, "0123456789abc", "0123456789"}, // below minMarkedCap: the head only
	} {
		for _, chunk := range []int{1, 7, 4096} {
			b := newCapBuffer(c.limit)
			for in := c.input; in != ""; {
				n := min(chunk, len(in))
				b.write([]byte(in[:n]))
				in = in[n:]
			}
			got, lossy, _ := b.text()
			want := c.want
			if want == "" {
				want = c.input
			}
			if got != want || lossy || len(got) > c.limit {
				t.Errorf("limit %d, %d bytes in chunks of %d: got %q, want %q", c.limit, len(c.input), chunk, got, want)
			}
		}
	}
}

func TestCapBufferExactCountAndBoundaries(t *testing.T) {
	for _, n := range []int{201, 1000, 24691, 400000} {
		in := strings.Repeat("é☕", n) // 5 bytes a pair: the cuts fall inside characters
		total := len(in)
		const limit = 1000
		b := newCapBuffer(limit)
		b.write([]byte(in))
		got, lossy, raw := b.text()
		if len(got) > limit {
			t.Errorf("%d: kept %d bytes, over the cap %d", total, len(got), limit)
		}
		head, tail, ok := strings.Cut(got, "\n[... ")
		if !ok {
			t.Fatalf("%d: no marker in %q", total, got)
		}
		var omitted int
		if _, err := fmt.Sscanf(tail, "%d bytes omitted ...]\n", &omitted); err != nil {
			t.Fatalf("%d: marker %q: %v", total, tail[:40], err)
		}
		tail = tail[strings.Index(tail, "]\n")+2:]
		if len(head)+len(tail)+omitted != total {
			t.Errorf("%d: head %d + tail %d + omitted %d", total, len(head), len(tail), omitted)
		}
		if !strings.HasPrefix(in, head) || !strings.HasSuffix(in, tail) || !utf8.ValidString(head) || !utf8.ValidString(tail) {
			t.Errorf("%d: head or tail is not a whole-character piece of the input", total)
		}
		if lossy || raw != "" {
			t.Errorf("%d: lossy %v", total, lossy)
		}
	}
}
