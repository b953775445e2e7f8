package sandbox

import "testing"

func TestPidsLimit(t *testing.T) {
	for _, c := range []struct{ limit, mem, want int64 }{
		{1024, 512, 128},   // the memory is the tighter bound
		{1024, 4096, 1024}, // the server's limit is
		{100, 512, 100},
		{0, 512, 128}, // no server limit: the memory's
		{1024, 64, 16},
	} {
		if got := pidsLimit(c.limit, c.mem); got != c.want {
			t.Errorf("pidsLimit(%d, %d MiB) = %d, want %d", c.limit, c.mem, got, c.want)
		}
	}
}

func TestTmpBytes(t *testing.T) {
	if got := tmpBytes(256, 512); got != 256<<20 {
		t.Errorf("512 MiB sandbox: %d", got)
	}
	if got := tmpBytes(256, 128); got != 64<<20 {
		t.Errorf("128 MiB sandbox: %d", got)
	}
}
