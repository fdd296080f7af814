package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"herd/models"
)

// runEndOf decodes the run.end of runID among the thread's events.
func (h *harness) runEndOf(runID string) RunEnd {
	h.t.Helper()
	es, _, err := h.store.Events(context.Background(), h.thread, models.EventFilter{RunID: runID, EventTypes: []string{eventRunEnd}})
	if err != nil || len(es) != 1 {
		h.t.Fatalf("run.end of %s: %d events, %v", runID, len(es), err)
	}
	p, err := PayloadOf(&es[0])
	if err != nil {
		h.t.Fatal(err)
	}
	return p.(RunEnd)
}

// TestFailureKeepsPartialAnswer: a provider that fails after streaming
// part of the answer leaves that part saved, marked incomplete, and a
// notice in plain words on run.end; the detail stays the run's error.
func TestFailureKeepsPartialAnswer(t *testing.T) {
	for _, c := range []struct {
		name       string
		err        error
		timeout    int
		wantNotice string
	}{
		{"server error", &StatusError{Status: 502, Err: fmt.Errorf("%w: gpt: HTTP 502 Bad Gateway: upstream", ErrProvider)}, 0, "The model provider failed (HTTP 502): the fault is on its side. Retry in a moment."},
		{"timeout", fmt.Errorf("%w: gpt: timed out after 2m0s (timeout_seconds): %w", ErrProvider, context.DeadlineExceeded), 120, "The model server stopped answering (timeout after 120 s). Retry; if it keeps happening, an admin can raise timeout_seconds in herd.yaml."},
	} {
		t.Run(c.name, func(t *testing.T) {
			lead := llmFunc(func(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
				onDelta("The first half of ")
				onDelta("an answer")
				return Response{}, c.err
			})
			m := model("gpt", lead)
			m.Config.TimeoutSeconds = c.timeout
			h := newHarness(t, harnessConfig{models: []*Model{m}})
			st := h.run("hello")

			msgs, err := h.store.Messages(context.Background(), h.thread)
			if err != nil {
				t.Fatal(err)
			}
			var partial *models.Message
			for i := range msgs {
				if msgs[i].Type == TypeAI {
					partial = &msgs[i]
				}
			}
			if partial == nil {
				t.Fatal("the partial answer was not kept")
			}
			if partial.Content != "The first half of an answer" {
				t.Errorf("partial = %q", partial.Content)
			}
			var kw map[string]any
			_ = json.Unmarshal(partial.AdditionalKwargs, &kw)
			if kw["incomplete"] != true || kw["stopped"] != nil {
				t.Errorf("kwargs = %s, want incomplete and not stopped", partial.AdditionalKwargs)
			}
			end := h.runEndOf(st.RunID)
			if end.Status != models.RunFailed || end.Notice != c.wantNotice {
				t.Errorf("run.end = %s %q, want failed %q", end.Status, end.Notice, c.wantNotice)
			}
			if row := h.runRow(st.RunID); row.Error != c.err.Error() {
				t.Errorf("run error = %q, want the provider's %q", row.Error, c.err.Error())
			}
		})
	}
}

// TestStopNotice: a stopped run says so; its partial answer is marked
// stopped, not incomplete.
func TestStopNotice(t *testing.T) {
	streamed := make(chan struct{})
	lead := llmFunc(func(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
		onDelta("Half")
		close(streamed)
		<-ctx.Done()
		return Response{}, fmt.Errorf("%w: %w", ErrProvider, ctx.Err())
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("gpt", lead)}})
	st := h.start("hello")
	<-streamed
	if err := h.rt.Cancel(h.thread, st.RunID); err != nil {
		t.Fatal(err)
	}
	h.wait()
	end := h.runEndOf(st.RunID)
	if end.Status != models.RunCancelled || end.Notice != "Stopped by you." {
		t.Errorf("run.end = %s %q", end.Status, end.Notice)
	}
	msgs, _ := h.store.Messages(context.Background(), h.thread)
	last := msgs[len(msgs)-1]
	if last.Type != TypeAI || !strings.Contains(string(last.AdditionalKwargs), `"stopped":true`) || strings.Contains(string(last.AdditionalKwargs), "incomplete") {
		t.Errorf("last message = %s %s, want the stopped partial", last.Type, last.AdditionalKwargs)
	}
}

// TestRetryRegenerateEdit: a Retry answers the same message without a
// second copy of it, and its prompt leaves the replaced answer out; only
// the latest run can be answered again; an Edit replaces its message and
// everything after it, in the prompt too.
func TestRetryRegenerateEdit(t *testing.T) {
	var calls atomic.Int32
	var prompts [][]Message
	lead := llmFunc(func(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
		n := calls.Add(1)
		prompts = append(prompts, req.Messages)
		if n == 1 {
			onDelta("cut")
			return Response{}, fmt.Errorf("%w: down", ErrProvider)
		}
		return reply(fmt.Sprintf("answer %d to %s", n, lastHuman(req)), nil), nil
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("gpt", lead)}})
	ctx := context.Background()
	first := h.run("question")
	retry, err := h.rt.Start(ctx, StartRequest{ThreadID: h.thread, UserID: "u1", RetryOf: first.RunID})
	if err != nil {
		t.Fatal(err)
	}
	if retry.MessageID != "" {
		t.Errorf("a retry wrote message %s", retry.MessageID)
	}
	h.wait()
	if got := prompts[1]; len(got) != 2 || got[1].Type != TypeHuman || got[1].Content != "question" {
		t.Errorf("retry prompt = %+v, want the system prompt and the question alone", got)
	}
	if _, err := h.rt.Start(ctx, StartRequest{ThreadID: h.thread, UserID: "u1", RetryOf: first.RunID}); !errors.Is(err, ErrNotLatest) {
		t.Errorf("retry of an older run: %v, want ErrNotLatest", err)
	}
	second := h.run("follow-up")
	if _, err := h.rt.Start(ctx, StartRequest{ThreadID: h.thread, UserID: "u1", EditOf: retry.RunID}); !errors.Is(err, ErrReplaced) {
		t.Errorf("edit of a retry (no message of its own): %v, want ErrReplaced", err)
	}
	if _, err := h.rt.Start(ctx, StartRequest{ThreadID: h.thread, UserID: "u1", Content: "x", EditOf: "no-such-run"}); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("edit of an unknown run: %v, want ErrNotFound", err)
	}
	if _, err := h.rt.Start(ctx, StartRequest{ThreadID: h.thread, UserID: "u1", Content: "better question", EditOf: first.RunID}); err != nil {
		t.Fatal(err)
	}
	h.wait()
	if got := prompts[len(prompts)-1]; len(got) != 2 || got[1].Content != "better question" {
		t.Errorf("edit prompt = %+v, want the edited question alone", got)
	}
	if _, err := h.rt.Start(ctx, StartRequest{ThreadID: h.thread, UserID: "u1", Content: "again", EditOf: second.RunID}); !errors.Is(err, ErrReplaced) {
		t.Errorf("edit of a replaced message: %v, want ErrReplaced", err)
	}
	msgs, _ := h.store.Messages(ctx, h.thread)
	humans := 0
	for _, m := range msgs {
		if m.Type == TypeHuman {
			humans++
		}
	}
	if humans != 3 { // question, follow-up, better question: nothing deleted, nothing doubled
		t.Errorf("%d human messages stored, want 3", humans)
	}
}

// TestRecoveredRunCanBeRetried: a run a crash cut off says so in plain
// words once recovery closed it, and Retry answers its message.
func TestRecoveredRunCanBeRetried(t *testing.T) {
	var asked atomic.Value
	h := newHarness(t, harnessConfig{models: []*Model{model("m", llmFunc(func(_ context.Context, req Request, _ func(string)) (Response, error) {
		asked.Store(lastHuman(req))
		return reply("answered", nil), nil
	}))}})
	ctx := context.Background()
	open := "00000000-0000-0000-0000-0000000000aa"
	err := h.writer.Write(ctx,
		models.Record{Run: &models.Run{ID: open, ThreadID: h.thread, UserID: "u1", Status: models.RunRunning, ModelName: "m"}},
		models.Record{Message: &models.Message{ID: "00000000-0000-0000-0000-0000000000bb", ThreadID: h.thread, RunID: open, Type: TypeHuman, Content: "cut off"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := h.rt.Recover(ctx, h.store); err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v", n, err)
	}
	if end := h.runEndOf(open); end.Notice != restartNotice {
		t.Errorf("recovered run's notice = %q, want %q", end.Notice, restartNotice)
	}
	if _, err := h.rt.Start(ctx, StartRequest{ThreadID: h.thread, UserID: "u1", RetryOf: open}); err != nil {
		t.Fatal(err)
	}
	h.wait()
	if got, _ := asked.Load().(string); got != "cut off" {
		t.Errorf("the retry answered %q, want the cut-off message", got)
	}
}

// TestRetryOnTheRunEnd: a Retry sent the moment the run's end is
// committed (a page's Retry appears with the run.end frame, before the
// run has let go of the thread) waits for that run instead of a 409.
func TestRetryOnTheRunEnd(t *testing.T) {
	ended := make(chan string, 1)
	lead := llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
		return reply("answer", nil), nil
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("gpt", lead)}, onCommit: func(recs []models.Record) {
		for _, r := range recs {
			if r.Event != nil && r.Event.EventType == EventRunEnd {
				select {
				case ended <- r.Event.RunID:
				default:
				}
			}
		}
	}})
	first := h.start("question")
	if got := <-ended; got != first.RunID {
		t.Fatalf("run.end of %s, want %s", got, first.RunID)
	}
	retry, err := h.rt.Start(context.Background(), StartRequest{ThreadID: h.thread, UserID: "u1", RetryOf: first.RunID})
	if err != nil {
		t.Fatalf("a Retry on the run's end: %v", err)
	}
	h.wait()
	if retry.RunID == first.RunID {
		t.Fatal("the retry is the first run")
	}
}

// TestVersionsPicked: a Regenerate and an Edit each add a version beside
// the run they replace; picking an older version shows it again, with
// what followed it, and the next run's lead is given that version's
// history (docs/DESIGN.md §3).
func TestVersionsPicked(t *testing.T) {
	var calls atomic.Int32
	var prompts [][]Message
	lead := llmFunc(func(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
		n := calls.Add(1)
		prompts = append(prompts, req.Messages)
		return reply(fmt.Sprintf("answer %d to %s", n, lastHuman(req)), nil), nil
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("gpt", lead)}})
	ctx := context.Background()
	first := h.run("question")
	second := h.run("follow-up")
	regen, err := h.rt.Start(ctx, StartRequest{ThreadID: h.thread, UserID: "u1", RetryOf: second.RunID})
	if err != nil {
		t.Fatal(err)
	}
	h.wait()
	shown := func() Replaced {
		runs, err := h.store.Runs(ctx, h.thread)
		if err != nil {
			t.Fatal(err)
		}
		return ReplacedIn(runs)
	}
	rp := shown()
	if got := rp.Versions(regen.RunID); !slices.Equal(got, []string{second.RunID, regen.RunID}) || rp.Latest() != regen.RunID || !rp.AnswerHidden(second.RunID) {
		t.Fatalf("after a Regenerate: versions %v, latest %s, want [%s %s] and the new one shown", got, rp.Latest(), second.RunID, regen.RunID)
	}

	// The older version, picked, is shown and followed.
	if err := h.store.PickRun(ctx, h.thread, second.RunID, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	rp = shown()
	if rp.Latest() != second.RunID || rp.AnswerHidden(second.RunID) || !rp.AnswerHidden(regen.RunID) || !slices.Equal(rp.Versions(second.RunID), []string{second.RunID, regen.RunID}) {
		t.Fatalf("after picking the first version: latest %s, versions %v", rp.Latest(), rp.Versions(second.RunID))
	}
	third := h.run("next")
	got := prompts[len(prompts)-1]
	var texts []string
	for _, m := range got[1:] {
		texts = append(texts, m.Content)
	}
	if want := []string{"question", "answer 1 to question", "follow-up", "answer 2 to follow-up", "next"}; !slices.Equal(texts, want) {
		t.Errorf("the next run's history = %q, want the picked version's %q", texts, want)
	}
	if _, err := h.rt.Start(ctx, StartRequest{ThreadID: h.thread, UserID: "u1", RetryOf: regen.RunID}); !errors.Is(err, ErrNotLatest) {
		t.Errorf("retry of a version not shown: %v, want ErrNotLatest", err)
	}

	// An Edit of the first message is a version of the first run; picking
	// the first back shows everything that followed it.
	edit, err := h.rt.Start(ctx, StartRequest{ThreadID: h.thread, UserID: "u1", Content: "better question", EditOf: first.RunID})
	if err != nil {
		t.Fatal(err)
	}
	h.wait()
	rp = shown()
	if !slices.Equal(rp.Versions(edit.RunID), []string{first.RunID, edit.RunID}) || rp.Latest() != edit.RunID || !rp.Whole(third.RunID) {
		t.Fatalf("after an Edit: versions %v, latest %s", rp.Versions(edit.RunID), rp.Latest())
	}
	if err := h.store.PickRun(ctx, h.thread, first.RunID, time.Now().Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	rp = shown()
	if rp.Latest() != third.RunID || !rp.Shown(second.RunID) || !rp.Whole(edit.RunID) {
		t.Errorf("the first version picked back: latest %s (want %s), second shown %v", rp.Latest(), third.RunID, rp.Shown(second.RunID))
	}
}

// TestContinueAfterStop: Continue after a Stop gives the model the
// answer so far and ContinueNote, and saves one answer that starts with
// the stopped text; the thread shows it alone, without the stopped one
// or its end, and only a stopped latest run can be continued.
func TestContinueAfterStop(t *testing.T) {
	streamed := make(chan struct{}, 1)
	var calls atomic.Int32
	var prompts [][]Message
	lead := llmFunc(func(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
		prompts = append(prompts, req.Messages)
		calls.Add(1)
		if last := req.Messages[len(req.Messages)-1]; last.Content == "first" {
			return reply("answer", nil), nil
		} else if last.Content == "tell me" {
			onDelta("The first words")
			streamed <- struct{}{}
			<-ctx.Done()
			return Response{}, fmt.Errorf("%w: %w", ErrProvider, ctx.Err())
		}
		onDelta(" and the rest.")
		return reply(" and the rest.", nil), nil
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("gpt", lead)}})
	ctx := context.Background()
	done := h.run("first")
	st := h.start("tell me")
	<-streamed
	if err := h.rt.Cancel(h.thread, st.RunID); err != nil {
		t.Fatal(err)
	}
	h.wait()
	if _, err := h.rt.Start(ctx, StartRequest{ThreadID: h.thread, UserID: "u1", RetryOf: done.RunID, Continue: true}); !errors.Is(err, ErrNotLatest) && !errors.Is(err, ErrNotStopped) {
		t.Errorf("continue of a completed older run: %v, want a refusal", err)
	}
	cont, err := h.rt.Start(ctx, StartRequest{ThreadID: h.thread, UserID: "u1", RetryOf: st.RunID, Continue: true})
	if err != nil {
		t.Fatal(err)
	}
	h.wait()
	got := prompts[len(prompts)-1]
	if n := len(got); n < 2 || got[n-2].Type != TypeAI || got[n-2].Content != "The first words" || got[n-1].Content != ContinueNote {
		t.Errorf("the continuing call ends %+v, want the stopped text and ContinueNote", got[max(0, len(got)-2):])
	}
	msgs, _ := h.store.Messages(ctx, h.thread)
	runs, _ := h.store.Runs(ctx, h.thread)
	rp := ReplacedIn(runs)
	var shown []string
	for _, m := range msgs {
		if !rp.FromThread(&m) && m.Type == TypeAI {
			shown = append(shown, m.RunID+":"+m.Content)
		}
	}
	want := []string{done.RunID + ":" + "answer", cont.RunID + ":The first words and the rest."}
	if len(shown) != 2 || shown[1] != want[1] {
		t.Errorf("the thread shows answers %q, want the first and %q", shown, want[1])
	}
	if !rp.Continued(st.RunID) || rp.AnswerHidden(st.RunID) {
		t.Errorf("the stopped run: continued %v, hidden %v", rp.Continued(st.RunID), rp.AnswerHidden(st.RunID))
	}
	if _, err := h.rt.Start(ctx, StartRequest{ThreadID: h.thread, UserID: "u1", RetryOf: cont.RunID, Continue: true}); !errors.Is(err, ErrNotStopped) {
		t.Errorf("continue of a completed run: %v, want ErrNotStopped", err)
	}
}

// TestContinueAfterACut: an answer the model's output limit cut ends the
// run completed, with the cut noted and Continue allowed; Continue goes on
// from the cut text as after a Stop.
func TestContinueAfterACut(t *testing.T) {
	var prompts [][]Message
	lead := llmFunc(func(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
		prompts = append(prompts, req.Messages)
		if last := req.Messages[len(req.Messages)-1]; last.Content == ContinueNote {
			return reply(" and the end.", nil), nil
		}
		r := reply("A long answer, cut", nil)
		r.Cut = true
		return r, nil
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("gpt", lead)}})
	ctx := context.Background()
	first := h.run("write a lot")
	end := h.runEndOf(first.RunID)
	if end.Status != models.RunCompleted || !end.Cut || end.Notice != CutNotice {
		t.Fatalf("run.end of a cut answer = %s cut %v %q", end.Status, end.Cut, end.Notice)
	}
	cont, err := h.rt.Start(ctx, StartRequest{ThreadID: h.thread, UserID: "u1", RetryOf: first.RunID, Continue: true})
	if err != nil {
		t.Fatal(err)
	}
	h.wait()
	got := prompts[len(prompts)-1]
	if n := len(got); got[n-2].Content != "A long answer, cut" || got[n-1].Content != ContinueNote {
		t.Errorf("the continuing call ends %+v", got[len(got)-2:])
	}
	msgs, _ := h.store.Messages(ctx, h.thread)
	runs, _ := h.store.Runs(ctx, h.thread)
	rp := ReplacedIn(runs)
	var shown []string
	for _, m := range msgs {
		if !rp.FromThread(&m) && m.Type == TypeAI {
			shown = append(shown, m.Content)
		}
	}
	if !slices.Equal(shown, []string{"A long answer, cut and the end."}) {
		t.Errorf("the thread shows %q", shown)
	}
	if !rp.Continued(first.RunID) || rp.Versions(cont.RunID) != nil {
		t.Errorf("continued %v, versions %v", rp.Continued(first.RunID), rp.Versions(cont.RunID))
	}
}
