package agent

import (
	"sync"
	"unicode/utf8"

	"withruntime.dev/runtime/internal/agentapi"
)

// ring keeps the last cap bytes written to it, addressed by absolute offset
// (the count of bytes ever written).
type ring struct {
	cap   int
	buf   []byte // grows up to cap, then wraps
	start int    // index of the oldest byte once full
	total int64  // absolute offset of the end
}

func (r *ring) write(p []byte) {
	r.total += int64(len(p))
	if len(p) >= r.cap {
		r.buf = append(r.buf[:0], p[len(p)-r.cap:]...)
		r.start = 0
		return
	}
	if len(r.buf) < r.cap {
		n := min(r.cap-len(r.buf), len(p))
		r.buf = append(r.buf, p[:n]...)
		p = p[n:]
	}
	for len(p) > 0 {
		n := copy(r.buf[r.start:], p)
		r.start = (r.start + n) % r.cap
		p = p[n:]
	}
}

// from copies out the bytes from offset off to the end. When off is older
// than what is kept it starts at the oldest kept byte and skipped is true.
func (r *ring) from(off int64) (data []byte, end int64, skipped bool) {
	first := r.total - int64(len(r.buf))
	if off < first {
		off, skipped = first, true
	}
	n := int(r.total - off)
	if n <= 0 {
		return nil, r.total, skipped
	}
	data = make([]byte, 0, n)
	i := (r.start + int(off-first)) % max(len(r.buf), 1)
	if i+n <= len(r.buf) {
		data = append(data, r.buf[i:i+n]...)
	} else {
		data = append(data, r.buf[i:]...)
		data = append(data, r.buf[:n-(len(r.buf)-i)]...)
	}
	return data, r.total, skipped
}

// trimPartialRune drops continuation bytes at the start of b, left over
// from a character whose first bytes were dropped from the replay buffer.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return b
}

// replaySink keeps the tail of both streams of a background process for
// clients that wait on it later, and wakes live followers on every write.
type replaySink struct {
	mu       sync.Mutex
	rings    [2]ring
	changed  chan struct{} // closed and replaced on every write
	released bool          // output dropped to bound memory
}

func newReplaySink(size int) *replaySink {
	return &replaySink{
		rings:   [2]ring{{cap: size}, {cap: size}},
		changed: make(chan struct{}),
	}
}

func (s *replaySink) write(stream int, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.released {
		s.rings[stream].write(p)
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *replaySink) end(int) {}

// retained is how many bytes the buffers hold.
func (s *replaySink) retained() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rings[0].buf) + len(s.rings[1].buf)
}

// release frees the buffers; later waits see no output (truncated).
func (s *replaySink) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = true
	s.rings[0], s.rings[1] = ring{cap: s.rings[0].cap}, ring{cap: s.rings[1].cap}
}

// read returns what follows offs in each stream and the channel that is
// closed on the next write. offs is advanced.
func (s *replaySink) read(offs *[2]int64) (data [2][]byte, changed chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.rings {
		var skipped bool
		data[i], offs[i], skipped = s.rings[i].from(offs[i])
		if skipped {
			data[i] = trimPartialRune(data[i])
		}
	}
	return data, s.changed
}

// fill puts the replay buffers into res as a collected result: the last
// bytes of each stream; truncated means the beginning was dropped.
func (s *replaySink) fill(res *agentapi.ExecResult) {
	var offs [2]int64
	data, _ := s.read(&offs)
	res.StdoutTruncated = res.StdoutBytes > int64(len(data[stdout]))
	res.StderrTruncated = res.StderrBytes > int64(len(data[stderr]))
	res.Stdout, res.StdoutLossy, res.StdoutBase64 = decodeText(data[stdout])
	res.Stderr, res.StderrLossy, res.StderrBase64 = decodeText(data[stderr])
}

// span copies out at most limit bytes from offset off, exactly as written.
// When off is older than what is kept it starts at the oldest kept byte,
// and lost is how many bytes were skipped.
func (r *ring) span(off int64, limit int) (data []byte, next, lost int64) {
	first := r.total - int64(len(r.buf))
	if off < first {
		lost, off = first-off, first
	}
	n := int(min(r.total-off, int64(limit)))
	if n <= 0 {
		return nil, max(off, r.total), lost
	}
	data = make([]byte, 0, n)
	i := (r.start + int(off-first)) % max(len(r.buf), 1)
	if i+n <= len(r.buf) {
		data = append(data, r.buf[i:i+n]...)
	} else {
		data = append(data, r.buf[i:]...)
		data = append(data, r.buf[:n-(len(r.buf)-i)]...)
	}
	return data, off + int64(n), lost
}

// readRaw is ring.span on stream's buffer, with the channel that is closed
// on the next write. A terminal's viewers each follow the buffer at their
// own offset through it, so the program never waits for one.
func (s *replaySink) readRaw(stream int, off int64, limit int) (data []byte, next, lost int64, changed chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, next, lost = s.rings[stream].span(off, limit)
	return data, next, lost, s.changed
}
