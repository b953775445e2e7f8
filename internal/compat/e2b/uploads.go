package e2b

// The files of E2B templates' COPY steps. The SDKs ask for an upload link
// per step by the hash of its files (GET /templates/{templateID}/files/{hash})
// and PUT a tar (gzipped by default) there with no API key, as to a
// presigned URL: the link carries a random token, valid for an hour, bound
// to the key, the template and the hash. An upload is kept on disk (an
// unnamed file in Config.SpoolDir) for an hour, so a rebuild with the same
// files skips it ("present"), and a key holds at most maxKeyUploadBytes.

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds of uploads.
const (
	// maxUploadBytes caps one upload (as sent: gzipped or not).
	maxUploadBytes = 1 << 30
	// maxKeyUploadBytes caps what one key's uploads hold on disk at once.
	maxKeyUploadBytes = 4 << 30
	// maxContextBytes caps a build context: the Dockerfile and every COPY
	// step's files, unpacked.
	maxContextBytes = 8 << 30
	// maxContextEntries caps the files of a build context.
	maxContextEntries = 1 << 20
	// uploadTTL is how long a link and an upload last.
	uploadTTL = time.Hour
	// maxLinksPerKey caps the upload links one key holds unused.
	maxLinksPerKey = 1000
)

// upload is one uploaded tar, or a link waiting for it (file nil).
type upload struct {
	keyID, templateID, hash string
	file                    *os.File
	size                    int64
	at                      time.Time // the link's making, then the upload's end
	uses                    int       // builds reading it
	gone                    bool      // replaced or expired: closed once unused
}

// uploadSet holds the links and the uploads.
type uploadSet struct {
	mu      sync.Mutex
	links   map[string]*upload // by the SHA-256 of the link's token
	uploads map[string]*upload // by templateID + "/" + hash
}

func newUploadSet() *uploadSet {
	return &uploadSet{links: map[string]*upload{}, uploads: map[string]*upload{}}
}

// gcLocked forgets expired links and closes expired unused uploads.
func (us *uploadSet) gcLocked() {
	now := time.Now()
	for k, l := range us.links {
		if now.Sub(l.at) > uploadTTL {
			delete(us.links, k)
		}
	}
	for k, u := range us.uploads {
		if now.Sub(u.at) > uploadTTL {
			delete(us.uploads, k)
			us.dropLocked(u)
		}
	}
}

// dropLocked closes u once no build reads it.
func (us *uploadSet) dropLocked(u *upload) {
	u.gone = true
	if u.uses == 0 && u.file != nil {
		u.file.Close()
		u.file = nil
	}
}

// uploadLink is GET /templates/{templateID}/files/{hash}: present when the
// key uploaded these files for the template within the hour, else a link
// to PUT them to (201).
func (s *Server) uploadLink(w http.ResponseWriter, r *http.Request, as who) {
	t, err := s.templateOf(r.Context(), as, r.PathValue("templateID"))
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	hash := r.PathValue("hash")
	if !hashPattern.MatchString(hash) {
		writeError(w, http.StatusBadRequest, "hash %q is not a SHA-256 in lower-case hex", hash)
		return
	}
	us := s.uploads
	us.mu.Lock()
	defer us.mu.Unlock()
	us.gcLocked()
	if u := us.uploads[t.ID+"/"+hash]; u != nil && u.keyID == as.keyID {
		writeJSON(w, http.StatusCreated, map[string]any{"present": true})
		return
	}
	links := 0
	for _, l := range us.links {
		if l.keyID == as.keyID {
			links++
		}
	}
	if links >= maxLinksPerKey {
		writeError(w, http.StatusTooManyRequests, "this API key holds %d unused upload links, the most Runtime keeps; use them or wait for them to expire (%s)", links, uploadTTL)
		return
	}
	token := randomToken()
	us.links[hashToken(token)] = &upload{keyID: as.keyID, templateID: t.ID, hash: hash, at: time.Now()}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	link := url.URL{Scheme: scheme, Host: r.Host, Path: "/templates/" + t.ID + "/files/" + hash, RawQuery: url.Values{"token": {token}}.Encode()}
	writeJSON(w, http.StatusCreated, map[string]any{"present": false, "url": link.String()})
}

// upload is PUT /templates/{templateID}/files/{hash}?token=...: the files,
// kept for the template's builds.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	us := s.uploads
	us.mu.Lock()
	us.gcLocked()
	l := us.links[hashToken(r.URL.Query().Get("token"))]
	if l == nil || l.templateID != r.PathValue("templateID") || l.hash != r.PathValue("hash") {
		us.mu.Unlock()
		writeError(w, http.StatusForbidden, "this upload link is not valid: it expired (links last %s), was used, or names other files; ask for a new one (GET /templates/{templateID}/files/{hash})", uploadTTL)
		return
	}
	delete(us.links, hashToken(r.URL.Query().Get("token")))
	held := int64(0)
	for _, u := range us.uploads {
		if u.keyID == l.keyID {
			held += u.size
		}
	}
	us.mu.Unlock()
	if r.ContentLength > maxUploadBytes {
		writeError(w, http.StatusRequestEntityTooLarge, "the upload is %d bytes; a template step's files may be at most %d bytes (leave large files out of the context with .dockerignore, or download them in a run_cmd step)", r.ContentLength, maxUploadBytes)
		return
	}
	f, err := spoolFile(s.cfg.SpoolDir)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	limit := min(int64(maxUploadBytes), maxKeyUploadBytes-held)
	n, err := io.Copy(f, io.LimitReader(r.Body, limit+1))
	if err == nil && n > limit {
		f.Close()
		if limit < maxUploadBytes {
			writeError(w, http.StatusRequestEntityTooLarge, "this API key's uploads hold %d bytes, and may hold %d for an hour after each; wait for them to expire or make the files smaller", held, int64(maxKeyUploadBytes))
		} else {
			writeError(w, http.StatusRequestEntityTooLarge, "the upload is over %d bytes, the most a template step's files may be (leave large files out of the context with .dockerignore, or download them in a run_cmd step)", maxUploadBytes)
		}
		return
	}
	if err != nil {
		f.Close()
		writeError(w, http.StatusBadRequest, "reading the upload: %v", err)
		return
	}
	u := &upload{keyID: l.keyID, templateID: l.templateID, hash: l.hash, file: f, size: n, at: time.Now()}
	us.mu.Lock()
	if old := us.uploads[u.templateID+"/"+u.hash]; old != nil {
		us.dropLocked(old)
	}
	us.uploads[u.templateID+"/"+u.hash] = u
	us.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// take returns the uploads of template templateID's hashes for a build,
// held until release; an E2B 400 names the first one missing.
func (us *uploadSet) take(keyID, templateID string, hashes []string) ([]*upload, error) {
	us.mu.Lock()
	defer us.mu.Unlock()
	us.gcLocked()
	out := make([]*upload, 0, len(hashes))
	for _, h := range hashes {
		u := us.uploads[templateID+"/"+h]
		if u == nil || u.keyID != keyID {
			return nil, &apiError{Status: http.StatusBadRequest, Code: "bad_request",
				Message: fmt.Sprintf("the files of a COPY step (filesHash %s) were not uploaded, or their upload expired (uploads last %s): ask for the upload link (GET /templates/%s/files/%s), PUT them there, then start the build", h, uploadTTL, templateID, h)}
		}
		out = append(out, u)
	}
	for _, u := range out {
		u.uses++
	}
	return out, nil
}

// release ends a build's hold on its uploads.
func (us *uploadSet) release(files []*upload) {
	us.mu.Lock()
	defer us.mu.Unlock()
	for _, u := range files {
		u.uses--
		if u.gone {
			us.dropLocked(u)
		}
	}
}

// closeAll closes every upload (the server is closing).
func (us *uploadSet) closeAll() {
	us.mu.Lock()
	defer us.mu.Unlock()
	for k, u := range us.uploads {
		delete(us.uploads, k)
		us.dropLocked(u)
	}
}

// buildContext writes the build context of tr: its Dockerfile, and each
// upload's files under contextFiles + hash. The uploads come from the
// client: only files, directories and symbolic links with names inside the
// context pass, and what they unpack to is capped. Errors name the COPY
// step whose files are refused (a *stepError).
func buildContext(dir string, tr translated, files []*upload) (*os.File, error) {
	out, err := spoolFile(dir)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			out.Close()
		}
	}()
	bw := bufio.NewWriterSize(out, 1<<20)
	tw := tar.NewWriter(bw)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(tr.dockerfile))}); err != nil {
		return nil, err
	}
	if _, err := io.WriteString(tw, tr.dockerfile); err != nil {
		return nil, err
	}
	var total, entries int64
	for _, u := range files {
		if err := copyUpload(tw, u, &total, &entries); err != nil {
			return nil, &stepError{step: tr.hashStep[u.hash], what: "COPY", msg: err.Error()}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	ok = true
	return out, nil
}

// copyUpload adds upload u's entries to tw under contextFiles + u.hash.
func copyUpload(tw *tar.Writer, u *upload, total, entries *int64) error {
	var r io.Reader = io.NewSectionReader(u.file, 0, u.size)
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("the uploaded files are not a valid gzip: %v", err)
		}
		r = zr
	} else {
		r = br
	}
	tr := tar.NewReader(r)
	prefix := contextFiles + u.hash + "/"
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("the uploaded files are not a valid tar: %v", err)
		}
		if *entries++; *entries > maxContextEntries {
			return fmt.Errorf("the build's files are over %d entries", maxContextEntries)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("the uploaded files hold %q, outside the template's file context", h.Name)
		}
		out := &tar.Header{Name: prefix + name, Mode: h.Mode & 0o7777, ModTime: h.ModTime, Typeflag: h.Typeflag, Format: tar.FormatPAX}
		switch h.Typeflag {
		case tar.TypeReg:
			if *total += h.Size; *total > maxContextBytes {
				return fmt.Errorf("the build's files unpack to over %d bytes", int64(maxContextBytes))
			}
			out.Size = h.Size
		case tar.TypeDir:
			if name == "." {
				continue
			}
			out.Name += "/"
		case tar.TypeSymlink:
			out.Linkname = h.Linkname
		case tar.TypeLink:
			return fmt.Errorf("the uploaded files hold the hard link %q; Runtime copies files, directories and symbolic links", h.Name)
		default:
			continue // devices, FIFOs: not copied
		}
		if err := tw.WriteHeader(out); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := io.CopyN(tw, tr, h.Size); err != nil {
				return fmt.Errorf("reading the uploaded files: %v", err)
			}
		}
	}
}

// spoolFile is an unnamed file in dir (O_TMPFILE): it vanishes when
// closed, even if the server dies.
func spoolFile(dir string) (*os.File, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("a file to hold template files in %s: %w", dir, err)
	}
	return os.NewFile(uintptr(fd), "e2b-upload"), nil
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
