package tools

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }

// capBuf keeps the head and the tail of a stream of bytes in bounded
// memory, for a result capped at limit bytes: the first limit/2 and the
// last limit/2 bytes, each cut back to a UTF-8 boundary.
type capBuf struct {
	limit   int
	head    []byte // the first headCap bytes
	tail    []byte // the last bytes after head (at most 2*tailCap)
	dropped int64  // bytes dropped between head and tail
}

func newCapBuf(limit int) *capBuf { return &capBuf{limit: limit} }

func (c *capBuf) headLimit() int { return c.limit / 2 }
func (c *capBuf) tailLimit() int { return c.limit - c.limit/2 }

// Write never fails.
func (c *capBuf) Write(p []byte) (int, error) {
	n := len(p)
	if room := c.headLimit() + utf8.UTFMax - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	c.tail = append(c.tail, p...)
	keep := c.tailLimit() + utf8.UTFMax
	if len(c.tail) > 2*keep {
		drop := len(c.tail) - keep
		c.dropped += int64(drop)
		c.tail = append(c.tail[:0], c.tail[drop:]...)
	}
	return n, nil
}

// Total is the number of bytes written.
func (c *capBuf) Total() int64 { return int64(len(c.head)+len(c.tail)) + c.dropped }

// Parts returns the kept head and tail and the number of bytes cut between
// them (0 when nothing was: then tail is empty and head is everything).
func (c *capBuf) Parts() (head, tail []byte, cut int64) {
	if c.dropped == 0 {
		all := append(append([]byte{}, c.head...), c.tail...)
		if len(all) <= c.limit {
			return all, nil, 0
		}
		h := runeBoundaryBefore(all, c.headLimit())
		t := runeBoundaryAfter(all, len(all)-c.tailLimit())
		return all[:h], all[t:], int64(t - h)
	}
	h := runeBoundaryBefore(c.head, c.headLimit())
	t := runeBoundaryAfter(c.tail, len(c.tail)-c.tailLimit())
	return c.head[:h], c.tail[t:], c.Total() - int64(h) - int64(len(c.tail)-t)
}

// Text returns the kept text with a marker where bytes were cut; what
// names the stream in the marker ("stdout", "the file").
func (c *capBuf) Text(what string) (string, int64) {
	head, tail, cut := c.Parts()
	if cut == 0 {
		return string(head), 0
	}
	return string(head) + marker(cut, c.Total(), what) + string(tail), cut
}

func marker(cut, total int64, what string) string {
	return fmt.Sprintf("\n[... %d bytes cut from the middle of %s (%d bytes in all); the first and last parts are shown ...]\n", cut, what, total)
}

// runeBoundaryBefore is the largest i <= n that starts a UTF-8 sequence in b
// (or len(b)).
func runeBoundaryBefore(b []byte, n int) int {
	if n >= len(b) {
		return len(b)
	}
	for i := n; i > 0 && n-i < utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return n
}

// runeBoundaryAfter is the smallest i >= n that starts a UTF-8 sequence in b.
func runeBoundaryAfter(b []byte, n int) int {
	if n <= 0 {
		return 0
	}
	for i := n; i < len(b) && i-n < utf8.UTFMax; i++ {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return n
}

// prefix returns the first n bytes written (or all, if fewer), as long as
// n is at most the head limit.
func (c *capBuf) prefix(n int) []byte {
	all := c.head
	if c.dropped == 0 {
		all = append(append([]byte{}, c.head...), c.tail...)
	}
	return all[:min(n, len(all))]
}
