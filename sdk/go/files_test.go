package withruntime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// listing serves GET .../files/list over n entries f0..f(n-1) in pages of
// the limit asked for, the cursor being base64url of the last path; with
// stuck, every page's next is the first page's.
func listing(t *testing.T, n int, stuck bool, limits *[]string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		*limits = append(*limits, q.Get("limit"))
		limit, _ := strconv.Atoi(q.Get("limit"))
		if limit == 0 {
			limit = DefaultListLimit
		}
		start := 0
		if c := q.Get("cursor"); c != "" {
			p, err := base64.RawURLEncoding.DecodeString(c)
			if err != nil {
				t.Errorf("cursor %q", c)
			}
			start, _ = strconv.Atoi(strings.TrimPrefix(string(p), "/w/f"))
			start++
		}
		page := FileList{Entries: []FileInfo{}}
		for i := start; i < n && len(page.Entries) < limit; i++ {
			page.Entries = append(page.Entries, FileInfo{Name: fmt.Sprintf("f%d", i), Path: fmt.Sprintf("/w/f%d", i), Type: "file"})
		}
		if k := len(page.Entries); k > 0 && start+k < n {
			page.Truncated, page.Next = true, base64.RawURLEncoding.EncodeToString([]byte(page.Entries[k-1].Path))
			if stuck {
				page.Next = base64.RawURLEncoding.EncodeToString([]byte("/w/f0"))
			}
		}
		total := n
		page.Total = &total
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(page)
	}
}

// List and Entries follow the pages to the end; ListPage gives one; pages
// that do not move forward are an error, never a loop.
func TestListPages(t *testing.T) {
	var limits []string
	c := fake(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /v1/sandboxes/sb1":            answer(200, `{"id":"sb1","state":"running"}`),
		"GET /v1/sandboxes/sb1/files/list": listing(t, 25_001, false, &limits),
		"GET /v1/sandboxes/sb2":            answer(200, `{"id":"sb2","state":"running"}`),
		"GET /v1/sandboxes/sb2/files/list": listing(t, 20_001, true, &limits),
	})
	ctx := context.Background()
	sbx, err := c.Connect(ctx, "sb1")
	if err != nil {
		t.Fatal(err)
	}
	all, err := sbx.Files().List(ctx, "/w", 1)
	if err != nil || len(all) != 25_001 || all[25_000].Name != "f25000" {
		t.Fatalf("List: %d entries, %v", len(all), err)
	}
	if strings.Join(limits, " ") != "10000 10000 10000" {
		t.Errorf("List asked for pages of %v", limits)
	}
	n := 0
	for fi, err := range sbx.Files().Entries(ctx, "/w", 1) {
		if err != nil || fi.Name != fmt.Sprintf("f%d", n) {
			t.Fatalf("Entries at %d: %+v %v", n, fi, err)
		}
		if n++; n == 12_345 {
			break
		}
	}
	page, err := sbx.Files().ListPage(ctx, "/w", ListOptions{Limit: 2})
	if err != nil || len(page.Entries) != 2 || !page.Truncated || page.Total == nil || *page.Total != 25_001 {
		t.Fatalf("ListPage: %+v %v", page, err)
	}
	page, err = sbx.Files().ListPage(ctx, "/w", ListOptions{Limit: 2, Cursor: page.Next})
	if err != nil || page.Entries[0].Name != "f2" {
		t.Fatalf("second page: %+v %v", page, err)
	}
	stuck, err := c.Connect(ctx, "sb2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stuck.Files().List(ctx, "/w", 1); err == nil || !strings.Contains(err.Error(), "does not move the listing forward") {
		t.Errorf("stuck pages: %v", err)
	}
}

// OpenRange asks for a Range and checks the answer; a server that sends the
// whole file has its head skipped; the end of the file is an empty stream,
// past it ErrRangeNotSatisfiable.
func TestOpenRange(t *testing.T) {
	data := []byte("0123456789")
	var got []string
	c := fake(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /v1/sandboxes/sb1": answer(200, `{"id":"sb1","state":"running"}`),
		"GET /v1/sandboxes/sb1/files": func(w http.ResponseWriter, r *http.Request) {
			rng := r.Header.Get("Range")
			got = append(got, rng)
			if r.URL.Query().Get("path") == "whole" {
				w.Write(data) // a server that ignores Range
				return
			}
			var first, last int
			if _, err := fmt.Sscanf(rng, "bytes=%d-%d", &first, &last); err != nil {
				last = len(data) - 1
				fmt.Sscanf(rng, "bytes=%d-", &first)
			}
			if first >= len(data) {
				w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
				w.WriteHeader(416)
				io.WriteString(w, `{"error":{"code":"range_not_satisfiable","message":"past the end"}}`)
				return
			}
			last = min(last, len(data)-1)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, len(data)))
			w.WriteHeader(206)
			w.Write(data[first : last+1])
		},
	})
	ctx := context.Background()
	sbx, err := c.Connect(ctx, "sb1")
	if err != nil {
		t.Fatal(err)
	}
	read := func(path string, off, n int64) (string, error) {
		rc, err := sbx.Files().OpenRange(ctx, path, off, n)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return string(b), err
	}
	for _, c := range []struct {
		path    string
		off, n  int64
		want    string
		request string
	}{
		{"f", 0, 3, "012", "bytes=0-2"},
		{"f", 4, -1, "456789", "bytes=4-"},
		{"f", 8, 100, "89", "bytes=8-107"},
		{"f", 10, -1, "", "bytes=10-"},
		{"whole", 3, 4, "3456", "bytes=3-6"},
		{"whole", 7, -1, "789", "bytes=7-"},
	} {
		got = nil
		s, err := read(c.path, c.off, c.n)
		if err != nil || s != c.want || len(got) != 1 || got[0] != c.request {
			t.Errorf("OpenRange(%s, %d, %d): %q %v, sent %v", c.path, c.off, c.n, s, err, got)
		}
	}
	if _, err := read("f", 11, -1); !errors.Is(err, ErrRangeNotSatisfiable) {
		t.Errorf("past the end: %v", err)
	}
	if _, err := read("f", -1, -1); err == nil {
		t.Errorf("a negative offset was sent")
	}
}
