package e2b

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"withruntime.dev/runtime/internal/api"
)

// The facade decodes what passes through it into Runtime's types and
// encodes it again in E2B's shapes (never passing a sandbox's bytes
// through), so a request body or an answer line is in the server's memory
// about three times over while it is translated. Those bytes are booked
// against the key's bound on request memory (api.Hold, the same bound the
// native API's bodies count against), so that one key's many large cells
// cannot take the server's memory from every other tenant: past the bound
// a request is refused (503) or a stream ends with an error that says why.

// translateCopies is how many copies of a line or body a translation holds
// at once: the bytes read, the decoded strings, the encoded answer.
const translateCopies = 3

// errHeld ends a read that would take the key over its memory bound.
var errHeld = errors.New("memory bound")

// held is the bytes one request has booked for its key.
type held struct {
	key string
	n   int64
}

// take books n more bytes, or reports false (nothing booked).
func (h *held) take(n int64) bool {
	if !api.Hold(h.key, n) {
		return false
	}
	h.n += n
	return true
}

// release gives back everything booked; it may be called more than once.
func (h *held) release() {
	if h.n > 0 {
		api.Release(h.key, h.n)
		h.n = 0
	}
}

// heldError says which bound a refused request or a cut stream met.
func heldError() string {
	return fmt.Sprintf("this key's requests already hold %d MiB of cells' code and output in the server's memory; retry when some have finished, or write large output to a file and download it", api.MaxHeldBytesPerKey>>20)
}

// readHeld reads at most limit bytes of r, booking translateCopies times
// each chunk read (the body, its decoded form and its re-encoding).
func readHeld(r io.Reader, limit int64, h *held) ([]byte, error) {
	var buf bytes.Buffer
	chunk := make([]byte, 64<<10)
	lr := io.LimitReader(r, limit+1)
	for {
		n, err := lr.Read(chunk)
		if n > 0 {
			if !h.take(translateCopies * int64(n)) {
				return nil, errHeld
			}
			buf.Write(chunk[:n])
		}
		if int64(buf.Len()) > limit {
			return nil, fmt.Errorf("the body is over %d MiB", limit>>20)
		}
		if errors.Is(err, io.EOF) {
			return buf.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// lineReader reads NDJSON lines of at most max bytes, booking each line's
// bytes translateCopies times as they arrive; the caller gives a line's
// booking back (h.release) once it has translated and written it.
type lineReader struct {
	br  *bufio.Reader
	max int
	h   *held
}

func newLineReader(r io.Reader, max int, h *held) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), max: max, h: h}
}

// next returns the next line without its newline; io.EOF at the end, errHeld
// when the line would take the key over its bound.
func (l *lineReader) next() ([]byte, error) {
	var line []byte
	for {
		frag, err := l.br.ReadSlice('\n')
		if len(frag) > 0 {
			if len(line)+len(frag) > l.max {
				return nil, fmt.Errorf("a line of the code stream is over %d MiB", l.max>>20)
			}
			if !l.h.take(translateCopies * int64(len(frag))) {
				return nil, errHeld
			}
			line = append(line, frag...)
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(line, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return line, nil
		default:
			return nil, err
		}
	}
}
