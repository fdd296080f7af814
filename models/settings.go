package models

import (
	"context"
	"fmt"
	"time"
)

// Setting is one instance-wide setting changed at run time.
type Setting struct {
	Key       string `gorm:"primaryKey"`
	Value     string `gorm:"not null"`
	UpdatedAt time.Time
}

// Setting returns the value of key, or ErrNotFound.
func (s *Store) Setting(ctx context.Context, key string) (string, error) {
	st, err := take[Setting](s.r.WithContext(ctx).Where("key = ?", key), "setting "+key)
	if err != nil {
		return "", err
	}
	return st.Value, nil
}

// SetSetting stores value under key.
func (s *Store) SetSetting(ctx context.Context, key, value string) error {
	st := Setting{Key: key, Value: value, UpdatedAt: s.now().UTC()}
	if err := s.w.WithContext(ctx).Save(&st).Error; err != nil {
		return fmt.Errorf("store: set setting %s: %w", key, err)
	}
	return nil
}
