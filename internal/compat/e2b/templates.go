package e2b

// E2B's template routes (what Template.build, Template.exists and
// Template.get_build_status of the SDKs call), over Runtime's template
// builder. An E2B template is a row of the store's e2b_templates: E2B's
// templateID and alias, per API key, pointing at the Runtime template of its
// last successful build, which is private to that key (template.OwnedBy),
// and by its tags (tags.go) at the builds they name.
// So another key neither sees, nor boots, nor deletes it, through this API
// or Runtime's own. A build (templatebuild.go) turns E2B's steps into a
// Dockerfile and a build context and asks the API for a Dockerfile build
// (POST /v1/templates?dockerfile=...&private=true) as the key; its files
// come through upload links (uploads.go).

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/store"
)

// aliasPattern is what an E2B template's alias may be here: it becomes part
// of Runtime template names ("e2b.ALIAS.RANDOM"), whose '.' it must not hold.
var aliasPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,49}$`)

// defaultTag is E2B's tag of a build named without one ("alias" is
// "alias:default"); each such build moves it (tags.go).
const defaultTag = "default"

// maxTemplatesPerKey caps the E2B templates (names) one key holds, built or
// not (a tenant key's builds are bounded further by the API's
// MaxPrivateTemplates).
const maxTemplatesPerKey = 100

func (s *Server) templateRoutes(h func(string, func(http.ResponseWriter, *http.Request, who))) {
	h("POST /v3/templates", s.requestBuild)
	h("GET /templates/{templateID}/files/{hash}", s.uploadLink)
	h("POST /v2/templates/{templateID}/builds/{buildID}", s.startBuild)
	h("GET /templates/{templateID}/builds/{buildID}/status", s.buildStatus)
	h("GET /templates/{templateID}/builds/{buildID}/logs", s.buildLogs)
	h("GET /templates", s.listTemplates)
	h("GET /v2/templates", s.listTemplates)
	h("GET /templates/{templateID}", s.getTemplate)
	h("GET /templates/aliases/{alias}", s.aliasOf)
	h("POST /templates/tags", s.assignTags)
	h("DELETE /templates/tags", s.removeTags)
	h("GET /templates/{templateID}/tags/{op}", s.tagQuery)
	h("GET /templates/{templateID}/tags/{tag}/assignments", s.tagAssignmentsOf)
	// GET /templates/{templateID}/tags: a pattern of its own would
	// conflict with /templates/aliases/{alias} (neither is more specific).
	h("GET /templates/{templateID}/{sub}", func(w http.ResponseWriter, r *http.Request, as who) {
		if r.PathValue("sub") != "tags" {
			writeError(w, http.StatusNotFound, "no route %s %s in Runtime's E2B-compatible API (README: E2B compatibility)", r.Method, r.URL.Path)
			return
		}
		s.listTags(w, r, as)
	})
	// PUT of an upload link: authorized by the link's token, as a
	// presigned URL is (the SDKs send no API key there).
	s.control.HandleFunc("PUT /templates/{templateID}/files/{hash}", s.upload)
	for _, p := range []string{"POST /templates", "POST /v2/templates", "POST /templates/{templateID}",
		"POST /templates/{templateID}/builds/{buildID}"} {
		h(p, s.unsupported("this older template build API (use Template.build of the e2b SDK 2.x, which Runtime serves)"))
	}
	for _, p := range []string{"PATCH /templates/{templateID}", "PATCH /v2/templates/{templateID}"} {
		h(p, s.unsupported("changing a template (public templates: a template here is its API key's only)"))
	}
}

// templateRequest is the body of POST /v3/templates.
type templateRequest struct {
	Name          string   `json:"name"`
	Alias         string   `json:"alias"`
	Tags          []string `json:"tags"`
	TeamID        string   `json:"teamID"`
	CPUCount      *int64   `json:"cpuCount"`
	MemoryMB      *int64   `json:"memoryMB"`
	MinFreeDiskMB *int64   `json:"minFreeDiskMb"`
}

// templateRequested is the answer of POST /v3/templates.
type templateRequested struct {
	TemplateID string   `json:"templateID"`
	BuildID    string   `json:"buildID"`
	Public     bool     `json:"public"`
	Names      []string `json:"names"`
	Tags       []string `json:"tags"`
	Aliases    []string `json:"aliases"`
}

// parseName splits E2B's "name" or "name:tag" into the alias and the tags
// a build of it gets: the name's tag, else E2B's default tag, then tags.
// It refuses a namespace ("team/name"), which this API does not serve, and
// what is not a tag (":x", "name:").
func parseName(name string, tags []string) (string, []string, error) {
	alias, tag, hasTag := strings.Cut(name, ":")
	if strings.Contains(alias, "/") {
		return "", nil, fmt.Errorf("name %q: namespaced names (TEAM/NAME) are not supported by Runtime; a template belongs to the API key that builds it, so give the name alone", name)
	}
	if !aliasPattern.MatchString(alias) {
		return "", nil, fmt.Errorf("name %q: give 1-50 characters of a-z, 0-9, '_' and '-', starting with a letter or digit", alias)
	}
	if !hasTag {
		tag = defaultTag
	}
	all, err := tagsOf(alias, append([]string{tag}, tags...))
	if err != nil {
		return "", nil, fmt.Errorf("name %q: %w", name, err)
	}
	if len(all) > maxTagsPerTemplate {
		return "", nil, fmt.Errorf("%d tags: Runtime keeps at most %d for one template", len(all), maxTagsPerTemplate)
	}
	return alias, all, nil
}

// requestBuild is POST /v3/templates: the template of the name (made when
// the key has none of it) and a new build waiting for its files and steps.
func (s *Server) requestBuild(w http.ResponseWriter, r *http.Request, as who) {
	var req templateRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	name := req.Name
	if name == "" {
		name = req.Alias
	}
	if name == "" {
		writeError(w, http.StatusBadRequest, "the template has no name: give one (Template.build(template, 'my-template'))")
		return
	}
	alias, tags, err := parseName(name, req.Tags)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if req.TeamID != "" {
		writeError(w, http.StatusBadRequest, "teamID: Runtime has no teams; a template belongs to the API key that builds it (leave teamID out)")
		return
	}
	for _, c := range []struct {
		field string
		v     *int64
		min   int64
	}{{"cpuCount", req.CPUCount, 1}, {"memoryMB", req.MemoryMB, 128}, {"minFreeDiskMb", req.MinFreeDiskMB, 0}} {
		if c.v != nil && *c.v < c.min {
			writeError(w, http.StatusBadRequest, "%s must be at least %d; got %d", c.field, c.min, *c.v)
			return
		}
	}
	if _, err := s.cfg.Store.E2BTemplateOf(r.Context(), as.keyID, alias); errors.Is(err, store.ErrNotFound) {
		all, err := s.cfg.Store.E2BTemplatesOf(r.Context(), as.keyID)
		if err != nil {
			s.writeAPIError(w, r, err)
			return
		}
		if len(all) >= maxTemplatesPerKey {
			writeError(w, http.StatusTooManyRequests, "this API key holds %d templates, the most Runtime keeps for one key; delete one (DELETE /templates/{templateID}) first", len(all))
			return
		}
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	tpl, _, err := s.cfg.Store.E2BTemplateFor(r.Context(), store.E2BTemplate{ID: templateID(), KeyID: as.keyID, Alias: alias, CreatedAt: now})
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	b, err := s.builds.add(as, tpl, req, tags)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, templateRequested{TemplateID: tpl.ID, BuildID: b.id, Names: []string{alias},
		Tags: tags, Aliases: []string{alias}})
}

// templateOf returns the key's E2B template whose id or alias is ref (with
// a tag, "alias:tag", it must have that tag), or an E2B 404 that says
// nothing of other keys' templates.
func (s *Server) templateOf(ctx context.Context, as who, ref string) (store.E2BTemplate, error) {
	name, tag, hasTag := splitRef(ref)
	t, err := s.cfg.Store.E2BTemplateOf(ctx, as.keyID, name)
	if errors.Is(err, store.ErrNotFound) {
		return t, &apiError{Status: http.StatusNotFound, Code: "not_found",
			Message: fmt.Sprintf("no template %q: this API key has built none of that name or id (Template.build makes one)", name)}
	}
	if err == nil && hasTag {
		_, err = s.buildOfTag(ctx, as, t, tag, true)
	}
	return t, err
}

// runtimeTemplate is the Runtime template a create's (or a build's FROM)
// E2B template reference names: the key's own E2B template of that alias or
// id (the build its tag names, "alias" being "alias:default" or, without
// that tag, its last build; an error when it has none yet), else Config.Templates'
// name for it, else the reference itself (one of Runtime's templates). tpl
// is the E2B template when there is one.
func (s *Server) runtimeTemplate(ctx context.Context, as who, ref string) (name string, tpl *store.E2BTemplate, err error) {
	if as.keyID != "" {
		// The template by its name alone: a tag it lacks is a 404 naming
		// the tag, not a Runtime template's name to try.
		name, tag, hasTag := splitRef(ref)
		t, err := s.templateOf(ctx, as, name)
		switch {
		case err == nil && t.Template == "":
			return "", nil, &apiError{Status: http.StatusBadRequest, Code: "bad_request",
				Message: fmt.Sprintf("template %q has no successful build yet (%s); build it with Template.build first", t.Alias, s.builds.lastState(t.ID))}
		case err == nil:
			b, err := s.buildOfTag(ctx, as, t, tag, hasTag)
			if err != nil {
				return "", nil, err
			}
			t.Template, t.BuildID, t.CPUCount, t.MemoryMiB = b.Template, b.BuildID, b.CPUCount, b.MemoryMiB
			return t.Template, &t, nil
		case asAPIError(err).Status != http.StatusNotFound:
			return "", nil, err
		}
	}
	base, _, _ := strings.Cut(ref, ":")
	if n, ok := s.cfg.Templates[base]; ok {
		return n, nil, nil
	}
	return ref, nil, nil
}

// e2bTemplate is E2B's Template (GET /templates, /v2/templates), with
// builds for GET /templates/{templateID}.
type e2bTemplate struct {
	TemplateID    string     `json:"templateID"`
	BuildID       string     `json:"buildID"`
	CPUCount      int64      `json:"cpuCount"`
	MemoryMB      int64      `json:"memoryMB"`
	DiskSizeMB    int64      `json:"diskSizeMB"`
	Public        bool       `json:"public"`
	Aliases       []string   `json:"aliases"`
	Names         []string   `json:"names"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
	CreatedBy     *struct{}  `json:"createdBy"`
	LastSpawnedAt *time.Time `json:"lastSpawnedAt"`
	SpawnCount    int64      `json:"spawnCount"`
	BuildCount    int64      `json:"buildCount"`
	EnvdVersion   string     `json:"envdVersion"`
	BuildStatus   string     `json:"buildStatus"`
	Builds        []e2bBuild `json:"builds,omitempty"`
}

// e2bBuild is E2B's TemplateBuild.
type e2bBuild struct {
	BuildID     string     `json:"buildID"`
	Status      string     `json:"status"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	FinishedAt  *time.Time `json:"finishedAt,omitempty"`
	CPUCount    int64      `json:"cpuCount"`
	MemoryMB    int64      `json:"memoryMB"`
	DiskSizeMB  int64      `json:"diskSizeMB,omitempty"`
	EnvdVersion string     `json:"envdVersion,omitempty"`
}

// describe is t in E2B's terms; sizes is the key's Runtime templates by
// name (their size is diskSizeMB).
func (s *Server) describe(t store.E2BTemplate, sizes map[string]int64) e2bTemplate {
	out := e2bTemplate{TemplateID: t.ID, BuildID: t.BuildID, CPUCount: t.CPUCount, MemoryMB: t.MemoryMiB,
		DiskSizeMB: (sizes[t.Template] + 1<<20 - 1) >> 20, Aliases: []string{t.Alias}, Names: []string{t.Alias},
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, BuildCount: t.Builds, EnvdVersion: EnvdVersion, BuildStatus: "ready"}
	if t.Template == "" {
		out.BuildStatus = s.builds.lastStatus(t.ID)
	}
	return out
}

// runtimeSizes returns the sizes of the Runtime templates the key sees.
func (s *Server) runtimeSizes(ctx context.Context, as who) map[string]int64 {
	var list api.TemplateList
	sizes := map[string]int64{}
	if err := s.api.json(ctx, as, "GET", "/v1/templates", nil, &list); err == nil {
		for _, t := range list.Templates {
			sizes[t.Name] = t.SizeBytes
		}
	}
	return sizes
}

// listTemplates is GET /templates and /v2/templates: the key's E2B
// templates (Runtime's shared ones, such as base, are usable by name but
// not listed). v2's limit and nextToken page it.
func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request, as who) {
	q := r.URL.Query()
	for k := range q {
		if k != "teamID" && k != "limit" && k != "nextToken" {
			writeError(w, http.StatusBadRequest, "unknown query parameter %q; this list takes limit and nextToken", k)
			return
		}
	}
	limit, err := queryLimit(q)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	rows, err := s.cfg.Store.E2BTemplatesOf(r.Context(), as.keyID)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	if tok := q.Get("nextToken"); tok != "" {
		i := 0
		for i < len(rows) && rows[i].ID != tok {
			i++
		}
		if i == len(rows) {
			writeError(w, http.StatusBadRequest, "nextToken %q names no template of this list (it may have been deleted); list again from the start", tok)
			return
		}
		rows = rows[i+1:]
	}
	if len(rows) > limit {
		rows = rows[:limit]
		w.Header().Set("X-Next-Token", rows[limit-1].ID)
	}
	sizes := s.runtimeSizes(r.Context(), as)
	out := make([]e2bTemplate, 0, len(rows))
	for _, t := range rows {
		out = append(out, s.describe(t, sizes))
	}
	writeJSON(w, http.StatusOK, out)
}

// getTemplate is GET /templates/{templateID}: the template with its builds
// (those this server still remembers, and the last successful one).
func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request, as who) {
	t, err := s.templateOf(r.Context(), as, r.PathValue("templateID"))
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	out := s.describe(t, s.runtimeSizes(r.Context(), as))
	out.Builds = s.builds.history(t)
	if out.Builds == nil {
		out.Builds = []e2bBuild{}
	}
	writeJSON(w, http.StatusOK, out)
}

// aliasOf is GET /templates/aliases/{alias} (Template.exists): 200 for the
// key's own template of that alias, and for a Runtime template the key may
// use (public unless it is the key's private one) under that name or the
// name E2B gives it
// (Config.Templates: "base", "code-interpreter-v1"), as E2B answers for its
// public templates; 404 otherwise (E2B's 403 for another team's alias
// would say it exists; here another key's is not found).
func (s *Server) aliasOf(w http.ResponseWriter, r *http.Request, as who) {
	alias, _, hasTag := splitRef(r.PathValue("alias"))
	if _, _, err := parseName(r.PathValue("alias"), nil); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	t, err := s.cfg.Store.E2BTemplateOf(r.Context(), as.keyID, alias)
	if err == nil && t.Alias == alias && hasTag {
		// "alias:tag": the template must have the tag.
		_, err = s.templateOf(r.Context(), as, r.PathValue("alias"))
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && t.Alias != alias) {
		name := alias
		if n, ok := s.cfg.Templates[alias]; ok {
			name = n
		}
		var info struct {
			Private bool `json:"private"`
		}
		if err := s.api.json(r.Context(), as, "GET", "/v1/templates/"+url.PathEscape(name), nil, &info); err == nil {
			writeJSON(w, http.StatusOK, map[string]any{"templateID": alias, "public": !info.Private})
			return
		}
		writeError(w, http.StatusNotFound, "no template %q: this API key has built none of that name", alias)
		return
	}
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"templateID": t.ID, "public": false})
}

// deleteE2BTemplate deletes the key's E2B template t: its Runtime templates
// first (409 while sandboxes run from the last build), then its row. A
// build in progress is refused (409).
func (s *Server) deleteE2BTemplate(ctx context.Context, as who, t store.E2BTemplate) error {
	s.tagsMu.Lock()
	defer s.tagsMu.Unlock()
	if id := s.builds.running(t.ID); id != "" {
		return &apiError{Status: http.StatusConflict, Code: "conflict",
			Message: fmt.Sprintf("template %q has a build in progress (%s); wait for it to end, then delete the template", t.Alias, id)}
	}
	if t.Template != "" {
		err := s.api.json(ctx, as, "DELETE", "/v1/templates/"+url.PathEscape(t.Template), nil, nil)
		if err != nil && asAPIError(err).Status != http.StatusNotFound {
			return err
		}
	}
	// Its tags go with it (the store deletes them with the row), then
	// every build of it no sandbox uses.
	err := s.cfg.Store.DeleteE2BTemplate(ctx, as.keyID, t.ID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	s.dropBuilds(ctx, as, t.Alias, nil)
	return nil
}

// dropOldBuilds deletes the key's Runtime templates of E2B template t's
// earlier builds ("e2b.ALIAS.*") that neither are its last build
// (t.Template) nor have a tag, and that no sandbox uses any more; those
// still in use are left for the next build, tag removal or delete.
//
// The caller holds s.tagsMu, so that no tag is assigned to a build between
// the look at the tags and the delete. While another build of t runs, none
// is dropped: its Runtime template exists before the store names it, and
// that build's own finish drops what is old.
func (s *Server) dropOldBuilds(ctx context.Context, as who, t store.E2BTemplate) {
	if s.builds.runningBut(t.ID, t.BuildID) {
		return
	}
	keep, err := s.keptBuilds(ctx, as, t)
	if err != nil {
		return // keep everything rather than guess
	}
	s.dropBuilds(ctx, as, t.Alias, keep)
}

// dropBuilds deletes the key's Runtime templates of alias's builds but
// those in keep (the deletes of those in use fail and are left).
func (s *Server) dropBuilds(ctx context.Context, as who, alias string, keep map[string]bool) {
	var list api.TemplateList
	if err := s.api.json(ctx, as, "GET", "/v1/templates", nil, &list); err != nil {
		return
	}
	prefix := runtimePrefix(alias)
	for _, rt := range list.Templates {
		if rt.Private && strings.HasPrefix(rt.Name, prefix) && !keep[rt.Name] {
			_ = s.api.json(ctx, as, "DELETE", "/v1/templates/"+url.PathEscape(rt.Name), nil, nil)
		}
	}
}

// runtimePrefix starts the names of alias's Runtime templates.
func runtimePrefix(alias string) string { return "e2b." + alias + "." }

// templateID makes an E2B templateID: 20 characters of a-z and 0-9, as
// E2B's.
func templateID() string {
	const digits = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = digits[int(b[i])%len(digits)]
	}
	return string(b)
}

// unsupported answers 501 naming what Runtime's E2B-compatible API does not
// serve.
func (s *Server) unsupported(what string) func(http.ResponseWriter, *http.Request, who) {
	return func(w http.ResponseWriter, r *http.Request, _ who) {
		writeError(w, http.StatusNotImplemented, "%s is not supported by Runtime's E2B-compatible API", what)
	}
}
