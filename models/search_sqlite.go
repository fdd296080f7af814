package models

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gorm.io/gorm"
)

// ErrNoFTS5 is Open's answer when this binary's SQLite has no FTS5, which
// search needs: mattn/go-sqlite3 compiles it only under a build tag.
// herd refuses to start rather than serve a search that cannot work.
var ErrNoFTS5 = errors.New("store: this herd was built without SQLite full-text search (FTS5), which search needs; " +
	"build it with `make build` (or `go build -tags sqlite_fts5 .`), and run tests with `make test` or `go test -tags sqlite_fts5`")

// The SQLite index. messages has a text key, and VACUUM (and VACUUM INTO,
// a backup) may renumber the rowids of such a table, so the index is
// keyed by message_search_keys, whose INTEGER PRIMARY KEY keeps its
// numbers: a key's rowid is its message's rowid in message_search.
// The owner column holds ownerToken; bm25 weighs it 0 ('rank'), so only
// the body ranks.
var sqliteSearchDDL = []string{
	`CREATE TABLE message_search_keys (rowid INTEGER PRIMARY KEY, message_id TEXT NOT NULL UNIQUE)`,
	`CREATE VIRTUAL TABLE message_search USING fts5(body, owner, tokenize = 'unicode61 remove_diacritics 2')`,
	`INSERT INTO message_search(message_search, rank) VALUES ('rank', 'bm25(1.0, 0.0)')`,
}

// sqliteSearchAdd indexes the message row r (new. or m.) of a thread
// that exists.
func sqliteSearchAdd(r string) []string {
	return []string{
		`INSERT INTO message_search_keys (message_id) SELECT ` + r + `.id FROM threads t WHERE t.id = ` + r + `.thread_id AND ` + searchDoc(r),
		`INSERT INTO message_search (rowid, body, owner) SELECT k.rowid, substr(` + r + `.content, 1, ` + strconv.Itoa(searchBodyMax) + `), ` + ownerTokenSQL("t.user_id") +
			` FROM message_search_keys k JOIN threads t ON t.id = ` + r + `.thread_id WHERE k.message_id = ` + r + `.id`,
	}
}

// sqliteSearchRemove forgets the message row r (old.).
func sqliteSearchRemove(r string) []string {
	return []string{
		`DELETE FROM message_search WHERE rowid = (SELECT rowid FROM message_search_keys WHERE message_id = ` + r + `.id)`,
		`DELETE FROM message_search_keys WHERE message_id = ` + r + `.id`,
	}
}

func sqliteTrigger(name, on string, body []string) string {
	return `CREATE TRIGGER IF NOT EXISTS ` + name + ` ` + on + ` BEGIN ` + strings.Join(body, "; ") + `; END`
}

// sqliteSearchTriggers keep the index in step with every write of
// messages, whoever makes it.
func sqliteSearchTriggers() []string {
	return []string{
		sqliteTrigger("message_search_insert", "AFTER INSERT ON messages", sqliteSearchAdd("new")),
		sqliteTrigger("message_search_delete", "AFTER DELETE ON messages", sqliteSearchRemove("old")),
		sqliteTrigger("message_search_update", "AFTER UPDATE OF content, type, name, thread_id ON messages",
			append(sqliteSearchRemove("old"), sqliteSearchAdd("new")...)),
	}
}

// migrateSearchSQLite creates the index, and fills it from the messages
// already there, the first time; after that it only checks the triggers.
func (s *Store) migrateSearchSQLite() error {
	var fts5 bool
	if err := s.w.Raw("SELECT sqlite_compileoption_used('ENABLE_FTS5')").Scan(&fts5).Error; err != nil {
		return fmt.Errorf("search index: %w", err)
	}
	if !fts5 {
		return ErrNoFTS5
	}
	var n int
	if err := s.w.Raw("SELECT count(*) FROM sqlite_master WHERE name = 'message_search'").Scan(&n).Error; err != nil {
		return fmt.Errorf("search index: %w", err)
	}
	return s.w.Transaction(func(tx *gorm.DB) error {
		stmts := sqliteSearchTriggers()
		if n == 0 {
			stmts = append(append(append([]string{}, sqliteSearchDDL...), sqliteBackfill()...), stmts...)
		}
		for _, q := range stmts {
			if err := tx.Exec(q).Error; err != nil {
				return fmt.Errorf("search index: %w", err)
			}
		}
		return nil
	})
}

// sqliteBackfill indexes the messages written before the index was.
func sqliteBackfill() []string {
	return []string{
		`INSERT INTO message_search_keys (message_id) SELECT m.id FROM messages m JOIN threads t ON t.id = m.thread_id WHERE ` + searchDoc("m") + ` ORDER BY m.thread_id, m.seq`,
		`INSERT INTO message_search (rowid, body, owner) SELECT k.rowid, substr(m.content, 1, ` + strconv.Itoa(searchBodyMax) + `), ` + ownerTokenSQL("t.user_id") +
			` FROM message_search_keys k JOIN messages m ON m.id = k.message_id JOIN threads t ON t.id = m.thread_id`,
	}
}

// ftsQuery is the FTS5 query of the owner's messages holding every word:
// each word a quoted phrase, which FTS5 splits with the tokenizer of the
// index, so "example.com" is the two adjacent words the body holds.
func ftsQuery(ownerTok string, words []string) string {
	var b strings.Builder
	b.WriteString(`owner : "` + ownerTok + `" AND body : (`)
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(`"` + strings.ReplaceAll(w, `"`, `""`) + `"`)
	}
	b.WriteByte(')')
	return b.String()
}

// searchSQLite ranks the user's matches in the index alone (the owner's
// word keeps them to the user's) and takes the page, then reads the
// page's rows and makes their snippets: joining every match, or making
// its snippet, would cost per match rather than per result. The page is
// materialized so that SQLite cannot fold it into the outer query.
func (s *Store) searchSQLite(ctx context.Context, userID string, words []string, limit, offset int) ([]SearchHit, error) {
	q := ftsQuery(ownerToken(userID), words)
	var hits []SearchHit
	err := s.r.WithContext(ctx).Raw(`
WITH page AS MATERIALIZED (
	SELECT rowid AS fts, rank FROM message_search WHERE message_search MATCH ? ORDER BY rank, rowid DESC LIMIT ? OFFSET ?
)
SELECT m.id AS message_id, m.thread_id, t.title AS thread_title, m.run_id, m.tool_call_id, m.type, m.seq, m.created_at,
	(SELECT snippet(message_search, 0, char(57344), char(57345), '…', 24)
		FROM message_search WHERE message_search MATCH ? AND rowid = page.fts) AS snippet
FROM page
JOIN message_search_keys k ON k.rowid = page.fts
JOIN messages m ON m.id = k.message_id
JOIN threads t ON t.id = m.thread_id
WHERE t.user_id = ? AND t.delete_at IS NULL
ORDER BY page.rank, m.created_at DESC, m.id`, q, limit, offset, q, userID).Scan(&hits).Error
	return hits, err
}
