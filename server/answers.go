package server

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"herd/agent"
	"herd/models"
	"herd/views"
)

// retryRequest is the optional body of a Retry or Regenerate: the model
// to answer with ("" for the thread's current one).
type retryRequest struct {
	Model string `json:"model"`
}

// apiRunRetry answers the message of the thread's latest run again, as a
// new run that replaces that run's answer (202): Retry after a failure or
// a Stop, Regenerate after an answer (docs/API.md).
func (s *Server) apiRunRetry(c echo.Context) error { return s.answerAgain(c, false) }

// apiRunContinue continues the answer of the thread's latest run, which
// the user stopped or the model's output limit cut, as a new run whose
// answer starts with it (202). 409 for a run that was neither, or is not
// the latest.
func (s *Server) apiRunContinue(c echo.Context) error { return s.answerAgain(c, true) }

// answerAgain starts the run that answers run run_id's message again
// (Retry, Regenerate: a body may name the model) or, with cont, goes on
// with its answer (Continue, on the thread's model).
func (s *Server) answerAgain(c echo.Context, cont bool) error {
	t, err := s.ownThread(c)
	if err != nil {
		return err
	}
	runID, err := pathID(c, "run_id", "run")
	if err != nil {
		return err
	}
	var req retryRequest
	if !cont && c.Request().ContentLength != 0 {
		if err := bindJSON(c, &req); err != nil {
			return err
		}
	}
	if _, err := s.store.Run(c.Request().Context(), t.ID, runID); err != nil {
		return errNotFound("run")
	}
	if err := s.checkNewWork(c); err != nil {
		return err
	}
	started, err := s.startRun(c, t, "", req.Model, nil, func(r *agent.StartRequest) { r.RetryOf, r.Continue = runID, cont })
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, startedJSON(started))
}

// apiRunPick shows run run_id's version of its answer (204): the thread,
// its cards and totals, and the history the next run's lead is given
// follow it (docs/API.md "What a new answer replaces"). 409 while a run
// is active; 422 for a run that is no version of a shown answer.
func (s *Server) apiRunPick(c echo.Context) error {
	t, err := s.ownThread(c)
	if err != nil {
		return err
	}
	runID, err := pathID(c, "run_id", "run")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	runs, err := s.store.Runs(ctx, t.ID)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(runs, func(r models.Run) bool { return r.ID == runID }) {
		return errNotFound("run")
	}
	if slices.ContainsFunc(runs, func(r models.Run) bool { return r.Status == models.RunRunning }) {
		return agent.ErrRunActive
	}
	rp := agent.ReplacedIn(runs)
	if !slices.ContainsFunc(runs, func(r models.Run) bool { return slices.Contains(rp.Versions(r.ID), runID) }) {
		return &apiError{Status: http.StatusUnprocessableEntity, Code: "not_a_version", Message: "that run is not a version of an answer the thread shows"}
	}
	if err := s.store.PickRun(ctx, t.ID, runID, time.Now()); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// apiMessageEdit sends an edited copy of one of the user's messages as a
// new run; that message and everything after it are replaced (202).
func (s *Server) apiMessageEdit(c echo.Context) error {
	t, err := s.ownThread(c)
	if err != nil {
		return err
	}
	msgID, err := pathID(c, "message_id", "message")
	if err != nil {
		return err
	}
	var req runRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	m, err := s.store.Message(c.Request().Context(), t.ID, msgID)
	switch {
	case errors.Is(err, models.ErrNotFound):
		return errNotFound("message")
	case err != nil:
		return err
	case m.Type != agent.TypeHuman:
		return errUnprocessable("only your own messages can be edited")
	}
	if err := s.checkMessage(c, req.Content); err != nil {
		return err
	}
	atts := agent.AttachmentsOf(m) // an edit keeps the message's files
	if req.Attachments != nil {
		if atts, err = s.rt.Attachments(t.ID, req.Attachments); err != nil {
			return err
		}
	}
	started, err := s.startRun(c, t, *req.Content, req.Model, atts, func(r *agent.StartRequest) { r.EditOf = m.RunID })
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, startedJSON(started))
}

// replaced reads which of the thread's runs later runs replaced.
func (s *Server) replaced(ctx context.Context, threadID string) (agent.Replaced, error) {
	runs, err := s.store.Runs(ctx, threadID)
	if err != nil {
		return agent.Replaced{}, err
	}
	return agent.ReplacedIn(runs), nil
}

// shownMessages is msgs without what the thread hides (the export's).
func (s *Server) shownMessages(ctx context.Context, threadID string, msgs []models.Message) ([]models.Message, error) {
	rp, err := s.replaced(ctx, threadID)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(msgs, func(m models.Message) bool { return rp.FromThread(&m) }), nil
}

// loadReplaced hides from v what later runs replaced (agent.Replaced)
// and gathers, for the runs its page shows, where each resumed and ended
// (one query).
func (s *Server) loadReplaced(ctx context.Context, v *threadView) error {
	runs, err := s.store.Runs(ctx, v.thread.ID)
	if err != nil {
		return err
	}
	v.runs = runs
	rp := agent.ReplacedIn(runs)
	from := int64(0)
	if len(v.messages) > 0 && v.next != 0 {
		from = v.messages[0].Seq
	}
	v.messages = slices.DeleteFunc(v.messages, func(m models.Message) bool { return rp.FromThread(&m) })
	v.cards = slices.DeleteFunc(v.cards, func(c agent.Card) bool { return rp.AnswerHidden(c.RunID) })
	events, _, err := s.store.Events(ctx, v.thread.ID, models.EventFilter{EventTypes: []string{"run.end", "run.resumed"}, AfterSeq: max(from-1, 0)})
	if err != nil {
		return err
	}
	for i := range events {
		ev := &events[i]
		if v.before != 0 && ev.Seq >= v.before {
			break
		}
		p, err := agent.PayloadOf(ev)
		if err != nil {
			continue
		}
		if item, ok := runNotice(ev, p, rp, v.active == nil); ok {
			v.notices = append(v.notices, item)
		}
	}
	return nil
}

// runNotice is what the thread shows of a run's end or resumption among
// its messages, if anything: nothing of a run whose answer was replaced,
// nor the end of a completed run that is not the latest (idle: no run
// is active).
func runNotice(ev *models.RunEvent, p agent.Event, rp agent.Replaced, idle bool) (views.MessageView, bool) {
	switch e := p.(type) {
	case agent.RunResumed:
		if rp.AnswerHidden(e.RunID) {
			break
		}
		r := &views.RunResumedView{Seq: ev.Seq, RunID: e.RunID, Notice: agent.ResumedNotice(e), At: ev.CreatedAt, LostMS: e.LostMS}
		return views.MessageView{Type: views.TypeRunResumed, Seq: ev.Seq, RunID: e.RunID, Resumed: r}, true
	case agent.RunEnd:
		if rp.AnswerHidden(e.RunID) || rp.Continued(e.RunID) {
			break
		}
		latest := e.RunID == rp.Latest() && idle
		versions := rp.Versions(e.RunID)
		if e.Status == models.RunCompleted && !latest && versions == nil {
			break
		}
		end := &views.RunEndView{Seq: ev.Seq, RunID: e.RunID, Status: e.Status, Notice: noticeOf(e), Error: e.Error, Latest: latest,
			Continue: latest && (e.Status == models.RunCancelled || e.Cut), Versions: versions, ErrorKind: e.ErrorKind, NoRetry: !agent.RetryHelps(e.ErrorKind)}
		return views.MessageView{Type: views.TypeRunEnd, Seq: ev.Seq, RunID: e.RunID, End: end}, true
	}
	return views.MessageView{}, false
}

// noticeOf is a run end's notice; runs that ended before notices were
// written say it by their status.
func noticeOf(end agent.RunEnd) string {
	switch {
	case end.Notice != "" || end.Status == models.RunCompleted:
		return end.Notice
	case end.Status == models.RunCancelled:
		return "Stopped."
	}
	return "The run failed."
}

// withRunNotices places the runs' notices (runNotice) among the page's
// messages by seq.
func withRunNotices(msgs, notices []views.MessageView) []views.MessageView {
	if len(notices) == 0 {
		return msgs
	}
	out := make([]views.MessageView, 0, len(msgs)+len(notices))
	i := 0
	for _, m := range msgs {
		for ; i < len(notices) && notices[i].Seq < m.Seq; i++ {
			out = append(out, notices[i])
		}
		out = append(out, m)
	}
	return append(out, notices[i:]...)
}
