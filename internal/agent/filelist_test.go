package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
)

// listAll follows a listing's pages from the start, checking each page's
// shape, and returns every entry's path relative to the workspace.
func (a *testAgent) listAll(query string, limit int) (paths []string, pages int) {
	a.t.Helper()
	cursor := ""
	for {
		var l agentapi.FileList
		a.call("GET", fmt.Sprintf("/files/list?limit=%d&cursor=%s&%s", limit, cursor, query), nil, 200, &l)
		pages++
		if len(l.Entries) > limit {
			a.t.Fatalf("page of %d entries with limit %d", len(l.Entries), limit)
		}
		for _, e := range l.Entries {
			rel, _ := filepath.Rel(a.workspace, e.Path)
			paths = append(paths, rel)
		}
		if !l.Truncated {
			if l.Next != "" {
				a.t.Fatalf("last page with next %q", l.Next)
			}
			return paths, pages
		}
		if len(l.Entries) == 0 || l.Next != agentapi.ListCursor(l.Entries[len(l.Entries)-1].Path) {
			a.t.Fatalf("truncated page of %d entries with next %q", len(l.Entries), l.Next)
		}
		cursor = l.Next
	}
}

// Pages at every size give the whole listing, in listing order (one path
// component at a time, so "a/..." comes before "a-b"), each entry once.
func TestListPages(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	for _, p := range []string{"a/x/1", "a/x/2", "a/y", "a-b", "a.c", "b/c/d/e", "b/z", "z"} {
		a.call("PUT", "/files?path="+q(p), []byte(p), 200, nil)
	}
	if err := os.Symlink("b", filepath.Join(a.workspace, "link")); err != nil {
		t.Fatal(err)
	}
	want := map[int]string{
		1:  "a a-b a.c b link z",
		2:  "a a/x a/y a-b a.c b b/c b/z link z",
		10: "a a/x a/x/1 a/x/2 a/y a-b a.c b b/c b/c/d b/c/d/e b/z link z",
	}
	for depth, w := range want {
		for _, limit := range []int{1, 2, 3, 5, 1000} {
			got, pages := a.listAll(fmt.Sprintf("depth=%d", depth), limit)
			if strings.Join(got, " ") != w {
				t.Errorf("depth %d, limit %d: %v, want %s", depth, limit, got, w)
			}
			// A page is truncated only when an entry follows it: no empty
			// last page.
			if n := len(strings.Fields(w)); pages != (n+limit-1)/limit {
				t.Errorf("depth %d, limit %d: %d pages for %d entries", depth, limit, pages, n)
			}
		}
	}
	// The default page holds everything here; total counts the direct
	// children at depth 1 only.
	var l agentapi.FileList
	a.call("GET", "/files/list", nil, 200, &l)
	if len(l.Entries) != 6 || l.Truncated || l.Next != "" || l.Total == nil || *l.Total != 6 {
		t.Fatalf("default page: %d entries, truncated %v, next %q, total %v", len(l.Entries), l.Truncated, l.Next, l.Total)
	}
	a.call("GET", "/files/list?limit=2", nil, 200, &l)
	if len(l.Entries) != 2 || !l.Truncated || l.Total == nil || *l.Total != 6 {
		t.Fatalf("page of 2: %d entries, truncated %v, total %v", len(l.Entries), l.Truncated, l.Total)
	}
	l = agentapi.FileList{}
	a.call("GET", "/files/list?depth=2", nil, 200, &l)
	if l.Total != nil {
		t.Fatalf("depth 2 has a total: %d", *l.Total)
	}
	// An empty directory: no entries, not truncated.
	a.call("POST", "/files/mkdir", agentapi.MkdirRequest{Path: "empty"}, 200, nil)
	l = agentapi.FileList{}
	a.call("GET", "/files/list?path=empty", nil, 200, &l)
	if l.Entries == nil || len(l.Entries) != 0 || l.Truncated || *l.Total != 0 {
		t.Fatalf("empty: %+v", l)
	}
}

// A cursor resumes strictly after the entry it names, even when that entry
// or its directory is gone, and entries added before it are not listed
// again: nothing that was there all along is lost or repeated.
func TestListCursorStable(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	for _, p := range []string{"d/1", "d/2", "d/3", "e", "f"} {
		a.call("PUT", "/files?path="+q(p), []byte("x"), 200, nil)
	}
	page := func(cursor string) []string {
		var l agentapi.FileList
		a.call("GET", "/files/list?depth=2&limit=2&cursor="+cursor, nil, 200, &l)
		var out []string
		for _, e := range l.Entries {
			rel, _ := filepath.Rel(a.workspace, e.Path)
			out = append(out, rel)
		}
		return out
	}
	ws := a.workspace
	if got := page(agentapi.ListCursor(ws + "/d/1")); !slices.Equal(got, []string{"d/2", "d/3"}) {
		t.Fatalf("after d/1: %v", got)
	}
	// The cursor's entry was removed: the next one follows.
	if got := page(agentapi.ListCursor(ws + "/d/15")); !slices.Equal(got, []string{"d/2", "d/3"}) {
		t.Fatalf("after a missing d/15: %v", got)
	}
	// Its whole directory was removed.
	if got := page(agentapi.ListCursor(ws + "/c/zzz")); !slices.Equal(got, []string{"d", "d/1"}) {
		t.Fatalf("after a missing c/zzz: %v", got)
	}
	// An entry added before the cursor is not listed; one after it is.
	a.call("PUT", "/files?path=d/0", []byte("x"), 200, nil)
	a.call("PUT", "/files?path=d/4", []byte("x"), 200, nil)
	if got := page(agentapi.ListCursor(ws + "/d/3")); !slices.Equal(got, []string{"d/4", "e"}) {
		t.Fatalf("after d/3: %v", got)
	}
	// A cursor past a directory's contents at a smaller depth.
	var l agentapi.FileList
	a.call("GET", "/files/list?limit=10&cursor="+agentapi.ListCursor(ws+"/d/2"), nil, 200, &l)
	if len(l.Entries) != 2 || l.Entries[0].Name != "e" || l.Entries[1].Name != "f" {
		t.Fatalf("depth 1 after d/2: %+v", l.Entries)
	}

	// Bad requests name what is wrong.
	for _, c := range []struct{ query, want string }{
		{"limit=0", "limit"},
		{"limit=10001", "limit"},
		{"limit=x", "limit"},
		{"cursor=%2F%2F", "base64url"},
		{"cursor=" + agentapi.ListCursor("relative"), "absolute path"},
		{"cursor=" + agentapi.ListCursor(ws+"/../x"), "not clean"},
		{"cursor=" + agentapi.ListCursor("/etc/passwd"), "not inside"},
		{"cursor=" + agentapi.ListCursor(ws), "not inside"},
		{"cursor=" + strings.Repeat("A", agentapi.ListMaxCursorBytes+1), "over"},
	} {
		e := a.apiErr("GET", "/files/list?"+c.query, nil, 400, agentapi.CodeBadRequest)
		if !strings.Contains(e.Message, c.want) {
			t.Errorf("%s: %q does not say %q", c.query, e.Message, c.want)
		}
	}
}

// A page is cut at ListMaxPageBytes of JSON, whatever its limit: long
// names make pages of fewer entries, and following them still gives
// everything.
func TestListPageBytes(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	dir := filepath.Join(a.workspace, "long")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// 2000 names of 250 bytes: each entry's JSON is about 650 bytes (name
	// and path). A budget of 100 KiB holds 150 or so; the real one (4 MiB)
	// would need 6500 such files to matter.
	const n = 2000
	for i := range n {
		name := fmt.Sprintf("%04d%s", i, strings.Repeat("x", 246))
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := &lister{depth: 1, limit: agentapi.ListMaxLimit, maxBytes: 100 << 10}
	if err := l.walk(dir, 1, nil); err != nil {
		t.Fatal(err)
	}
	if !l.more || len(l.entries) < 100 || len(l.entries) > 200 || l.bytes > 100<<10 {
		t.Fatalf("a page of %d bytes: %d entries, %d bytes, more %v", 100<<10, len(l.entries), l.bytes, l.more)
	}
	got, _ := a.listAll("path=long", agentapi.ListMaxLimit)
	if len(got) != n || !slices.IsSorted(got) || got[0] != "long/0000"+strings.Repeat("x", 246) {
		t.Fatalf("%d entries, sorted %v", len(got), slices.IsSorted(got))
	}
}

func TestComparePaths(t *testing.T) {
	t.Parallel()
	order := []string{"/", "/a", "/a/b", "/a/b/c", "/a/c", "/a-b", "/a.b", "/ab", "/b"}
	for i := range order {
		for j := range order {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := agentapi.ComparePaths(order[i], order[j]); got != want {
				t.Errorf("ComparePaths(%q, %q) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
}
