package agent

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// tempFiles are the agent's own temporary files: an upload is written to
// one beside its target and renamed over it, as is a move across
// filesystems. A file watch does not report them: it reports the target's
// create (when it did not exist) and write when the rename lands, as a
// watcher of a plain write would see it (and as E2B's envd reports an
// upload). A name is registered before the file is made, so no watch can
// see it first, and kept tempKeep after it is done, for watches that read
// its events late.
type tempFiles struct {
	mu sync.Mutex
	m  map[string]*tempFile
}

type tempFile struct {
	target  string
	existed bool      // the target existed when the temporary file was made
	done    time.Time // zero while in use
}

// tempKeep is how long a finished temporary file's name stays known.
const tempKeep = 30 * time.Second

// create makes a new temporary file in dir named prefix and a random
// suffix, for a write that will be renamed to target (existed: whether
// target exists now). Call done with its name when finished.
func (t *tempFiles) create(dir, prefix, target string, existed bool) (*os.File, error) {
	for range 100 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		name := filepath.Join(dir, prefix+hex.EncodeToString(b[:]))
		t.mu.Lock()
		if t.m == nil {
			t.m = map[string]*tempFile{}
		}
		now := time.Now()
		for p, f := range t.m {
			if !f.done.IsZero() && now.Sub(f.done) > tempKeep {
				delete(t.m, p)
			}
		}
		t.m[name] = &tempFile{target: target, existed: existed}
		t.mu.Unlock()
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			return f, nil
		}
		t.mu.Lock()
		delete(t.m, name)
		t.mu.Unlock()
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	return nil, &fs.PathError{Op: "createtemp", Path: filepath.Join(dir, prefix+"*"), Err: fs.ErrExist}
}

// done marks the temporary file name finished (renamed or removed).
func (t *tempFiles) done(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f := t.m[name]; f != nil {
		f.done = time.Now()
	}
}

// lookup says whether path is one of the agent's temporary files.
func (t *tempFiles) lookup(path string) (tempFile, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f := t.m[path]; f != nil {
		return *f, true
	}
	return tempFile{}, false
}
