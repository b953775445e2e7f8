package e2b

// Tags of E2B templates (Template.assign_tags, remove_tags, get_tags, and
// builds named "alias:tag"). A tag names one build of a template: its
// Runtime template, which is kept while a tag names it or it is the
// template's last build, so "alias:production" can stay on an old build
// while "alias" (E2B's "alias:default") moves with each build. Tags live in
// the store's e2b_template_tags, per API key like the templates.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/store"
)

// tagPattern is what a tag may be: E2B's tags are version labels
// ("v1.0.0", "production").
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// maxTagsPerTemplate caps the tags of one E2B template.
const maxTagsPerTemplate = 64

// checkTag refuses a tag that is not a tag: "" (E2B's "alias:"), one with
// ':' or '/', or one over 128 characters.
func checkTag(tag string) error {
	if !tagPattern.MatchString(tag) {
		return fmt.Errorf("tag %q: give 1-128 characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit", tag)
	}
	return nil
}

// tagsOf reads a request's tags: each "TAG" or "ALIAS:TAG" of alias
// (E2B's SDKs accept both), deduplicated in order.
func tagsOf(alias string, tags []string) ([]string, error) {
	out := []string{}
	for _, t := range tags {
		if a, tag, ok := strings.Cut(t, ":"); ok {
			if a != alias {
				return nil, fmt.Errorf("tag %q: give the tag alone, or %q", t, alias+":"+tag)
			}
			t = tag
		}
		if err := checkTag(t); err != nil {
			return nil, err
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// splitRef splits a template reference "NAME" or "NAME:TAG"; hasTag says
// whether it named a tag (NAME alone means E2B's default tag).
func splitRef(ref string) (name, tag string, hasTag bool) {
	name, tag, hasTag = strings.Cut(ref, ":")
	if !hasTag {
		tag = defaultTag
	}
	return name, tag, hasTag
}

// buildOfTag is the build of template t that ref's tag names: the tag's
// row; for a reference without a tag, when t has no default tag, its last
// build. An E2B 404 when the tag is missing.
func (s *Server) buildOfTag(ctx context.Context, as who, t store.E2BTemplate, tag string, hasTag bool) (store.E2BTemplateTag, error) {
	b, err := s.cfg.Store.E2BTemplateTagOf(ctx, as.keyID, t.ID, tag)
	switch {
	case err == nil:
		return b, nil
	case !errors.Is(err, store.ErrNotFound):
		return b, err
	case !hasTag && t.Template != "":
		return store.E2BTemplateTag{TemplateID: t.ID, KeyID: t.KeyID, Tag: tag, BuildID: t.BuildID, Template: t.Template,
			CPUCount: t.CPUCount, MemoryMiB: t.MemoryMiB, CreatedAt: t.UpdatedAt}, nil
	}
	return b, &apiError{Status: http.StatusNotFound, Code: "not_found",
		Message: fmt.Sprintf("template %q has no tag %q (Template.get_tags lists its tags)", t.Alias, tag)}
}

// assignRequest is the body of POST /templates/tags.
type assignRequest struct {
	Target string   `json:"target"`
	Tags   []string `json:"tags"`
}

// assignedTags is its answer, E2B's AssignedTemplateTags.
type assignedTags struct {
	Tags    []string `json:"tags"`
	BuildID string   `json:"buildID"`
}

// assignTags is POST /templates/tags (Template.assign_tags): the tags
// name the build that target ("alias:tag", or "alias" for its default
// tag) names; a tag that named another build moves (201).
func (s *Server) assignTags(w http.ResponseWriter, r *http.Request, as who) {
	var req assignRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	name, tag, hasTag := splitRef(req.Target)
	if hasTag {
		if err := checkTag(tag); err != nil {
			writeError(w, http.StatusBadRequest, "target %q: %v", req.Target, err)
			return
		}
	}
	tags, err := tagsOf(name, req.Tags)
	if err == nil && len(tags) == 0 {
		err = errors.New("tags is empty: give the tags to assign")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	s.tagsMu.Lock()
	defer s.tagsMu.Unlock()
	t, err := s.templateOf(r.Context(), as, name)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	b, err := s.buildOfTag(r.Context(), as, t, tag, hasTag)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	have, err := s.cfg.Store.E2BTemplateTagsOf(r.Context(), as.keyID, t.ID)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	n := len(have)
	for _, tg := range tags {
		if !slices.ContainsFunc(have, func(h store.E2BTemplateTag) bool { return h.Tag == tg }) {
			n++
		}
	}
	if n > maxTagsPerTemplate {
		writeError(w, http.StatusBadRequest, "template %q would have %d tags; Runtime keeps at most %d for one template (Template.remove_tags removes some)", t.Alias, n, maxTagsPerTemplate)
		return
	}
	b.CreatedAt = time.Now().UTC().Truncate(time.Millisecond)
	if err := s.cfg.Store.SetE2BTemplateTags(r.Context(), b, tags); err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	// A tag that moved may have been the last to name its build.
	s.dropOldBuilds(r.Context(), as, t)
	writeJSON(w, http.StatusCreated, assignedTags{Tags: tags, BuildID: b.BuildID})
}

// removeRequest is the body of DELETE /templates/tags.
type removeRequest struct {
	Name string   `json:"name"`
	Tags []string `json:"tags"`
}

// removeTags is DELETE /templates/tags (Template.remove_tags): the tags
// of template name are removed (204), or none when one is missing (404);
// a build no tag names any more, other than the template's last, is
// deleted.
func (s *Server) removeTags(w http.ResponseWriter, r *http.Request, as who) {
	var req removeRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if strings.Contains(req.Name, ":") {
		writeError(w, http.StatusBadRequest, "name %q: give the template's name without a tag; the tags go in tags", req.Name)
		return
	}
	tags, err := tagsOf(req.Name, req.Tags)
	if err == nil && len(tags) == 0 {
		err = errors.New("tags is empty: give the tags to remove")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	s.tagsMu.Lock()
	defer s.tagsMu.Unlock()
	t, err := s.templateOf(r.Context(), as, req.Name)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	have, err := s.cfg.Store.E2BTemplateTagsOf(r.Context(), as.keyID, t.ID)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	for _, tg := range tags {
		if !slices.ContainsFunc(have, func(h store.E2BTemplateTag) bool { return h.Tag == tg }) {
			writeError(w, http.StatusNotFound, "template %q has no tag %q; nothing was removed", t.Alias, tg)
			return
		}
	}
	if _, err := s.cfg.Store.DeleteE2BTemplateTags(r.Context(), as.keyID, t.ID, tags); err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	s.dropOldBuilds(r.Context(), as, t)
	w.WriteHeader(http.StatusNoContent)
}

// templateTag is E2B's TemplateTag.
type templateTag struct {
	Tag       string    `json:"tag"`
	BuildID   string    `json:"buildID"`
	CreatedAt time.Time `json:"createdAt"`
}

// listTags is GET /templates/{templateID}/tags (Template.get_tags): the
// template's tags, oldest assignment first.
func (s *Server) listTags(w http.ResponseWriter, r *http.Request, as who) {
	ref := r.PathValue("templateID")
	if strings.Contains(ref, ":") {
		writeError(w, http.StatusBadRequest, "template %q: give the template's id or name without a tag", ref)
		return
	}
	t, err := s.templateOf(r.Context(), as, ref)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	have, err := s.cfg.Store.E2BTemplateTagsOf(r.Context(), as.keyID, t.ID)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	out := make([]templateTag, 0, len(have))
	for _, h := range have {
		out = append(out, templateTag{Tag: h.Tag, BuildID: h.BuildID, CreatedAt: h.CreatedAt})
	}
	writeJSON(w, http.StatusOK, out)
}

// keptBuilds is the Runtime templates of t to keep: its last build's and
// every one a tag names.
func (s *Server) keptBuilds(ctx context.Context, as who, t store.E2BTemplate) (map[string]bool, error) {
	keep := map[string]bool{}
	if t.Template != "" {
		keep[t.Template] = true
	}
	tags, err := s.cfg.Store.E2BTemplateTagsOf(ctx, as.keyID, t.ID)
	if err != nil {
		return nil, err
	}
	for _, tg := range tags {
		keep[tg.Template] = true
	}
	return keep, nil
}
