package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// E2BTemplateTag is a tag of an E2B template (E2BTemplate): a name for one
// of its builds, which "alias:tag" references resolve to.
type E2BTemplateTag struct {
	// TemplateID is the E2B template's ID; KeyID the key that owns it.
	TemplateID string
	KeyID      string
	// Tag is the tag's name ("default", "v1", "production", ...).
	Tag string
	// BuildID is the build the tag names, Template that build's Runtime
	// template (private to KeyID).
	BuildID  string
	Template string
	// CPUCount and MemoryMiB size the build's sandboxes (0: the server's
	// default).
	CPUCount, MemoryMiB int64
	// CreatedAt is when the tag was last assigned.
	CreatedAt time.Time
}

const e2bTagCols = `template_id, key_id, tag, build_id, template, cpu_count, memory_mib, created_at`

// SetE2BTemplateTags points each of tags of key keyID's E2B template
// b.TemplateID at build b (its BuildID, Template, CPUCount, MemoryMiB and
// CreatedAt), adding the tags it lacks and moving those it has.
func (s *Store) SetE2BTemplateTags(ctx context.Context, b E2BTemplateTag, tags []string) error {
	for _, tag := range tags {
		_, err := s.db.ExecContext(ctx, `INSERT INTO e2b_template_tags (`+e2bTagCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (template_id, tag) DO UPDATE SET build_id = excluded.build_id, template = excluded.template,
			cpu_count = excluded.cpu_count, memory_mib = excluded.memory_mib, created_at = excluded.created_at`,
			b.TemplateID, b.KeyID, tag, b.BuildID, b.Template, b.CPUCount, b.MemoryMiB, millis(b.CreatedAt))
		if err != nil {
			return fmt.Errorf("store: e2b template %s tag %q: %w", b.TemplateID, tag, err)
		}
	}
	return nil
}

// E2BTemplateTagOf returns tag of key keyID's E2B template templateID;
// ErrNotFound when it has no such tag (another key's is not found).
func (s *Store) E2BTemplateTagOf(ctx context.Context, keyID, templateID, tag string) (E2BTemplateTag, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+e2bTagCols+` FROM e2b_template_tags WHERE key_id = ? AND template_id = ? AND tag = ?`,
		keyID, templateID, tag)
	t, err := scanE2BTag(row)
	if errors.Is(err, sql.ErrNoRows) {
		return E2BTemplateTag{}, fmt.Errorf("e2b template %s tag %q: %w", templateID, tag, ErrNotFound)
	}
	if err != nil {
		return E2BTemplateTag{}, fmt.Errorf("store: e2b template tag: %w", err)
	}
	return t, nil
}

// E2BTemplateTagsOf lists the tags of key keyID's E2B template templateID,
// oldest assignment first (none for another key's).
func (s *Store) E2BTemplateTagsOf(ctx context.Context, keyID, templateID string) ([]E2BTemplateTag, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+e2bTagCols+` FROM e2b_template_tags WHERE key_id = ? AND template_id = ?
		ORDER BY created_at, tag`, keyID, templateID)
	if err != nil {
		return nil, fmt.Errorf("store: e2b template tags: %w", err)
	}
	defer rows.Close()
	out := []E2BTemplateTag{}
	for rows.Next() {
		t, err := scanE2BTag(rows)
		if err != nil {
			return nil, fmt.Errorf("store: e2b template tags: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// DeleteE2BTemplateTags removes tags from key keyID's E2B template
// templateID and returns how many it had.
func (s *Store) DeleteE2BTemplateTags(ctx context.Context, keyID, templateID string, tags []string) (int64, error) {
	var n int64
	for _, tag := range tags {
		res, err := s.db.ExecContext(ctx, `DELETE FROM e2b_template_tags WHERE key_id = ? AND template_id = ? AND tag = ?`,
			keyID, templateID, tag)
		if err != nil {
			return n, fmt.Errorf("store: e2b template %s tag %q: %w", templateID, tag, err)
		}
		m, _ := res.RowsAffected()
		n += m
	}
	return n, nil
}

func scanE2BTag(r interface{ Scan(...any) error }) (E2BTemplateTag, error) {
	var t E2BTemplateTag
	var created int64
	err := r.Scan(&t.TemplateID, &t.KeyID, &t.Tag, &t.BuildID, &t.Template, &t.CPUCount, &t.MemoryMiB, &created)
	t.CreatedAt = fromMillis(created)
	return t, err
}
