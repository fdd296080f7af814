package models

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"herd/internal/pgtest"
)

// searchFixture is a store with two users' threads and a writer.
type searchFixture struct {
	t      *testing.T
	s      *Store
	w      *Writer
	ctx    context.Context
	alice  string
	bob    string
	thread map[string]*Thread
}

func newSearchFixture(t *testing.T, d dbDriver) *searchFixture {
	t.Helper()
	s := d.newStore(t)
	w := s.NewWriter(WriterOptions{})
	t.Cleanup(w.Close)
	f := &searchFixture{t: t, s: s, w: w, ctx: context.Background(), alice: uuid.NewString(), bob: uuid.NewString(), thread: map[string]*Thread{}}
	for _, name := range []string{"alice", "alice2", "bob"} {
		owner := f.alice
		if name == "bob" {
			owner = f.bob
		}
		th, err := s.CreateThread(f.ctx, owner, name+"'s thread")
		if err != nil {
			t.Fatal(err)
		}
		f.thread[name] = th
	}
	return f
}

// write commits a message of kind ("human", "ai", "tool:task", "tool:ls")
// in thread and returns its id.
func (f *searchFixture) write(thread, kind, content string) string {
	f.t.Helper()
	typ, name, _ := strings.Cut(kind, ":")
	m := &Message{ID: uuid.NewString(), ThreadID: f.thread[thread].ID, RunID: "r1", Type: typ, Name: name, Content: content}
	if typ == "tool" {
		m.ToolCallID = "call-" + m.ID[:8]
	}
	if err := f.w.Write(f.ctx, Record{Message: m}); err != nil {
		f.t.Fatal(err)
	}
	return m.ID
}

func (f *searchFixture) search(user, q string) []SearchHit {
	f.t.Helper()
	hits, err := f.s.Search(f.ctx, user, q, 20, 0)
	if err != nil {
		f.t.Fatalf("search %q: %v", q, err)
	}
	return hits
}

func ids(hits []SearchHit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.MessageID
	}
	return out
}

// matches is the matched words of a hit's snippet.
func matches(h SearchHit) []string {
	var out []string
	for _, p := range h.SnippetParts() {
		if p.Match {
			out = append(out, p.Text)
		}
	}
	return out
}

// TestSearchRanksAndHighlights: human and AI messages and a card's result
// are found, other tools' output is not; the message that says the word
// most comes first; the snippet marks the words, in the text's own case,
// and keeps the rest as written (escaping is the page's).
func TestSearchRanksAndHighlights(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		f := newSearchFixture(t, d)
		asked := f.write("alice", "human", "Tell me about the zebra, please.")
		answer := f.write("alice", "ai", "The Zebra is a striped horse. A zebra lives in Africa; every zebra is unique.")
		card := f.write("alice2", "tool:task", "Report: the zebra population was counted.")
		f.write("alice", "tool:ls", "zebra.txt")
		f.write("alice", "ai", "Nothing to see here.")
		hostile := f.write("alice", "ai", `<script>alert("zebra")</script> <b>bold</b> quagga`)

		hits := f.search(f.alice, "zebra")
		if got := ids(hits); len(got) != 4 || got[0] != answer || !slices.Contains(got, asked) || !slices.Contains(got, card) || !slices.Contains(got, hostile) {
			t.Fatalf("search zebra = %v, want %s first, then %s, %s and %s", got, answer, asked, card, hostile)
		}
		top := hits[0]
		if got := matches(top); !slices.Equal(got, []string{"Zebra", "zebra", "zebra"}) {
			t.Errorf("top snippet's matches = %q (snippet %q), want Zebra, zebra, zebra", got, top.Snippet)
		}
		if top.ThreadID != f.thread["alice"].ID || top.ThreadTitle != "alice's thread" || top.Type != "ai" || top.Seq == 0 || top.CreatedAt.IsZero() {
			t.Errorf("top hit = %+v", top)
		}
		for _, h := range hits {
			if h.MessageID == card && (h.ToolCallID == "" || h.Type != "tool" || h.ThreadID != f.thread["alice2"].ID) {
				t.Errorf("card hit = %+v, want its task's id and thread", h)
			}
		}

		if got := ids(f.search(f.alice, "zebra AFRICA")); !slices.Equal(got, []string{answer}) {
			t.Errorf("search zebra AFRICA = %v, want only %s (every word, any case)", got, answer)
		}
		hit := f.search(f.alice, "quagga")
		if len(hit) != 1 {
			t.Fatalf("search quagga = %v", ids(hit))
		}
		var text strings.Builder
		for _, p := range hit[0].SnippetParts() {
			text.WriteString(p.Text)
		}
		// SQLite's snippet is the text as written; PostgreSQL's headline
		// drops HTML tags. Either way escaping is the page's.
		want := `<b>bold</b> `
		if d.name == "postgres" {
			want = "bold "
		}
		if !strings.Contains(text.String(), want) || !slices.Equal(matches(hit[0]), []string{"quagga"}) {
			t.Errorf("hostile snippet parts = %+v, want %q and quagga matched", hit[0].SnippetParts(), want)
		}
		if _, err := f.s.Search(f.ctx, f.alice, ` "-" `, 20, 0); !errors.Is(err, ErrSearchQuery) {
			t.Errorf("a query without words: %v, want ErrSearchQuery", err)
		}
		if got := f.search(f.alice, `zeb "ra`); len(got) != 0 {
			t.Errorf("half words and a stray quote found %v, want nothing and no error", ids(got))
		}
	})
}

// TestSearchIsTheOwners: a user finds only their own threads' messages,
// even with the other's words and with the other's id typed as a word.
func TestSearchIsTheOwners(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		f := newSearchFixture(t, d)
		mine := f.write("alice", "human", "the secret plan")
		theirs := f.write("bob", "human", "the secret plan of bob")
		if got := ids(f.search(f.alice, "secret plan")); !slices.Equal(got, []string{mine}) {
			t.Errorf("alice finds %v, want only %s", got, mine)
		}
		if got := ids(f.search(f.bob, "secret")); !slices.Equal(got, []string{theirs}) {
			t.Errorf("bob finds %v, want only %s", got, theirs)
		}
		if got := f.search(f.alice, ownerToken(f.bob)); len(got) != 0 {
			t.Errorf("alice searching bob's owner word finds %v", ids(got))
		}
		if got := f.search(uuid.NewString(), "secret"); len(got) != 0 {
			t.Errorf("a stranger finds %v", ids(got))
		}
	})
}

// TestSearchFollowsWrites: the index follows a message's change and
// removal, a thread's delete (hidden), undo (back) and purge (gone, its
// index rows too), and paging by offset.
func TestSearchFollowsWrites(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		f := newSearchFixture(t, d)
		id := f.write("alice", "ai", "an okapi appears")
		other := f.write("alice2", "ai", "okapi okapi")
		if err := f.s.w.Exec("UPDATE messages SET content = ? WHERE id = ?", "a tapir appears", id).Error; err != nil {
			t.Fatal(err)
		}
		if got := ids(f.search(f.alice, "okapi")); !slices.Equal(got, []string{other}) {
			t.Errorf("after an edit okapi finds %v, want %s", got, other)
		}
		if got := ids(f.search(f.alice, "tapir")); !slices.Equal(got, []string{id}) {
			t.Errorf("after an edit tapir finds %v, want %s", got, id)
		}
		if err := f.s.w.Exec("DELETE FROM messages WHERE id = ?", id).Error; err != nil {
			t.Fatal(err)
		}
		if got := f.search(f.alice, "tapir"); len(got) != 0 {
			t.Errorf("a deleted message is found: %v", ids(got))
		}

		th := f.thread["alice2"]
		at := time.Now().Add(time.Minute)
		if err := f.s.ScheduleThreadDelete(f.ctx, f.alice, th.ID, at); err != nil {
			t.Fatal(err)
		}
		if got := f.search(f.alice, "okapi"); len(got) != 0 {
			t.Errorf("a deleted thread's message is found: %v", ids(got))
		}
		if _, err := f.s.RestoreThread(f.ctx, f.alice, th.ID); err != nil {
			t.Fatal(err)
		}
		if got := ids(f.search(f.alice, "okapi")); !slices.Equal(got, []string{other}) {
			t.Errorf("after undo okapi finds %v, want %s", got, other)
		}
		if err := f.s.ScheduleThreadDelete(f.ctx, f.alice, th.ID, at); err != nil {
			t.Fatal(err)
		}
		if err := f.s.PurgeThread(f.ctx, th.ID, at); err != nil {
			t.Fatal(err)
		}
		if n := f.indexRows(); n != 0 {
			t.Errorf("%d index rows left after the purge and the delete, want 0", n)
		}

		var want []string
		for i := range 5 {
			want = append(want, f.write("alice", "human", strings.Repeat("gnu ", 5-i)+"end"))
		}
		var got []string
		for off := 0; off < 6; off += 2 {
			page, err := f.s.Search(f.ctx, f.alice, "gnu", 2, off)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids(page)...)
		}
		if !slices.Equal(got, want) {
			t.Errorf("paged results %v, want %v (most gnus first)", got, want)
		}
	})
}

// indexRows counts the index's documents.
func (f *searchFixture) indexRows() int {
	f.t.Helper()
	var n int
	if err := f.s.r.Raw("SELECT count(*) FROM message_search").Scan(&n).Error; err != nil {
		f.t.Fatal(err)
	}
	if !f.s.pg {
		var keys int
		if err := f.s.r.Raw("SELECT count(*) FROM message_search_keys").Scan(&keys).Error; err != nil {
			f.t.Fatal(err)
		}
		n += keys
	}
	return n
}

// TestSearchBackfill: a database from before search (no index) gets one
// at its next open, holding the messages already there, and it follows
// the writes after.
func TestSearchBackfill(t *testing.T) {
	path, dsn := filepath.Join(t.TempDir(), "herd.db"), ""
	opens := map[string]func() (*Store, error){
		"sqlite":   func() (*Store, error) { return Open(path, Options{}) },
		"postgres": func() (*Store, error) { return OpenPostgres(dsn, Options{}) },
	}
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		if d.name == "postgres" {
			dsn = pgtest.DSN(t)
		}
		s, err := opens[d.name]()
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		th, err := s.CreateThread(ctx, "u1", "old")
		if err != nil {
			t.Fatal(err)
		}
		if err := dropSearchIndex(s); err != nil {
			t.Fatal(err)
		}
		w := s.NewWriter(WriterOptions{})
		old := &Message{ID: uuid.NewString(), ThreadID: th.ID, RunID: "r", Type: "ai", Content: "an old capybara"}
		err = w.Write(ctx, Record{Message: old})
		w.Close()
		_ = s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if s, err = opens[d.name](); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		w = s.NewWriter(WriterOptions{})
		defer w.Close()
		recent := &Message{ID: uuid.NewString(), ThreadID: th.ID, RunID: "r", Type: "human", Content: "capybara again"}
		if err := w.Write(ctx, Record{Message: recent}); err != nil {
			t.Fatal(err)
		}
		hits, err := s.Search(ctx, "u1", "capybara", 20, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(hits); len(got) != 2 || !slices.Contains(got, old.ID) || !slices.Contains(got, recent.ID) {
			t.Errorf("after the migration capybara finds %v, want %s and %s", got, old.ID, recent.ID)
		}
	})
}
