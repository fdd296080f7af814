package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Full-text search over a user's messages (docs/DESIGN.md §7): the text of
// human and AI messages and the results of the task tool (a card's
// result), in one index per store, kept in step with messages by triggers
// so that every path that writes or removes a message (the Writer, a
// thread's delete and purge, a copy) keeps it true without knowing of it.
//
// SQLite: an FTS5 table, message_search(body, owner), keyed by the
// message's rowid. PostgreSQL: a table of tsvectors with a GIN index. Each
// document carries its owner as a token of its own, so a search reads the
// intersection of the user's postings and the query's rather than every
// user's matches (the benchmark's 1,000,000 messages: docs/PERFORMANCE.md).

// ErrSearchQuery is Search's answer to a query with no word in it.
var ErrSearchQuery = errors.New("store: the search has no word to look for")

// searchBodyMax bounds the characters of a message that are indexed: a
// tool's output may be megabytes, and PostgreSQL refuses a tsvector over
// 1 MB, which would fail the Writer's commit.
const searchBodyMax = 100000

// The snippet's marks around each match, private-use characters that a
// chat message does not hold; SnippetParts reads them back.
const (
	markOpen  = '\uE000'
	markClose = '\uE001'
)

// The messages searched: human and AI messages, and the results of the
// task tool (a card's). These are agent's names (TypeHuman, TypeAI,
// TypeTool, ToolTask); models knows nothing of agent, so server's
// TestSearchedTypesAreAgents ties them.
const (
	SearchedHuman = "human"
	SearchedAI    = "ai"
	SearchedTool  = "tool"
	SearchedTask  = "task"
)

// searchDoc is the SQL condition on a message row (new. or m.) that puts
// it in the index.
func searchDoc(row string) string {
	return fmt.Sprintf("%[1]s.content <> '' AND (%[1]s.type IN ('%[2]s', '%[3]s') OR (%[1]s.type = '%[4]s' AND %[1]s.name = '%[5]s'))",
		row, SearchedHuman, SearchedAI, SearchedTool, SearchedTask)
}

// SearchHit is one message that matched a search.
type SearchHit struct {
	ThreadID    string
	ThreadTitle string
	MessageID   string
	RunID       string
	// ToolCallID is the task's id when the message is a card's result.
	ToolCallID string
	Type       string
	Seq        int64
	CreatedAt  time.Time
	// Snippet is a short excerpt around the matches, each between
	// markOpen and markClose: read it with SnippetParts.
	Snippet string
}

// SnippetPart is a piece of a snippet: a match or the text between.
type SnippetPart struct {
	Text  string
	Match bool
}

// SnippetParts splits the hit's snippet into its matches and the text
// between. A mark the message itself held cannot open a part that never
// closes: every part is whole.
func (h SearchHit) SnippetParts() []SnippetPart {
	var parts []SnippetPart
	var b strings.Builder
	match := false
	flush := func() {
		if b.Len() > 0 {
			parts = append(parts, SnippetPart{Text: b.String(), Match: match})
			b.Reset()
		}
	}
	for _, r := range h.Snippet {
		switch {
		case r == markOpen && !match, r == markClose && match:
			flush()
			match = !match
		case r == markOpen, r == markClose:
		default:
			b.WriteRune(r)
		}
	}
	flush()
	return parts
}

// SearchWords splits a query into the words Search looks for: runs of
// letters and digits and what joins them (example.com, don't), each
// with a letter or a digit; an empty result is ErrSearchQuery.
func SearchWords(q string) []string {
	var words []string
	for _, f := range strings.Fields(q) {
		if strings.IndexFunc(f, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0 {
			words = append(words, f)
		}
	}
	return words
}

// Search returns up to limit of userID's messages that hold every word
// of q, best first (bm25 on SQLite, ts_rank on PostgreSQL), skipping the
// first offset; messages of deleted threads are not found.
func (s *Store) Search(ctx context.Context, userID, q string, limit, offset int) ([]SearchHit, error) {
	words := SearchWords(q)
	if len(words) == 0 {
		return nil, ErrSearchQuery
	}
	var hits []SearchHit
	var err error
	if s.pg {
		hits, err = s.searchPostgres(ctx, userID, strings.Join(words, " "), limit, offset)
	} else {
		hits, err = s.searchSQLite(ctx, userID, words, limit, offset)
	}
	if err != nil {
		return nil, fmt.Errorf("store: search: %w", err)
	}
	return hits, nil
}

// ownerToken is the word that stands for userID in the index; both
// stores make it the same way (ownerTokenSQL), and a UUID's makes one
// word of letters and digits for either parser.
func ownerToken(userID string) string {
	return "u" + strings.ToLower(strings.ReplaceAll(userID, "-", ""))
}

// ownerTokenSQL is ownerToken in SQL, of the column col.
func ownerTokenSQL(col string) string {
	return "'u' || lower(replace(" + col + ", '-', ''))"
}
