package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestE2BTemplateTags(t *testing.T) { eachBackend(t, testE2BTemplateTags) }

// A tag names one build and moves when assigned again; tags are per key
// (another key neither reads nor deletes them); deleting the template
// deletes its tags.
func testE2BTemplateTags(t *testing.T, dsn string) {
	ctx := context.Background()
	st, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	if _, _, err := st.E2BTemplateFor(ctx, E2BTemplate{ID: "tpl_a", KeyID: "key_1", Alias: "app", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	b1 := E2BTemplateTag{TemplateID: "tpl_a", KeyID: "key_1", BuildID: "b1", Template: "e2b.app.1", CPUCount: 2, MemoryMiB: 512, CreatedAt: t0}
	if err := st.SetE2BTemplateTags(ctx, b1, []string{"default", "v1"}); err != nil {
		t.Fatal(err)
	}
	b2 := E2BTemplateTag{TemplateID: "tpl_a", KeyID: "key_1", BuildID: "b2", Template: "e2b.app.2", CreatedAt: t0.Add(time.Minute)}
	if err := st.SetE2BTemplateTags(ctx, b2, []string{"default"}); err != nil {
		t.Fatal(err)
	}
	list, err := st.E2BTemplateTagsOf(ctx, "key_1", "tpl_a")
	if err != nil || len(list) != 2 || list[0].Tag != "v1" || list[0].BuildID != "b1" || list[0].CPUCount != 2 ||
		list[0].MemoryMiB != 512 || list[1].Tag != "default" || list[1].Template != "e2b.app.2" || !list[1].CreatedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("tags: %+v %v", list, err)
	}
	if got, err := st.E2BTemplateTagOf(ctx, "key_1", "tpl_a", "v1"); err != nil || got.Template != "e2b.app.1" {
		t.Errorf("tag v1: %+v %v", got, err)
	}
	if _, err := st.E2BTemplateTagOf(ctx, "key_2", "tpl_a", "v1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another key's tag: %v", err)
	}
	if l, err := st.E2BTemplateTagsOf(ctx, "key_2", "tpl_a"); err != nil || len(l) != 0 {
		t.Errorf("another key lists: %+v %v", l, err)
	}
	if n, err := st.DeleteE2BTemplateTags(ctx, "key_2", "tpl_a", []string{"v1"}); err != nil || n != 0 {
		t.Errorf("another key deletes: %d %v", n, err)
	}
	if n, err := st.DeleteE2BTemplateTags(ctx, "key_1", "tpl_a", []string{"v1", "nope"}); err != nil || n != 1 {
		t.Errorf("delete v1: %d %v", n, err)
	}
	if _, err := st.E2BTemplateTagOf(ctx, "key_1", "tpl_a", "v1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted tag: %v", err)
	}
	if err := st.DeleteE2BTemplate(ctx, "key_1", "tpl_a"); err != nil {
		t.Fatal(err)
	}
	if l, err := st.E2BTemplateTagsOf(ctx, "key_1", "tpl_a"); err != nil || len(l) != 0 {
		t.Errorf("tags of a deleted template: %+v %v", l, err)
	}
}
