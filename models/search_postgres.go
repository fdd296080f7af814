package models

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"gorm.io/gorm"
)

// The PostgreSQL index: a tsvector per message, with a GIN index, kept by
// triggers on messages (a TRUNCATE too: a copy's Replace empties messages
// that way). The owner is a lexeme of the document (ownerToken), so the
// GIN scan intersects the user's postings with the query's. Words are
// parsed by the 'simple' configuration: lower-cased, not stemmed, as
// SQLite's unicode61 does; ASCII punctuation is a space first, as there,
// since PostgreSQL's parser would keep example.com whole and drop the
// words inside an HTML tag.
func pgSearchDoc(row string) string {
	return `to_tsvector('simple', translate(left(` + row + `.content, ` + strconv.Itoa(searchBodyMax) + `), ` + pgPunct + `, ` + pgSpaces + `))` +
		` || array_to_tsvector(ARRAY[` + ownerTokenSQL("t.user_id") + `])`
}

// asciiPunct is what pgSearchDoc and pgWords make a space.
const asciiPunct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"

var (
	pgPunct  = "'" + strings.ReplaceAll(asciiPunct, "'", "''") + "'"
	pgSpaces = "'" + strings.Repeat(" ", len(asciiPunct)) + "'"
)

// pgWords is the query's text as pgSearchDoc reads a message's.
func pgWords(q string) string {
	return strings.Map(func(r rune) rune {
		if strings.ContainsRune(asciiPunct, r) {
			return ' '
		}
		return r
	}, q)
}

func pgSearchDDL() []string {
	add := `INSERT INTO message_search (message_id, doc) SELECT NEW.id, ` + pgSearchDoc("NEW") + ` FROM threads t WHERE t.id = NEW.thread_id`
	return []string{
		`CREATE TABLE message_search (message_id varchar(36) PRIMARY KEY, doc tsvector NOT NULL)`,
		`INSERT INTO message_search (message_id, doc) SELECT m.id, ` + pgSearchDoc("m") +
			` FROM messages m JOIN threads t ON t.id = m.thread_id WHERE ` + searchDoc("m"),
		`CREATE INDEX idx_message_search_doc ON message_search USING gin (doc)`,
		`CREATE OR REPLACE FUNCTION message_search_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP IN ('UPDATE', 'DELETE') THEN
		DELETE FROM message_search WHERE message_id = OLD.id;
	END IF;
	IF TG_OP IN ('INSERT', 'UPDATE') AND ` + searchDoc("NEW") + ` THEN
		` + add + `;
	END IF;
	RETURN NULL;
END $$`,
		`CREATE OR REPLACE FUNCTION message_search_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	TRUNCATE message_search;
	RETURN NULL;
END $$`,
		`CREATE TRIGGER message_search_sync AFTER INSERT OR DELETE OR UPDATE OF content, type, name, thread_id ON messages
	FOR EACH ROW EXECUTE FUNCTION message_search_sync()`,
		`CREATE TRIGGER message_search_truncate AFTER TRUNCATE ON messages FOR EACH STATEMENT EXECUTE FUNCTION message_search_truncate()`,
	}
}

// migrateSearchPostgres creates the index, filled from the messages
// already there, the first time; it runs in the migration's transaction,
// under its lock.
func migrateSearchPostgres(tx *gorm.DB) error {
	var exists bool
	if err := tx.Raw("SELECT to_regclass('message_search') IS NOT NULL").Scan(&exists).Error; err != nil {
		return fmt.Errorf("search index: %w", err)
	}
	if exists {
		return nil
	}
	for _, q := range pgSearchDDL() {
		if err := tx.Exec(q).Error; err != nil {
			return fmt.Errorf("search index: %w", err)
		}
	}
	return nil
}

// pgHeadline asks ts_headline for up to two fragments around the
// matches, between the marks SnippetParts reads.
var pgHeadline = "StartSel=" + string(markOpen) + ", StopSel=" + string(markClose) +
	`, MaxWords=24, MinWords=10, MaxFragments=2, FragmentDelimiter=" … "`

// searchPostgres ranks the user's matches in the index alone (the GIN
// index finds them, the owner's lexeme with the query's words) and takes
// the page, then reads the page's rows and makes their headlines:
// ts_headline parses the whole text, and joining every match would cost
// per match rather than per result.
func (s *Store) searchPostgres(ctx context.Context, userID, q string, limit, offset int) ([]SearchHit, error) {
	var hits []SearchHit
	err := s.r.WithContext(ctx).Raw(`
WITH page AS MATERIALIZED (
	SELECT message_id, ts_rank_cd(doc, plainto_tsquery('simple', @q), 1) AS rank
	FROM message_search
	WHERE doc @@ (plainto_tsquery('simple', @q) && CAST(@owner AS tsquery))
	ORDER BY rank DESC, message_id
	LIMIT @limit OFFSET @offset
)
SELECT m.id AS message_id, m.thread_id, t.title AS thread_title, m.run_id, m.tool_call_id, m.type, m.seq, m.created_at,
	ts_headline('simple', left(m.content, `+strconv.Itoa(searchBodyMax)+`), plainto_tsquery('simple', @q), @headline) AS snippet
FROM page
JOIN messages m ON m.id = page.message_id
JOIN threads t ON t.id = m.thread_id
WHERE t.user_id = @user AND t.delete_at IS NULL
ORDER BY page.rank DESC, m.created_at DESC, m.id`,
		map[string]any{"q": pgWords(q), "owner": ownerToken(userID), "user": userID, "limit": limit, "offset": offset, "headline": pgHeadline}).Scan(&hits).Error
	return hits, err
}
