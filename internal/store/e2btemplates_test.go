package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestE2BTemplates(t *testing.T) { eachBackend(t, testE2BTemplates) }

// An E2B template is found by id or alias among its own key's only; a
// second request for an alias returns the first row; a build is recorded
// and counted; a delete is per key.
func testE2BTemplates(t *testing.T, dsn string) {
	ctx := context.Background()
	st, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	a, made, err := st.E2BTemplateFor(ctx, E2BTemplate{ID: "tpl_a", KeyID: "key_1", Alias: "app", CreatedAt: t0})
	if err != nil || !made || a.ID != "tpl_a" || a.Template != "" || !a.CreatedAt.Equal(t0) {
		t.Fatalf("first request: %+v %v %v", a, made, err)
	}
	again, made, err := st.E2BTemplateFor(ctx, E2BTemplate{ID: "tpl_x", KeyID: "key_1", Alias: "app", CreatedAt: t0})
	if err != nil || made || again.ID != "tpl_a" {
		t.Fatalf("second request for the alias: %+v %v %v", again, made, err)
	}
	if b, made, err := st.E2BTemplateFor(ctx, E2BTemplate{ID: "tpl_b", KeyID: "key_2", Alias: "app", CreatedAt: t0}); err != nil || !made || b.ID != "tpl_b" {
		t.Fatalf("another key's alias: %+v %v %v", b, made, err)
	}
	for _, q := range []string{"tpl_a", "app"} {
		if got, err := st.E2BTemplateOf(ctx, "key_1", q); err != nil || got.ID != "tpl_a" {
			t.Errorf("E2BTemplateOf(key_1, %s): %+v %v", q, got, err)
		}
	}
	if _, err := st.E2BTemplateOf(ctx, "key_2", "tpl_a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another key's template by id: %v", err)
	}
	a.Template, a.BuildID, a.StartCmd, a.CPUCount, a.MemoryMiB, a.UpdatedAt = "e2b.app.1", "b1", "sleep 1", 2, 512, t0.Add(time.Minute)
	if err := st.SetE2BTemplateBuild(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, err := st.E2BTemplateOf(ctx, "key_1", "app")
	if err != nil || got.Template != "e2b.app.1" || got.BuildID != "b1" || got.StartCmd != "sleep 1" || got.Builds != 1 ||
		got.CPUCount != 2 || got.MemoryMiB != 512 || !got.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("after a build: %+v %v", got, err)
	}
	list, err := st.E2BTemplatesOf(ctx, "key_1")
	if err != nil || len(list) != 1 || list[0].ID != "tpl_a" {
		t.Errorf("list: %+v %v", list, err)
	}
	if err := st.DeleteE2BTemplate(ctx, "key_2", "tpl_a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another key deletes: %v", err)
	}
	if err := st.DeleteE2BTemplate(ctx, "key_1", "tpl_a"); err != nil {
		t.Fatal(err)
	}
	if err := st.SetE2BTemplateBuild(ctx, a); !errors.Is(err, ErrNotFound) {
		t.Errorf("a build of a deleted template: %v", err)
	}
}
