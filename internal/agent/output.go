package agent

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Stream indexes.
const (
	stdout = 0
	stderr = 1
)

var streamNames = [2]string{"stdout", "stderr"}

// sink receives what a command writes. write is called from the stream's
// reader goroutine, one call at a time per stream; it may block (streaming
// applies back pressure) and must not keep p. end is called once per stream
// when no more data will be delivered: at EOF, or when the stream is
// abandoned to a lingering background child (see outStream).
type sink interface {
	write(stream int, p []byte)
	end(stream int)
}

// Lingering output. A command's result is complete when its main process has
// exited and both pipes are at EOF. A background child (`server &`) inherits
// the pipes and may hold them open indefinitely, so after the main process
// exits a stream waits at most lingerGrace for EOF and then gives up. The
// grace is wall time since the exit, except time spent blocked handing data
// to a slow streaming client while the data is still within lingerBytes (the
// most a pipe can hold, i.e. what the main process may have left behind):
// that output is never lost, yet a chatty lingering child cannot hold the
// answer open. When the agent killed the command the grace is killedGrace,
// to answer promptly. After giving up, the reader keeps draining and
// discarding the pipe until EOF so the lingering child never blocks on a
// full pipe or dies of SIGPIPE.
const (
	lingerGrace = 200 * time.Millisecond
	killedGrace = 50 * time.Millisecond
	lingerBytes = 1 << 20 // /proc/sys/fs/pipe-max-size default
)

// outStream reads one of a command's pipes into a sink.
type outStream struct {
	idx   int
	r     *os.File
	sink  sink
	total atomic.Int64 // every byte read, delivered or discarded
	final atomic.Int64 // total when done closed: the bytes that count
	done  chan struct{}

	// exited is closed by mainExited: a stream at EOF waits for it, so
	// that an epilogue set when the main process is reaped still goes out.
	exited chan struct{}

	mu       sync.Mutex
	exitAt   time.Time // when the main process exited; zero while it runs
	grace    time.Duration
	epilogue []byte // the agent's own last words on this stream (proc.note)
}

func newOutStream(idx int, r *os.File, s sink) *outStream {
	return &outStream{idx: idx, r: r, sink: s, done: make(chan struct{}), exited: make(chan struct{})}
}

// mainExited starts the grace period; a pending Read gets its deadline.
func (s *outStream) mainExited(grace time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exitAt, s.grace = time.Now(), grace
	_ = s.r.SetReadDeadline(s.exitAt.Add(grace))
	close(s.exited)
}

// setEpilogue makes b the last bytes the sink gets from this stream, after
// the command's own. Call it before mainExited. The bytes are the agent's,
// not the command's: count leaves them out.
func (s *outStream) setEpilogue(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epilogue = b
}

// run reads until EOF. It closes done at EOF (once the main process has
// exited) or when the grace is used up, whichever is first, and then keeps
// discarding until EOF.
func (s *outStream) run() {
	defer s.r.Close()
	buf := make([]byte, 32<<10)
	detached := false
	finish := func() {
		detached = true
		s.mu.Lock()
		epilogue := s.epilogue
		s.mu.Unlock()
		if len(epilogue) > 0 {
			s.sink.write(s.idx, epilogue)
		}
		s.sink.end(s.idx)
		s.final.Store(s.total.Load())
		close(s.done)
	}
	var excused time.Duration // post-exit time spent in sink.write, forgiven
	var afterExit int64       // bytes delivered after the exit
	for {
		if !detached {
			s.mu.Lock()
			if !s.exitAt.IsZero() {
				left := s.grace - (time.Since(s.exitAt) - excused)
				if left <= 0 {
					s.mu.Unlock()
					finish()
					_ = s.r.SetReadDeadline(time.Time{})
					continue
				}
				_ = s.r.SetReadDeadline(time.Now().Add(left))
			}
			s.mu.Unlock()
		}
		n, err := s.r.Read(buf)
		if n > 0 {
			s.total.Add(int64(n))
			if !detached {
				t0 := time.Now()
				s.sink.write(s.idx, buf[:n])
				s.mu.Lock()
				if exitAt := s.exitAt; !exitAt.IsZero() && afterExit < lingerBytes {
					excused += time.Since(later(t0, exitAt))
					afterExit += int64(n)
				}
				s.mu.Unlock()
			}
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if !detached {
					finish()
				}
				_ = s.r.SetReadDeadline(time.Time{})
				continue
			}
			if !detached {
				<-s.exited // see exited
				finish()
			}
			return
		}
	}
}

// count is the number of bytes that belong to the command's result: all so
// far while running, and what was read before EOF or giving up once done.
func (s *outStream) count() int64 {
	select {
	case <-s.done:
		return s.final.Load()
	default:
		return s.total.Load()
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// utf8Holder holds back an incomplete UTF-8 sequence at the end of a chunk
// until the next chunk completes it.
type utf8Holder struct{ pending []byte }

// feed returns the complete part of pending+p; the rest is kept.
func (h *utf8Holder) feed(p []byte) []byte {
	data := append(h.pending, p...)
	cut := completePrefix(data)
	h.pending = append([]byte(nil), data[cut:]...)
	return data[:cut]
}

// flush returns whatever is held (an incomplete, thus invalid, sequence).
func (h *utf8Holder) flush() []byte {
	p := h.pending
	h.pending = nil
	return p
}

// completePrefix is the length of b without a trailing UTF-8 sequence that
// is incomplete but could still be completed by more bytes.
func completePrefix(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

// decodeText turns b into text: valid UTF-8 is returned as is (NUL
// included); otherwise each invalid byte becomes U+FFFD, lossy is true and
// b64 holds the exact bytes.
func decodeText(b []byte) (text string, lossy bool, b64 string) {
	if utf8.Valid(b) {
		return string(b), false, ""
	}
	out := make([]rune, 0, len(b))
	for rest := b; len(rest) > 0; {
		r, n := utf8.DecodeRune(rest)
		out = append(out, r)
		rest = rest[n:]
	}
	return string(out), true, base64.StdEncoding.EncodeToString(b)
}

// capBuffer keeps what a collected result shows of one stream: all of it
// while it fits in limit bytes; past that its head and its tail, joined by
// a marker that says how much was cut (see text). It holds at most 2*limit
// bytes however much the command writes.
type capBuffer struct {
	mu    sync.Mutex
	limit int
	head  []byte // the first limit bytes
	tail  ring   // the last limit bytes, once head is full
}

func newCapBuffer(limit int) *capBuffer {
	return &capBuffer{limit: limit, tail: ring{cap: max(limit, 1)}}
}

func (c *capBuffer) write(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.limit - len(c.head); room > 0 {
		n := min(room, len(p))
		c.head = append(c.head, p[:n]...)
		p = p[n:]
	}
	if len(p) > 0 {
		c.tail.write(p)
	}
}

// minMarkedCap is the smallest cap that shows a head, a marker and a tail;
// below it a truncated stream keeps only its head.
const minMarkedCap = 128

// omittedMarker is the line put where output was cut out.
func omittedMarker(n int64) string {
	return fmt.Sprintf("\n[... %d bytes omitted ...]\n", n)
}

// text returns what the result shows, decoded (see decodeText). Untruncated
// output is returned whole. Truncated output (of total bytes) is the first
// bytes, omittedMarker, and the last bytes, together at most limit bytes;
// the cuts fall on UTF-8 character boundaries, and the marker counts the
// bytes left out exactly.
func (c *capBuffer) text() (string, bool, string) {
	c.mu.Lock()
	head := c.head
	tail, _, _ := c.tail.from(0)
	total := int64(len(head)) + c.tail.total
	c.mu.Unlock()
	if total <= int64(c.limit) {
		return decodeText(head)
	}
	if c.limit < minMarkedCap {
		return decodeText(head[:completePrefix(head)])
	}
	// last is the last n <= limit bytes of the stream. The tail ring has
	// dropped nothing while it holds fewer than limit bytes, so what it
	// lacks is the end of head.
	last := func(n int) []byte {
		if n <= len(tail) {
			return tail[len(tail)-n:]
		}
		return append(append([]byte(nil), head[len(head)-(n-len(tail)):]...), tail...)
	}
	marker := omittedMarker(total)
	var h, t []byte
	for range 4 { // the marker's length depends on the count; settle it
		room := c.limit - len(marker)
		h = head[:room/2]
		h = h[:completePrefix(h)]
		t = trimPartialRune(last(room - room/2))
		next := omittedMarker(total - int64(len(h)) - int64(len(t)))
		if len(next) == len(marker) {
			marker = next
			break
		}
		marker = next
	}
	marker = omittedMarker(total - int64(len(h)) - int64(len(t)))
	out := make([]byte, 0, len(h)+len(marker)+len(t))
	out = append(append(append(out, h...), marker...), t...)
	return decodeText(out)
}

// collectSink captures both streams up to a cap each.
type collectSink struct{ bufs [2]*capBuffer }

func newCollectSink(limit int) *collectSink {
	return &collectSink{bufs: [2]*capBuffer{newCapBuffer(limit), newCapBuffer(limit)}}
}

func (c *collectSink) write(stream int, p []byte) { c.bufs[stream].write(p) }
func (c *collectSink) end(int)                    {}
