package models

import (
	"context"
	"fmt"
)

// RetitleThread gives thread id of userID the title to, if its title is
// still from: a title a model made for a thread replaces the one its first
// message gave it, never one its owner chose meanwhile (or a thread being
// deleted). It reports whether the title changed.
func (s *Store) RetitleThread(ctx context.Context, userID, id, from, to string) (bool, error) {
	res := s.w.WithContext(ctx).Model(&Thread{}).
		Where("id = ? AND user_id = ? AND title = ? AND delete_at IS NULL", id, userID, from).
		Updates(map[string]any{"title": to, "updated_at": s.now().UTC()})
	if res.Error != nil {
		return false, fmt.Errorf("store: retitle thread: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}
