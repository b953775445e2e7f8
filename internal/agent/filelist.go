package agent

import (
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"withruntime.dev/runtime/internal/agentapi"
)

// handleListFiles serves GET /files/list: one page of a directory's
// listing to the given depth (1: direct children), in listing order (see
// agentapi.FileList), at most limit entries and agentapi.ListMaxPageBytes
// of JSON. cursor (a page's next) resumes strictly after the entry it
// names, so entries added or removed between pages never make another
// entry be lost or repeated. Symlinked directories are listed, not
// descended into; an unreadable subdirectory is listed, not descended
// into.
//
// Each page reads the names of the directories on the cursor's path and of
// those it lists (sorting them is what makes the order stable), but stats
// only the entries it returns and skips whole subtrees before the cursor.
func (s *Server) handleListFiles(w http.ResponseWriter, r *http.Request) error {
	path, err := s.queryPath(r, s.cfg.Workspace)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	depth, err := listParam(q.Get("depth"), "depth", 1, agentapi.ListMaxDepth, "levels (1: the direct children)")
	if err != nil {
		return err
	}
	limit, err := listParam(q.Get("limit"), "limit", agentapi.ListDefaultLimit, agentapi.ListMaxLimit, "entries per page")
	if err != nil {
		return err
	}
	var after []string
	if c := q.Get("cursor"); c != "" {
		cp, err := agentapi.ParseListCursor(c)
		if err != nil {
			return badRequest("cursor: %v; pass the next of the page before, or no cursor for the first page", err)
		}
		rel, ok := under(path, cp)
		if !ok {
			return badRequest("the cursor names %s, which is not inside %s: a cursor continues the listing it came from; list %s again without a cursor",
				abbrev(cp, 200), path, path)
		}
		after = strings.Split(rel, "/")
	}
	st, err := os.Stat(path)
	if err != nil {
		return fsErr(err, path)
	}
	if !st.IsDir() {
		return badRequest("%s is not a directory; use GET /files/stat?path=%s for a single file", path, path)
	}
	l := &lister{depth: depth, limit: limit, maxBytes: agentapi.ListMaxPageBytes}
	if err := l.walk(path, 1, after); err != nil {
		return err
	}
	out := agentapi.FileList{Entries: l.entries}
	if out.Entries == nil {
		out.Entries = []agentapi.FileInfo{}
	}
	if l.more {
		out.Truncated, out.Next = true, agentapi.ListCursor(l.entries[len(l.entries)-1].Path)
	}
	if depth == 1 {
		out.Total = &l.total
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listParam parses a whole-number query parameter from 1 to max (def when
// absent).
func listParam(v, name string, def, max int, unit string) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, badRequest("%s=%q is invalid; give a whole number from 1 to %d %s", name, v, max, unit)
	}
	return n, nil
}

// under returns p relative to the directory dir when p is inside it.
func under(dir, p string) (string, bool) {
	if dir == "/" {
		return p[1:], len(p) > 1
	}
	rel, ok := strings.CutPrefix(p, dir+"/")
	return rel, ok && rel != ""
}

// lister collects one page of a listing.
type lister struct {
	depth, limit, maxBytes int
	entries                []agentapi.FileInfo
	bytes                  int
	// total is the number of names in the listed directory itself.
	total int
	// more is set when an entry was found past a full page; the walk then
	// stops.
	more bool
}

// walk lists dir (at level, 1 for the listed directory) in listing order,
// starting strictly after the entry named by the path components after
// (relative to dir; none: from the start).
func (l *lister) walk(dir string, level int, after []string) error {
	names, err := sortedNames(dir)
	if err != nil {
		if level == 1 {
			return fsErr(err, dir)
		}
		return nil // unreadable subdirectory: listed, not descended
	}
	if level == 1 {
		l.total = len(names)
	}
	i := 0
	if len(after) > 0 {
		i, _ = slices.BinarySearch(names, after[0])
		if i < len(names) && names[i] == after[0] {
			// The cursor's entry or one of its directories: listed on an
			// earlier page. What follows it in its subtree (all of it when
			// the cursor is the directory itself) comes next.
			if p := join(dir, names[i]); level < l.depth {
				if st, err := os.Lstat(p); err == nil && st.IsDir() {
					if err := l.walk(p, level+1, after[1:]); err != nil || l.more {
						return err
					}
				}
			}
			i++
		}
	}
	for _, name := range names[i:] {
		p := join(dir, name)
		st, err := os.Lstat(p)
		if err != nil {
			continue // vanished meanwhile
		}
		if !l.add(toFileInfo(p, st)) {
			return nil
		}
		if st.IsDir() && level < l.depth {
			if err := l.walk(p, level+1, nil); err != nil || l.more {
				return err
			}
		}
	}
	return nil
}

// add appends fi to the page, or says the page is full (and that more
// entries follow).
func (l *lister) add(fi agentapi.FileInfo) bool {
	if len(l.entries) >= l.limit {
		l.more = true
		return false
	}
	b, _ := json.Marshal(fi)
	if len(l.entries) > 0 && l.bytes+len(b)+1 > l.maxBytes {
		l.more = true
		return false
	}
	l.entries = append(l.entries, fi)
	l.bytes += len(b) + 1
	return true
}

// sortedNames reads a directory's names, sorted in byte order.
func sortedNames(dir string) ([]string, error) {
	// O_DIRECTORY|O_NONBLOCK: should a FIFO have replaced the directory
	// since it was seen, the open fails at once instead of waiting.
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}
