package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// E2BTemplate is a template built through the E2B-compatible API
// (internal/compat/e2b): E2B's templateID and alias, the key that owns it,
// and the Runtime template of its last successful build.
type E2BTemplate struct {
	// ID is E2B's templateID.
	ID    string
	KeyID string
	// Alias is its name, unique among KeyID's E2B templates.
	Alias string
	// Template is the Runtime template (private to KeyID) of the last
	// successful build; "" before one.
	Template string
	// BuildID is that build's id ("" before one).
	BuildID string
	// StartCmd and ReadyCmd are what a sandbox of it starts, and waits for
	// to succeed, before its create answers ("": none).
	StartCmd, ReadyCmd string
	// CPUCount and MemoryMiB size its sandboxes (0: the server's default).
	CPUCount, MemoryMiB int64
	// Builds counts its successful builds.
	Builds    int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

const e2bTemplateCols = `id, key_id, alias, template, build_id, start_cmd, ready_cmd, cpu_count, memory_mib, builds, created_at, updated_at`

// E2BTemplateFor returns key keyID's E2B template whose alias is alias,
// inserting t (its ID, KeyID, Alias and CreatedAt set) when it has none. The
// bool says whether it was inserted.
func (s *Store) E2BTemplateFor(ctx context.Context, t E2BTemplate) (E2BTemplate, bool, error) {
	_, err := s.db.ExecContext(ctx, `INSERT INTO e2b_templates (id, key_id, alias, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (key_id, alias) DO NOTHING`, t.ID, t.KeyID, t.Alias, millis(t.CreatedAt), millis(t.CreatedAt))
	if err != nil {
		return E2BTemplate{}, false, fmt.Errorf("store: e2b template: %w", err)
	}
	got, err := s.E2BTemplateOf(ctx, t.KeyID, t.Alias)
	if err != nil {
		return E2BTemplate{}, false, err
	}
	return got, got.ID == t.ID, nil
}

// E2BTemplateOf returns key keyID's E2B template whose id or alias is
// idOrAlias; ErrNotFound when it has none (another key's is not found).
func (s *Store) E2BTemplateOf(ctx context.Context, keyID, idOrAlias string) (E2BTemplate, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+e2bTemplateCols+` FROM e2b_templates
		WHERE key_id = ? AND (id = ? OR alias = ?) ORDER BY (id = ?) DESC LIMIT 1`, keyID, idOrAlias, idOrAlias, idOrAlias)
	t, err := scanE2BTemplate(row)
	if errors.Is(err, sql.ErrNoRows) {
		return E2BTemplate{}, fmt.Errorf("e2b template %q: %w", idOrAlias, ErrNotFound)
	}
	if err != nil {
		return E2BTemplate{}, fmt.Errorf("store: e2b template: %w", err)
	}
	return t, nil
}

// E2BTemplatesOf lists key keyID's E2B templates, oldest first.
func (s *Store) E2BTemplatesOf(ctx context.Context, keyID string) ([]E2BTemplate, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+e2bTemplateCols+` FROM e2b_templates WHERE key_id = ? ORDER BY created_at, id`, keyID)
	if err != nil {
		return nil, fmt.Errorf("store: e2b templates: %w", err)
	}
	defer rows.Close()
	out := []E2BTemplate{}
	for rows.Next() {
		t, err := scanE2BTemplate(rows)
		if err != nil {
			return nil, fmt.Errorf("store: e2b templates: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// SetE2BTemplateBuild records t's new successful build (its Template,
// BuildID, StartCmd, ReadyCmd, CPUCount, MemoryMiB and UpdatedAt) and
// counts it. ErrNotFound when t was deleted meanwhile.
func (s *Store) SetE2BTemplateBuild(ctx context.Context, t E2BTemplate) error {
	res, err := s.db.ExecContext(ctx, `UPDATE e2b_templates SET template = ?, build_id = ?, start_cmd = ?, ready_cmd = ?,
		cpu_count = ?, memory_mib = ?, builds = builds + 1, updated_at = ? WHERE id = ? AND key_id = ?`,
		t.Template, t.BuildID, t.StartCmd, t.ReadyCmd, t.CPUCount, t.MemoryMiB, millis(t.UpdatedAt), t.ID, t.KeyID)
	if err != nil {
		return fmt.Errorf("store: e2b template %s: %w", t.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("e2b template %s: %w", t.ID, ErrNotFound)
	}
	return nil
}

// DeleteE2BTemplate removes key keyID's E2B template id and its tags.
// ErrNotFound when it has none.
func (s *Store) DeleteE2BTemplate(ctx context.Context, keyID, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM e2b_template_tags WHERE template_id = ? AND key_id = ?`, id, keyID); err != nil {
		return fmt.Errorf("store: e2b template %s tags: %w", id, err)
	}
	res, err := s.db.ExecContext(ctx, `DELETE FROM e2b_templates WHERE id = ? AND key_id = ?`, id, keyID)
	if err != nil {
		return fmt.Errorf("store: e2b template %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("e2b template %s: %w", id, ErrNotFound)
	}
	return nil
}

func scanE2BTemplate(r interface{ Scan(...any) error }) (E2BTemplate, error) {
	var t E2BTemplate
	var created, updated int64
	err := r.Scan(&t.ID, &t.KeyID, &t.Alias, &t.Template, &t.BuildID, &t.StartCmd, &t.ReadyCmd, &t.CPUCount, &t.MemoryMiB,
		&t.Builds, &created, &updated)
	t.CreatedAt, t.UpdatedAt = fromMillis(created), fromMillis(updated)
	return t, err
}
