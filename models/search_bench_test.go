package models

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"herd/internal/pgtest"
)

// The search benchmark's instance (docs/PERFORMANCE.md "Search (issue
// 26)"): 100 users × 100 threads × 100 messages, 10,000 threads and
// 1,000,000 messages of 10–60 words drawn from 20,000 by Zipf's law, a
// tenth of them cards' results. Built once and kept: SQLite's in
// test-output/search-bench, PostgreSQL's in the schema benchSchema of
// HERD_TEST_POSTGRES_DSN's database.
const (
	benchUsers          = 100
	benchThreadsPerUser = 100
	benchMessages       = 100
	benchVocabulary     = 20000
	benchSchema         = "herd_bench_search_v1"
)

// benchWord is the vocabulary's word of rank i: syllables, so that both
// parsers read it as one word.
func benchWord(i int) string {
	syl := []string{"ka", "lo", "mi", "ren", "tu", "sa", "vo", "ni", "pel", "dor", "ah", "ze", "qui", "bo", "fen", "gru"}
	var b strings.Builder
	for n := i + 16; n > 0; n /= 16 {
		b.WriteString(syl[n%16])
	}
	return b.String()
}

func benchUser(u int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", u) }

// BenchmarkSearch times one search of a user's messages in the instance
// above, per store; p50-ms and p99-ms are the latencies of the queries
// (words of rank 5, 50, 500 and 5,000, and pairs), each by a random user.
func BenchmarkSearch(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		dir := filepath.Join("..", "test-output", "search-bench")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		s, err := Open(filepath.Join(dir, "herd.db"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchSearch(b, s)
	})
	b.Run("postgres", func(b *testing.B) {
		base := os.Getenv(pgtest.EnvDSN)
		if base == "" {
			b.Skip("set " + pgtest.EnvDSN)
		}
		s, err := OpenPostgres(base, Options{})
		if err != nil {
			b.Fatal(err)
		}
		err = s.w.Exec("CREATE SCHEMA IF NOT EXISTS " + benchSchema).Error
		_ = s.Close()
		if err != nil {
			b.Fatal(err)
		}
		if s, err = OpenPostgres(pgtest.WithSearchPath(base, benchSchema), Options{}); err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchSearch(b, s)
	})
}

func benchSearch(b *testing.B, s *Store) {
	ctx := context.Background()
	if err := fillSearchBench(b, s); err != nil {
		b.Fatal(err)
	}
	queries := []struct{ name, q string }{
		{"rank5", benchWord(5)}, {"rank50", benchWord(50)}, {"rank500", benchWord(500)}, {"rank5000", benchWord(5000)},
		{"rank20+rank300", benchWord(20) + " " + benchWord(300)}, {"rank2+rank8", benchWord(2) + " " + benchWord(8)},
	}
	for _, q := range queries {
		hits, err := s.Search(ctx, benchUser(0), q.q, 1000, 0)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%s %q: %d of user 0's messages (first 1,000)", q.name, q.q, len(hits))
	}
	b.Run("mix", func(b *testing.B) { benchQueries(b, s, queries) })
	for _, q := range queries {
		b.Run(q.name, func(b *testing.B) { benchQueries(b, s, queries[slices.Index(queries, q):][:1]) })
	}
}

// benchQueries runs queries in turn, each by a random user, and reports
// their latencies' p50 and p99.
func benchQueries(b *testing.B, s *Store, queries []struct{ name, q string }) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	var took []time.Duration
	i := 0
	for b.Loop() {
		q, user := queries[i%len(queries)].q, benchUser(r.IntN(benchUsers))
		i++
		t0 := time.Now()
		_, err := s.Search(ctx, user, q, 20, 0)
		took = append(took, time.Since(t0))
		if err != nil {
			b.Fatalf("search %q: %v", q, err)
		}
	}
	slices.Sort(took)
	ms := func(p float64) float64 { return float64(took[int(p*float64(len(took)-1))].Microseconds()) / 1000 }
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
}

// fillSearchBench writes the instance unless the store holds it: the
// messages go in with the index's triggers dropped, and the index is made
// after, as a migration makes it for an older database (the backfill).
func fillSearchBench(b *testing.B, s *Store) error {
	var n int64
	if err := s.r.Raw("SELECT count(*) FROM messages").Scan(&n).Error; err != nil {
		return err
	}
	want := int64(benchUsers * benchThreadsPerUser * benchMessages)
	if n == want {
		return nil
	}
	if n != 0 {
		return fmt.Errorf("the benchmark's store holds %d messages, not %d: remove it", n, want)
	}
	start := time.Now()
	if err := dropSearchIndex(s); err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(7, 11))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 5)), 1.1, 1, benchVocabulary-1)
	text := func(words int) string {
		var sb strings.Builder
		for i := range words {
			if i > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(benchWord(int(zipf.Uint64())))
		}
		return sb.String()
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for u := range benchUsers {
		err := s.w.Transaction(func(tx *gorm.DB) error {
			for th := range benchThreadsPerUser {
				tid := fmt.Sprintf("%08d-0000-4000-8000-%012d", u, th)
				if err := tx.Exec("INSERT INTO threads (id, user_id, title, last_seq, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
					tid, benchUser(u), text(4), benchMessages, at, at).Error; err != nil {
					return err
				}
				var sb strings.Builder
				var args []any
				sb.WriteString("INSERT INTO messages (id, thread_id, seq, run_id, type, name, tool_call_id, content, created_at) VALUES ")
				for m := range benchMessages {
					typ, name, call, words := "human", "", "", 10+r.IntN(10)
					switch {
					case m%10 == 9:
						typ, name, call, words = "tool", "task", fmt.Sprintf("call_%d", m), 30+r.IntN(30)
					case m%2 == 1:
						typ, words = "ai", 20+r.IntN(40)
					}
					if m > 0 {
						sb.WriteString(", ")
					}
					sb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
					args = append(args, fmt.Sprintf("%08d-%04d-4000-8000-%012d", u, m, th), tid, m+1, "run", typ, name, call, text(words), at.Add(time.Duration(m)*time.Second))
				}
				if err := tx.Exec(sb.String(), args...).Error; err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	b.Logf("wrote %d messages in %v", want, time.Since(start).Round(time.Second))
	start = time.Now()
	var err error
	if s.pg {
		err = s.w.Transaction(migrateSearchPostgres)
		if err == nil {
			err = s.w.Exec("ANALYZE").Error
		}
	} else if err = s.migrateSearchSQLite(); err == nil {
		err = s.w.Exec("ANALYZE").Error
	}
	b.Logf("indexed them in %v", time.Since(start).Round(time.Second))
	return err
}

// dropSearchIndex leaves s as a herd from before search left it: no
// index, no triggers.
func dropSearchIndex(s *Store) error {
	drop := []string{"DROP TRIGGER message_search_insert", "DROP TRIGGER message_search_delete", "DROP TRIGGER message_search_update",
		"DROP TABLE message_search", "DROP TABLE message_search_keys"}
	if s.pg {
		drop = []string{"DROP TRIGGER message_search_sync ON messages", "DROP TRIGGER message_search_truncate ON messages", "DROP TABLE message_search"}
	}
	for _, q := range drop {
		if err := s.w.Exec(q).Error; err != nil {
			return err
		}
	}
	return nil
}
