package e2b

// E2B's read-only tag routes beside GET /templates/{templateID}/tags (the
// generated API clients of E2B's SDKs carry them: the Python SDK's
// api.client.api.tags): how many tags a template has (tags/count), whether
// one exists (tags/exists), the tags with their assignments, searched,
// sorted and paged (tags/groups), and one tag's assignments
// (tags/{tag}/assignments).
//
// E2B keeps every assignment of a tag as an event; Runtime keeps a tag's
// current build only (e2b_template_tags, one row per tag), so a tag has
// one assignment here: its current one, at the time it was last assigned,
// and hasMore is false. A build's createdAt and finishedAt are when its
// Runtime template was built (the tag's assignment time when that template
// cannot be read).

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/store"
)

// tagSearchPattern is what E2B's tags/groups search may be: a
// case-insensitive substring of a tag's name, at most 64 characters.
var tagSearchPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{0,64}$`)

// tagGroupSorts are the orders tags/groups takes (E2B's), latest_desc by
// default: by the tag's latest assignment, or by name.
var tagGroupSorts = []string{"latest_desc", "latest_asc", "name_asc", "name_desc"}

// tagsCount is E2B's TemplateTagsCountResponse.
type tagsCount struct {
	Total int64 `json:"total"`
}

// tagExists is E2B's TemplateTagExistsResponse.
type tagExists struct {
	Exists        bool   `json:"exists"`
	NormalizedTag string `json:"normalizedTag"`
}

// tagAssignment is E2B's TemplateTagAssignment: one assignment of a tag to
// a build. AssignmentID is derived from the template, tag, build and time
// (stable while the tag stays where it is).
type tagAssignment struct {
	AssignmentID    string     `json:"assignmentId"`
	BuildID         string     `json:"buildId"`
	AssignedAt      time.Time  `json:"assignedAt"`
	BuildCreatedAt  time.Time  `json:"buildCreatedAt"`
	BuildFinishedAt *time.Time `json:"buildFinishedAt"`
}

// tagGroup is E2B's TemplateTagGroup.
type tagGroup struct {
	Tag         string          `json:"tag"`
	Assignments []tagAssignment `json:"assignments"`
	HasMore     bool            `json:"hasMore"`
}

// tagGroups is E2B's TemplateTagGroupsResponse.
type tagGroups struct {
	Tags       []tagGroup `json:"tags"`
	NextCursor *string    `json:"nextCursor"`
}

// tagAssignments is E2B's TemplateTagAssignmentsResponse.
type tagAssignments struct {
	Data       []tagAssignment `json:"data"`
	NextCursor *string         `json:"nextCursor"`
}

// tagQuery routes GET /templates/{templateID}/tags/{op}: count, exists
// and groups.
func (s *Server) tagQuery(w http.ResponseWriter, r *http.Request, as who) {
	switch op := r.PathValue("op"); op {
	case "count":
		s.countTags(w, r, as)
	case "exists":
		s.tagExists(w, r, as)
	case "groups":
		s.tagGroups(w, r, as)
	default:
		writeError(w, http.StatusNotFound, "no route %s %s in Runtime's E2B-compatible API: the tag routes are tags, tags/count, tags/exists, tags/groups and tags/{tag}/assignments", r.Method, r.URL.Path)
	}
}

// checkQuery refuses a query parameter not in allowed, naming them.
func checkQuery(q url.Values, allowed ...string) error {
	for k := range q {
		if !slices.Contains(allowed, k) {
			if len(allowed) == 0 {
				return fmt.Errorf("unknown query parameter %q; this route takes none", k)
			}
			return fmt.Errorf("unknown query parameter %q; this route takes %s", k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// intParam reads query parameter name as an integer in [lo, hi]; def when
// it is absent.
func intParam(q url.Values, name string, lo, hi, def int) (int, error) {
	v, ok := q[name]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s %q: give a whole number from %d to %d", name, v[0], lo, hi)
	}
	return n, nil
}

// tagTemplate is the E2B template of the request's {templateID} (its id or
// name, without a tag) and its tags, or a 4xx written.
func (s *Server) tagTemplate(w http.ResponseWriter, r *http.Request, as who) (store.E2BTemplate, []store.E2BTemplateTag, bool) {
	ref := r.PathValue("templateID")
	if strings.Contains(ref, ":") {
		writeError(w, http.StatusBadRequest, "template %q: give the template's id or name without a tag", ref)
		return store.E2BTemplate{}, nil, false
	}
	t, err := s.templateOf(r.Context(), as, ref)
	if err != nil {
		s.writeAPIError(w, r, err)
		return t, nil, false
	}
	have, err := s.cfg.Store.E2BTemplateTagsOf(r.Context(), as.keyID, t.ID)
	if err != nil {
		s.writeAPIError(w, r, err)
		return t, nil, false
	}
	return t, have, true
}

// countTags is GET /templates/{templateID}/tags/count: how many tags the
// template has ("default" among them once it is built).
func (s *Server) countTags(w http.ResponseWriter, r *http.Request, as who) {
	if err := checkQuery(r.URL.Query()); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	_, have, ok := s.tagTemplate(w, r, as)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, tagsCount{Total: int64(len(have))})
}

// tagExists is GET /templates/{templateID}/tags/exists?tag=TAG: whether
// the template has tag TAG (surrounding spaces trimmed: normalizedTag).
func (s *Server) tagExists(w http.ResponseWriter, r *http.Request, as who) {
	q := r.URL.Query()
	if err := checkQuery(q, "tag"); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if _, ok := q["tag"]; !ok {
		writeError(w, http.StatusBadRequest, "tag is missing: give the tag to look for (?tag=v1)")
		return
	}
	tag := strings.TrimSpace(q.Get("tag"))
	if err := checkTag(tag); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	_, have, ok := s.tagTemplate(w, r, as)
	if !ok {
		return
	}
	found := slices.ContainsFunc(have, func(h store.E2BTemplateTag) bool { return h.Tag == tag })
	writeJSON(w, http.StatusOK, tagExists{Exists: found, NormalizedTag: tag})
}

// assignmentOf is tag h's assignment; built maps a Runtime template to
// when it was built.
func assignmentOf(h store.E2BTemplateTag, built map[string]time.Time) tagAssignment {
	sum := sha256.Sum256([]byte(h.TemplateID + "\x00" + h.Tag + "\x00" + h.BuildID + "\x00" + strconv.FormatInt(h.CreatedAt.UnixMilli(), 10)))
	sum[6] = sum[6]&0x0f | 0x80 // version 8: a UUID of our own derivation
	sum[8] = sum[8]&0x3f | 0x80 // RFC 9562 variant
	at, ok := built[h.Template]
	if !ok {
		at = h.CreatedAt
	}
	return tagAssignment{
		AssignmentID:    fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16]),
		BuildID:         h.BuildID,
		AssignedAt:      h.CreatedAt,
		BuildCreatedAt:  at,
		BuildFinishedAt: &at,
	}
}

// builtAt maps the Runtime templates the key sees to when each was built
// (empty when they cannot be listed).
func (s *Server) builtAt(r *http.Request, as who) map[string]time.Time {
	var list api.TemplateList
	out := map[string]time.Time{}
	if err := s.api.json(r.Context(), as, "GET", "/v1/templates", nil, &list); err == nil {
		for _, t := range list.Templates {
			if !t.CreatedAt.IsZero() {
				out[t.Name] = t.CreatedAt.UTC()
			}
		}
	}
	return out
}

// tagGroupsCursor is the tagsCursor of the page after tag h in order
// sort: "SORT|ASSIGNED_AT|TAG" (RFC 3339, nanoseconds), E2B's form.
func tagGroupsCursor(sort string, h store.E2BTemplateTag) string {
	return sort + "|" + h.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + h.Tag
}

// tagGroups is GET /templates/{templateID}/tags/groups: the template's
// tags, each with its assignment, whose name holds search (any case), in
// order sort, tagsLimit a page (1-100, 25), the next page from
// tagsCursor. assignmentLimit (1-25, 6) is checked; a tag has one
// assignment here.
func (s *Server) tagGroups(w http.ResponseWriter, r *http.Request, as who) {
	q := r.URL.Query()
	if err := checkQuery(q, "assignmentLimit", "tagsLimit", "tagsCursor", "search", "sort"); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if _, err := intParam(q, "assignmentLimit", 1, 25, 6); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	limit, err := intParam(q, "tagsLimit", 1, 100, 25)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	sort := "latest_desc"
	if v, ok := q["sort"]; ok {
		sort = v[0]
		if !slices.Contains(tagGroupSorts, sort) {
			writeError(w, http.StatusBadRequest, "sort %q: give one of %s", sort, strings.Join(tagGroupSorts, ", "))
			return
		}
	}
	search := q.Get("search")
	if !tagSearchPattern.MatchString(search) {
		writeError(w, http.StatusBadRequest, "search %q: give at most 64 characters of a-z, 0-9, '.', '_' and '-'", search)
		return
	}
	// less orders two tags in sort, the tag's name breaking ties.
	less := func(a, b store.E2BTemplateTag) bool {
		switch sort {
		case "latest_asc":
			return a.CreatedAt.Before(b.CreatedAt) || a.CreatedAt.Equal(b.CreatedAt) && a.Tag < b.Tag
		case "name_asc":
			return a.Tag < b.Tag
		case "name_desc":
			return a.Tag > b.Tag
		}
		return a.CreatedAt.After(b.CreatedAt) || a.CreatedAt.Equal(b.CreatedAt) && a.Tag < b.Tag
	}
	var after *store.E2BTemplateTag
	if c := q.Get("tagsCursor"); c != "" {
		parts := strings.SplitN(c, "|", 3)
		var at time.Time
		if len(parts) == 3 {
			at, err = time.Parse(time.RFC3339Nano, parts[1])
		}
		switch {
		case len(parts) != 3 || err != nil || parts[2] == "":
			writeError(w, http.StatusBadRequest, "tagsCursor %q: give the nextCursor of the previous page", c)
			return
		case parts[0] != sort:
			writeError(w, http.StatusBadRequest, "tagsCursor %q was given for sort %q, not %q: give it with that sort, or start again without it", c, parts[0], sort)
			return
		}
		after = &store.E2BTemplateTag{Tag: parts[2], CreatedAt: at}
	}
	_, have, ok := s.tagTemplate(w, r, as)
	if !ok {
		return
	}
	search = strings.ToLower(search)
	var sel []store.E2BTemplateTag
	for _, h := range have {
		if strings.Contains(strings.ToLower(h.Tag), search) && (after == nil || less(*after, h)) {
			sel = append(sel, h)
		}
	}
	slices.SortFunc(sel, func(a, b store.E2BTemplateTag) int {
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	})
	out := tagGroups{Tags: []tagGroup{}}
	if len(sel) > limit {
		c := tagGroupsCursor(sort, sel[limit-1])
		out.NextCursor = &c
		sel = sel[:limit]
	}
	built := s.builtAt(r, as)
	for _, h := range sel {
		out.Tags = append(out.Tags, tagGroup{Tag: h.Tag, Assignments: []tagAssignment{assignmentOf(h, built)}})
	}
	writeJSON(w, http.StatusOK, out)
}

// tagAssignmentsOf is GET /templates/{templateID}/tags/{tag}/assignments:
// the tag's assignments, newest first, limit a page (1-100, 50), the page
// after cursor ("ASSIGNED_AT|ASSIGNMENT_ID", E2B's form). A tag the
// template lacks has none.
func (s *Server) tagAssignmentsOf(w http.ResponseWriter, r *http.Request, as who) {
	q := r.URL.Query()
	if err := checkQuery(q, "cursor", "limit"); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if _, err := intParam(q, "limit", 1, 100, 50); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	tag := strings.TrimSpace(r.PathValue("tag"))
	if err := checkTag(tag); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	var cursorAt time.Time
	var cursorID string
	if c := q.Get("cursor"); c != "" {
		at, id, ok := strings.Cut(c, "|")
		var err error
		if ok {
			cursorAt, err = time.Parse(time.RFC3339Nano, at)
		}
		if !ok || err != nil || id == "" {
			writeError(w, http.StatusBadRequest, "cursor %q: give the nextCursor of the previous page", c)
			return
		}
		cursorID = id
	}
	_, have, ok := s.tagTemplate(w, r, as)
	if !ok {
		return
	}
	out := tagAssignments{Data: []tagAssignment{}}
	i := slices.IndexFunc(have, func(h store.E2BTemplateTag) bool { return h.Tag == tag })
	if i >= 0 {
		a := assignmentOf(have[i], s.builtAt(r, as))
		// Newest first: the page after the cursor holds what is older
		// than it.
		if cursorID == "" || a.AssignedAt.Before(cursorAt) || a.AssignedAt.Equal(cursorAt) && a.AssignmentID < cursorID {
			out.Data = append(out.Data, a)
		}
	}
	writeJSON(w, http.StatusOK, out)
}
