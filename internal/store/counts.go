package store

import (
	"context"
	"fmt"
)

// CountSandboxesByState returns how many sandbox records are in each state
// (starting, running, stopped); states with none are absent.
func (s *Store) CountSandboxesByState(ctx context.Context) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT state, COUNT(*) FROM sandboxes GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("store: count sandboxes: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return nil, fmt.Errorf("store: count sandboxes: %w", err)
		}
		out[state] = n
	}
	return out, rows.Err()
}
