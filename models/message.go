package models

import "context"

// Message returns message id of thread threadID, or ErrNotFound.
func (s *Store) Message(ctx context.Context, threadID, id string) (*Message, error) {
	return take[Message](s.r.WithContext(ctx).Where("id = ? AND thread_id = ?", id, threadID), "message")
}
