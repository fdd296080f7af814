package server

import (
	"context"
	"errors"
	"testing"

	"herd/agent/event"
	"herd/models"
)

// fakeSettingStore is a SettingStore in a map that can be made to fail.
type fakeSettingStore struct {
	m   map[string]string
	err error
}

func (f *fakeSettingStore) Setting(_ context.Context, key string) (string, error) {
	if f.err != nil {
		return "", f.err
	}
	v, ok := f.m[key]
	if !ok {
		return "", models.ErrNotFound
	}
	return v, nil
}

func (f *fakeSettingStore) SetSetting(_ context.Context, key, value string) error {
	if f.err != nil {
		return f.err
	}
	f.m[key] = value
	return nil
}

type broadcast struct {
	threadID string
	f        event.Frame
}

type fakeBroadcaster struct{ got []broadcast }

func (f *fakeBroadcaster) Publish(threadID, _ string, fr event.Frame) {
	f.got = append(f.got, broadcast{threadID, fr})
}

func TestSettingsLoad(t *testing.T) {
	for _, c := range []struct {
		name   string
		stored map[string]string
		def    bool
		want   bool
	}{
		{"config default on", nil, true, true},
		{"config default off", nil, false, false},
		{"stored off beats config", map[string]string{settingTokenUsage: "false"}, true, false},
		{"stored on beats config", map[string]string{settingTokenUsage: "true"}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewSettings(context.Background(), &fakeSettingStore{m: c.stored}, c.def)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.TokenUsage(); got != c.want {
				t.Errorf("TokenUsage() = %v, want %v", got, c.want)
			}
		})
	}
	if _, err := NewSettings(context.Background(), &fakeSettingStore{err: errors.New("disk")}, true); err == nil {
		t.Error("NewSettings hid a store error")
	}
}

// TestSettingsChange checks that a change is stored, applied and told to
// open pages, and that a change the store refuses changes nothing.
func TestSettingsChange(t *testing.T) {
	ctx := context.Background()
	store := &fakeSettingStore{m: map[string]string{}}
	s, err := NewSettings(ctx, store, true)
	if err != nil {
		t.Fatal(err)
	}
	pages := &fakeBroadcaster{}
	if was, err := s.SetTokenUsage(ctx, false, pages); err != nil || !was {
		t.Fatalf("turning it off: was %v, %v; want true", was, err)
	}
	if s.TokenUsage() || store.m[settingTokenUsage] != "false" {
		t.Errorf("after turning it off: gate %v, stored %q; want false, \"false\"", s.TokenUsage(), store.m[settingTokenUsage])
	}
	want := broadcast{"", event.Settings{TokenUsage: false}}
	if len(pages.got) != 1 || pages.got[0] != want {
		t.Errorf("pages were told %+v, want %+v", pages.got, want)
	}

	store.err = errors.New("disk full")
	if _, err := s.SetTokenUsage(ctx, true, pages); err == nil {
		t.Error("a refused store write was not reported")
	}
	if s.TokenUsage() || len(pages.got) != 1 {
		t.Errorf("a refused change applied: gate %v, %d frames sent", s.TokenUsage(), len(pages.got))
	}
}

// TestSettingsReload: another instance's change is read and applied; a
// gate no admin ever set reads as the config file's value, not as a
// failure (the cluster would warn and read it again forever, issue 24);
// only a failed read is an error.
func TestSettingsReload(t *testing.T) {
	for _, c := range []struct {
		name        string
		stored      map[string]string
		def         bool
		wantOn      bool
		wantChanged bool
	}{
		{"never set, config on", nil, true, true, false},
		{"never set, config off", nil, false, false, false},
		{"set off elsewhere", map[string]string{settingTokenUsage: "false"}, true, false, true},
		{"set on elsewhere", map[string]string{settingTokenUsage: "true"}, false, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			store := &fakeSettingStore{m: map[string]string{}}
			s, err := NewSettings(ctx, store, c.def)
			if err != nil {
				t.Fatal(err)
			}
			store.m = c.stored
			on, changed, err := s.Reload(ctx)
			if err != nil {
				t.Fatalf("Reload: %v", err)
			}
			if on != c.wantOn || changed != c.wantChanged || s.TokenUsage() != c.wantOn {
				t.Errorf("Reload = %v, changed %v, gate %v; want %v, changed %v", on, changed, s.TokenUsage(), c.wantOn, c.wantChanged)
			}
		})
	}
	s, err := NewSettings(context.Background(), &fakeSettingStore{}, true)
	if err != nil {
		t.Fatal(err)
	}
	s.store = &fakeSettingStore{err: errors.New("connection refused")}
	if _, _, err := s.Reload(context.Background()); err == nil || !s.TokenUsage() {
		t.Errorf("Reload with the store failing: err %v, gate %v; want the error and the gate kept", err, s.TokenUsage())
	}
}

// TestBudgetsSeedAndReload: the config file's default holds until budgets
// are saved; what one instance saves another reads with Reload, and it
// tells the other instances through a settings frame that keeps the gate.
func TestBudgetsSeedAndReload(t *testing.T) {
	ctx := context.Background()
	store := &fakeSettingStore{m: map[string]string{}}
	here, err := NewSettings(ctx, store, false)
	if err != nil {
		t.Fatal(err)
	}
	there, _ := NewSettings(ctx, store, false)
	seed := BudgetRule{Tokens: 500, Period: "day"}
	for _, s := range []*Settings{here, there} {
		if err := s.LoadBudgets(ctx, seed); err != nil {
			t.Fatal(err)
		}
	}
	if r, ok := there.Budgets().rule("ann"); !ok || r != seed {
		t.Fatalf("the seed: %+v %v", r, ok)
	}
	pages := &fakeBroadcaster{}
	saved := &Budgets{Default: BudgetRule{Tokens: 0}, Users: map[string]BudgetRule{"ann": {Tokens: 9, Period: "month"}}}
	if _, err := here.SetBudgets(ctx, saved, pages); err != nil {
		t.Fatal(err)
	}
	if len(pages.got) != 1 || pages.got[0].f != (event.Settings{TokenUsage: false}) {
		t.Errorf("frames sent: %+v", pages.got)
	}
	if _, ok := there.Budgets().rule("bob"); !ok {
		t.Fatal("the other instance changed before it read the store")
	}
	if _, _, err := there.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := there.Budgets().rule("bob"); ok {
		t.Error("the saved default of no budget did not replace the seed")
	}
	if r, ok := there.Budgets().rule("ann"); !ok || r != (BudgetRule{9, "month"}) {
		t.Errorf("ann's own budget after Reload: %+v %v", r, ok)
	}
}
