package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/httpwait"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/internal/template"
	"withruntime.dev/runtime/internal/template/image"
	"withruntime.dev/runtime/sdk/go/wire"
)

// ContentTypeTar is the body of POST /v1/templates that uploads an image as
// a `docker save` tarball.
const ContentTypeTar = wire.ContentTypeTar

// Templates is what the template routes read: implemented by
// *template.Store and, for a server whose templates are images in a
// registry (serve --driver kubernetes), by *registry.Templates. Building
// and deleting need a *template.Store (see local).
type Templates interface {
	// Get returns template name's Info; errors wrap template.ErrNotFound
	// when there is no such template.
	Get(name string) (template.Info, error)
	// List returns the templates, sorted by name.
	List() ([]template.Info, error)
}

// noted is a Templates whose list may be incomplete, with a note saying
// why (registry.Templates: see its ListNote).
type noted interface {
	ListNote(ctx context.Context) ([]template.Info, string, error)
}

// HeaderTemplatesNote is the header of a GET /v1/templates whose list may
// be incomplete (also its body's "note"): why.
const HeaderTemplatesNote = "Withruntime-Templates-Note"

// local returns the server's template directory, which builds and deletes
// change; a server whose templates are in a registry refuses with a 409
// saying how templates get there.
func (s *Server) local() (*template.Store, error) {
	if st, ok := s.cfg.Templates.(*template.Store); ok && st != nil {
		return st, nil
	}
	return nil, errs.New(errs.Conflict, "this server's templates are images in a registry (serve --driver kubernetes) and its API cannot build, change or delete them: "+
		"build the template on a host (`withruntime template build`, or create one through a host's server) and push it with `withruntime template push NAME` (delete it in the registry)")
}

// MaxPrivateTemplates is how many templates a tenant key (one with a daily
// spending limit) may hold; each is private to it.
const MaxPrivateTemplates = 16

func toTemplate(t template.Info) Template {
	out := Template{Name: t.Name, CreatedAt: t.CreatedAt, SizeBytes: t.SizeBytes, Private: t.Owner != "", Start: toTemplateStart(t.Start)}
	if o := t.Origin; o != nil {
		out.Origin = &TemplateOrigin{Image: o.Image, Digest: o.Digest, Env: o.Env, WorkingDir: o.WorkingDir, Shell: o.Shell}
	}
	return out
}

func (s *Server) templateRoutes() {
	s.handle("GET", "/v1/templates", s.listTemplates)
	s.handle("POST", "/v1/templates", s.createTemplate)
	s.handle("GET", "/v1/templates/{name}", s.getTemplate)
	s.handle("DELETE", "/v1/templates/{name}", s.deleteTemplate)
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) error {
	var (
		infos []template.Info
		note  string
		err   error
	)
	if n, ok := s.cfg.Templates.(noted); ok {
		infos, note, err = n.ListNote(r.Context())
	} else {
		infos, err = s.cfg.Templates.List()
	}
	if err != nil {
		return err
	}
	if note != "" {
		w.Header().Set(HeaderTemplatesNote, note)
	}
	out := TemplateList{Templates: make([]Template, 0, len(infos)), Note: note}
	key := keyFrom(r.Context()).ID
	for _, t := range infos {
		if t.UsableBy(key) {
			out.Templates = append(out.Templates, toTemplate(t))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := template.ValidName(name); err != nil {
		return badRequest("%v", err)
	}
	info, err := s.cfg.Templates.Get(name)
	if errors.Is(err, template.ErrNotFound) || (err == nil && !info.UsableBy(keyFrom(r.Context()).ID)) {
		return notFound("no template %q; list them with GET /v1/templates", name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toTemplate(info))
	return nil
}

// templateOwner is the key a new template made by request r is private to:
// a tenant key's are always its own (and it may hold MaxPrivateTemplates),
// another key's when it asks (private); "" makes it shared.
func (s *Server) templateOwner(r *http.Request, st *template.Store, private bool) (string, error) {
	key := keyFrom(r.Context()).ID
	if !tenantOf(r.Context()) {
		if private {
			return key, nil
		}
		return "", nil
	}
	all, err := st.List()
	if err != nil {
		return "", err
	}
	n := 0
	for _, t := range all {
		if t.Owner == key {
			n++
		}
	}
	if n >= MaxPrivateTemplates {
		return "", errs.New(errs.Quota, "templates quota: a key with a daily spending limit may hold %d templates and this one holds %d; delete one (DELETE /v1/templates/NAME) first", MaxPrivateTemplates, n)
	}
	return key, nil
}

// privateQuery reads ?private= of an upload or a Dockerfile build.
func privateQuery(r *http.Request) (bool, error) {
	v := r.URL.Query().Get("private")
	if !r.URL.Query().Has("private") {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("private=%q: write true or false", v)
	}
	return b, nil
}

// deleteTemplate refuses while sandboxes (or the warm pool) use it. A key
// deletes the templates private to it; shared ones, only a key without a
// daily limit; another key's private one is not found.
func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	st, err := s.local()
	if err != nil {
		return err
	}
	if err := template.ValidName(name); err != nil {
		return badRequest("%v", err)
	}
	key := keyFrom(r.Context()).ID
	if info, err := st.Get(name); err == nil && !info.UsableBy(key) {
		return notFound("no template %q; list them with GET /v1/templates", name)
	} else if err == nil && info.Owner == "" && tenantOf(r.Context()) {
		return errs.New(errs.Forbidden, "template %q is the server's, shared by every key; a key with a daily spending limit deletes only its own templates", name)
	}
	err = st.Delete(r.Context(), name, func() error {
		if _, pooled := s.cfg.Manager.PoolStatus()[name]; pooled {
			return errs.New(errs.Conflict, "template %q has a warm pool (serve --pool-templates); restart the server without it first", name)
		}
		var users []string
		// A paused sandbox needs its template to resume.
		for _, state := range []string{store.StateStarting, store.StateRunning, store.StatePaused} {
			sbs, err := s.cfg.Store.ListSandboxes(r.Context(), store.SandboxFilter{State: state})
			if err != nil {
				return err
			}
			for _, sb := range sbs {
				if sb.Template == name {
					users = append(users, sb.ID)
				}
			}
		}
		if len(users) > 0 {
			if len(users) > 5 {
				users = append(users[:5], "…")
			}
			return errs.New(errs.Conflict, "template %q is used by %d running or paused sandbox(es) (%s); delete them first", name, len(users), strings.Join(users, ", "))
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.cfg.Manager.DropWarm(r.Context(), name)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// createTemplate makes a template: from a registry image named in a JSON
// body; from a `docker save` tarball that is the body itself (Content-Type
// application/x-tar, ?name=NAME, optional ?image=LABEL recorded as the
// origin); or from a Dockerfile in a build context that is the body
// (application/x-tar with ?dockerfile=PATH: see buildDockerfile).
// Everything that can be checked before the layers are pulled or the steps
// run is answered with its own status; with Accept: application/x-ndjson
// the rest streams as TemplateEvents.
func (s *Server) createTemplate(w http.ResponseWriter, r *http.Request) error {
	st, err := s.local()
	if err != nil {
		return err
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == ContentTypeTar && r.URL.Query().Has("dockerfile") {
		return s.buildDockerfile(w, r, st)
	}
	var owner string
	var (
		name  string
		src   image.Source
		img   v1.Image
		start *template.Start
	)
	if ct == ContentTypeTar {
		for k := range r.URL.Query() {
			if k != "name" && k != "image" && k != "private" && !slices.Contains(startQuery, k) {
				return badRequest("unknown query parameter %q; an upload takes ?name=NAME and optionally ?image=LABEL, ?private=true, startCommand, readyCommand, readyTimeoutSeconds and startKernel (or ?dockerfile=PATH for a build context)", k)
			}
		}
		private, err := privateQuery(r)
		if err != nil {
			return err
		}
		if start, err = startFromQuery(r.URL.Query()); err != nil {
			return err
		}
		name = r.URL.Query().Get("name")
		label := r.URL.Query().Get("image")
		if label == "" {
			label = "upload"
		}
		if len(label) > 1024 {
			return badRequest("image label is over 1024 bytes")
		}
		if err := st.CheckNew(name); err != nil {
			return err
		}
		if owner, err = s.templateOwner(r, st, private); err != nil {
			return err
		}
		spool, err := s.spool(r, st.Dir)
		if err != nil {
			return err
		}
		defer spool.Close()
		src = image.Source{Kind: image.Archive, Ref: label}
		if img, err = image.OpenArchive(func() (io.ReadCloser, error) {
			return io.NopCloser(io.NewSectionReader(spool, 0, 1<<62)), nil
		}, label); err != nil {
			return err
		}
	} else {
		var req CreateTemplateRequest
		if err := decode(r, &req); err != nil {
			return err
		}
		name = req.Name
		if err := st.CheckNew(name); err != nil {
			return err
		}
		var err error
		if owner, err = s.templateOwner(r, st, req.Private); err != nil {
			return err
		}
		if start, err = startFromWire(req.Start); err != nil {
			return err
		}
		if image.IsLocal(req.FromImage) {
			return badRequest("fromImage %q is a path: the server does not read files on a caller's behalf; upload the image instead (POST /v1/templates?name=NAME with Content-Type application/x-tar and a `docker save` tarball as the body; `withruntime template build NAME --from-image PATH` does this)", req.FromImage)
		}
		if src, err = image.ParseSource(req.FromImage); err != nil {
			return err
		}
		if img, err = src.Open(r.Context(), s.cfg.Images.Fetch); err != nil {
			return err
		}
	}
	return s.runBuild(w, r, name, s.warmBuild(r.Context(), st, name, func(progress func(template.Progress), _ func(string)) (template.Info, error) {
		return image.FromImage(r.Context(), st, name, img, src, s.cfg.Images, progress, template.OwnedBy(owner), template.WithStart(start))
	}))
}

// runBuild runs a template build: plainly (201 with the template, or the
// error's status), or with Accept: application/x-ndjson as a stream of
// TemplateEvents ending with "template" or "error".
func (s *Server) runBuild(w http.ResponseWriter, r *http.Request, name string, build func(progress func(template.Progress), output func(string)) (template.Info, error)) error {
	if !wantsNDJSON(r) {
		info, err := build(nil, nil)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, toTemplate(info))
		return nil
	}
	w.Header().Set("Content-Type", agentapi.ContentTypeNDJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	last := time.Now()
	send := func(ev TemplateEvent) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(ev)
		_ = rc.Flush()
		last = time.Now()
	}
	// A step can be silent for minutes (a download, a RUN that prints
	// nothing): heartbeats tell the client the server is alive.
	stop := httpwait.Heartbeat(agentapi.HeartbeatInterval/2, func() {
		if !mu.TryLock() {
			return
		}
		defer mu.Unlock()
		if time.Since(last) >= agentapi.HeartbeatInterval {
			_, _ = w.Write(agentapi.HeartbeatLine)
			_ = rc.Flush()
			last = time.Now()
		}
	})
	defer stop()
	info, err := build(func(p template.Progress) {
		send(TemplateEvent{Type: "step", Step: p.Step, Done: p.Done, ElapsedSeconds: p.Elapsed.Seconds()})
	}, func(data string) {
		send(TemplateEvent{Type: "output", Data: data})
	})
	if err != nil {
		if isInternal(err) {
			s.cfg.Log.Error("template build failed", "template", name, "err", err)
		}
		_, code := statusOf(err)
		send(TemplateEvent{Type: "error", Error: &agentapi.Error{Code: code, Message: err.Error()}})
		return nil
	}
	t := toTemplate(info)
	send(TemplateEvent{Type: "template", Template: &t})
	return nil
}

func wantsNDJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), agentapi.ContentTypeNDJSON)
}

// spool copies an uploaded tarball into an unnamed file in the template
// store's directory (O_TMPFILE: it vanishes with the last descriptor, even
// if the server dies), at most the import's byte cap.
func (s *Server) spool(r *http.Request, dir string) (*os.File, error) {
	max := s.cfg.Images.Limits.MaxBytes
	if max <= 0 {
		max = image.DefaultMaxBytes
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("spool the upload: %w", err)
	}
	f := os.NewFile(uintptr(fd), "upload")
	_, err = io.Copy(f, http.MaxBytesReader(nil, r.Body, max))
	if err != nil {
		f.Close()
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errs.New(errs.TooLarge, "the uploaded image is over the import's cap of %d bytes; raise serve --image-max-bytes or make the image smaller", max)
		}
		return nil, badRequest("reading the uploaded image: %v", err)
	}
	return f, nil
}
