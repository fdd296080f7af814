package server

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"herd/models"
	"herd/server/render"
	"herd/server/render/rendertest"
)

// seedConversation writes n exchanges (a human question and a long
// Markdown answer) to the thread and returns its last seq.
func (a *testApp) seedConversation(threadID, userID string, n int) int64 {
	a.t.Helper()
	runID := uuid.NewString()
	now := time.Now()
	recs := []models.Record{{Run: &models.Run{ID: runID, ThreadID: threadID, UserID: userID, Status: models.RunCompleted, ModelName: "demo-fast", StartedAt: now, EndedAt: &now}}}
	for i := range n {
		recs = append(recs,
			models.Record{Message: &models.Message{ID: uuid.NewString(), ThreadID: threadID, RunID: runID, Type: "human", Content: fmt.Sprintf("question %d", i)}},
			models.Record{Message: &models.Message{ID: uuid.NewString(), ThreadID: threadID, RunID: runID, Type: "ai", ModelName: "demo-fast", Content: rendertest.Answer(i)}})
	}
	if err := a.writer.Write(context.Background(), recs...); err != nil {
		a.t.Fatal(err)
	}
	last, err := a.store.LastSeq(context.Background(), threadID)
	if err != nil {
		a.t.Fatal(err)
	}
	return last
}

// replayAll connects to the thread from seq 0 and reads until seq last.
func (u *user) replayAll(threadID string, last int64) error {
	conn, err := u.dial(threadID, 0)
	if err != nil {
		return err
	}
	defer conn.Close()
	seqs, err := collect(conn, last, 30*time.Second)
	if err != nil {
		return err
	}
	if int64(len(seqs)) != last {
		return fmt.Errorf("%d frames, want %d", len(seqs), last)
	}
	return nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReplayStorm reconnects to a thread of 400 long Markdown answers
// (800 messages) from seq 0 and reads the whole replay, one reconnect per
// op, with the renderer's cache off (render-each, what every connect cost
// before) and on (cached). cpu-ms/op is the process's CPU time (server and
// client share it) per reconnect.
func BenchmarkReplayStorm(b *testing.B) {
	b.Run("render-each", func(b *testing.B) { benchReplay(b, render.NewMarkdownCache(0)) })
	b.Run("cached", func(b *testing.B) { benchReplay(b, render.NewMarkdown()) })
}

func benchReplay(b *testing.B, md *render.Markdown) {
	a := newApp(b, func(c *appConfig) { c.markdown = md })
	u := a.newUser("ann@example.com", false)
	th := u.newThread("big")
	last := a.seedConversation(th, u.id, 400)
	if err := u.replayAll(th, last); err != nil { // warms the cache, as the first client would
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, renders0 := cpuTime(), md.Renders()
	for range b.N {
		if err := u.replayAll(th, last); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(md.Renders()-renders0)/float64(b.N), "renders/op")
}
