package purge

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"herd/models"
)

// fakeStore removes a thread once its delete is due, as
// models.Store.PurgeThread decides.
type fakeStore struct {
	mu      sync.Mutex
	due     map[string]time.Time // pending deletes
	purged  []string
	pending []models.Thread // what ScheduledDeletes answers
}

func (s *fakeStore) PurgeThread(_ context.Context, id string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.due[id]
	switch {
	case !ok:
		return models.ErrNotFound
	case now.Before(at):
		return &models.NotDueError{At: at}
	}
	delete(s.due, id)
	s.purged = append(s.purged, id)
	return nil
}

func (s *fakeStore) ScheduledDeletes(context.Context) ([]models.Thread, error) {
	return s.pending, nil
}

type relayed struct {
	id string
	at time.Time
}

func newTestPurger(t *testing.T, store *fakeStore, now func() time.Time) (*Purger, <-chan string, *[]relayed) {
	t.Helper()
	removed := make(chan string, 8)
	var mu sync.Mutex
	var relays []relayed
	p := New(store, now, slog.New(slog.DiscardHandler), func(id string) { removed <- id }, func(id string, at time.Time) {
		mu.Lock()
		relays = append(relays, relayed{id, at})
		mu.Unlock()
	})
	t.Cleanup(p.Close)
	return p, removed, &relays
}

// TestPurger: a scheduled delete is removed when due and relayed; a
// cancelled one is not, and its cancel is relayed as a zero time; Set
// and Unset, another instance's, relay nothing.
func TestPurger(t *testing.T) {
	at := time.Now().Add(20 * time.Millisecond)
	store := &fakeStore{due: map[string]time.Time{"a": at, "b": at, "c": at}}
	p, removed, relays := newTestPurger(t, store, time.Now)
	p.Schedule("a", at)
	p.Schedule("b", at)
	p.Cancel("b")
	p.Set("c", at)
	p.Unset("c")
	select {
	case id := <-removed:
		if id != "a" {
			t.Fatalf("removed %s, want a", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a was not removed")
	}
	select {
	case id := <-removed:
		t.Fatalf("removed %s too", id)
	case <-time.After(100 * time.Millisecond):
	}
	want := []relayed{{"a", at}, {"b", at}, {"b", time.Time{}}}
	if !slices.Equal(*relays, want) {
		t.Errorf("relayed %v, want %v", *relays, want)
	}
}

// TestPurgerEarlyClock: a timer that fires before the store's due time
// (an instance whose clock is ahead scheduled it) waits until then.
func TestPurgerEarlyClock(t *testing.T) {
	due := time.Now().Add(50 * time.Millisecond)
	store := &fakeStore{due: map[string]time.Time{"a": due}}
	p, removed, _ := newTestPurger(t, store, time.Now)
	p.Set("a", time.Now())
	select {
	case <-removed:
		if time.Now().Before(due) {
			t.Error("removed before it was due")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a was not removed once due")
	}
}

// TestPurgerResumeAndClose: Resume schedules what the store left pending;
// after Close no timer fires.
func TestPurgerResumeAndClose(t *testing.T) {
	soon, later := time.Now().Add(-time.Second), time.Now().Add(100*time.Millisecond)
	store := &fakeStore{
		due:     map[string]time.Time{"old": soon, "late": later},
		pending: []models.Thread{{ID: "old", DeleteAt: &soon}, {ID: "late", DeleteAt: &later}},
	}
	p, removed, relays := newTestPurger(t, store, time.Now)
	if err := p.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	if id := <-removed; id != "old" {
		t.Fatalf("removed %s, want old", id)
	}
	p.Close()
	select {
	case id := <-removed:
		t.Fatalf("removed %s after Close", id)
	case <-time.After(200 * time.Millisecond):
	}
	if len(*relays) != 0 {
		t.Errorf("Resume relayed %v; each instance resumes its own", *relays)
	}
}
