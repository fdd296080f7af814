package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"herd/agent"
	"herd/models"
	"herd/server/auth"
	"herd/server/hub"
)

type runRequest struct {
	Content *string `json:"content"`
	Model   string  `json:"model"`
	// Attachments are files of the thread's workspace the message
	// attaches, by workspace-relative path (agent.Runtime.Attachments);
	// an edit that leaves them out keeps the edited message's.
	Attachments []string `json:"attachments"`
}

// apiRunStart persists the user's message and starts the lead on it (202).
func (s *Server) apiRunStart(c echo.Context) error {
	t, err := s.ownThread(c)
	if err != nil {
		return err
	}
	var req runRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if err := s.checkMessage(c, req.Content); err != nil {
		return err
	}
	atts, err := s.rt.Attachments(t.ID, req.Attachments)
	if err != nil {
		return err
	}
	started, err := s.startRun(c, t, *req.Content, req.Model, atts)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, startedJSON(started))
}

func startedJSON(st agent.Started) map[string]string {
	return map[string]string{"run_id": st.RunID, "message_id": st.MessageID, "model": st.ModelName}
}

// checkMessage refuses a message that cannot start a run, before anything
// is created: missing, blank, too large or not UTF-8, while storage is
// failing, or over the user's message rate.
func (s *Server) checkMessage(c echo.Context, content *string) error {
	if content == nil || strings.TrimSpace(*content) == "" {
		return errUnprocessable("content is required: the message to send")
	}
	if len(*content) > s.maxContent {
		return errTooLarge(fmt.Sprintf("the message is %d KB; the limit is %d KB", (len(*content)+1023)/1024, s.maxContent/1024))
	}
	if !utf8.ValidString(*content) {
		return errUnprocessable("content must be valid UTF-8")
	}
	return s.checkNewWork(c)
}

// checkNewWork refuses a new run, with a message or without (a Retry),
// while storage is failing or over the user's message rate.
func (s *Server) checkNewWork(c echo.Context) error {
	// New work is refused while the writer retries through a storage
	// fault: its records would only queue behind the ones being kept.
	if f := s.storage.Fault(); f != nil {
		return storageUnavailable(f)
	}
	if !s.runLimiter.Allow("user:" + auth.User(c).ID) {
		return &apiError{http.StatusTooManyRequests, "rate_limited", "too many messages in a minute; wait a moment and send again"}
	}
	return nil
}

// startRun starts the lead on content with its attachments in thread t
// (checked by checkMessage and Runtime.Attachments); replace, if given,
// makes the run a Retry or an Edit (answers.go). An untitled thread is
// titled from its first message.
func (s *Server) startRun(c echo.Context, t *models.Thread, content, model string, atts []agent.Attachment, replace ...func(*agent.StartRequest)) (agent.Started, error) {
	u := auth.User(c)
	if model == "" {
		model = s.defaultModel(u)
	}
	// A spent budget refuses the run before anything is written; a run
	// it allows stops once it is spent (docs/DESIGN.md §6).
	budget, err := s.checkBudget(c.Request().Context(), u.ID)
	if err != nil {
		return agent.Started{}, err
	}
	req := agent.StartRequest{
		ThreadID: t.ID, UserID: u.ID, Content: content, Attachments: atts, Model: model, Commands: s.commandsFor(u), Admin: u.IsAdmin(), Budget: budget,
	}
	for _, f := range replace {
		f(&req)
	}
	started, err := s.rt.Start(c.Request().Context(), req)
	switch {
	case errors.Is(err, models.ErrNotFound):
		return started, errNotFound("thread")
	case err != nil:
		return started, err // the runtime's refusals: runtimeError
	}
	if t.Title == "" {
		s.titleThread(c, t, started, content)
	}
	return started, nil
}

// commandsFor reports whether u's runs are offered commands: always,
// unless commands run on the host, where only admins get them. The owner
// of the thread is the user who starts its run.
func (s *Server) commandsFor(u *models.User) bool {
	return !s.adminCommands || u.IsAdmin()
}

// commandsOff reports whether the thread page tells u that their runs
// cannot run commands: commands exist, but not for u.
func (s *Server) commandsOff(u *models.User) bool {
	return s.rt.Commands() && !s.commandsFor(u)
}

// apiRunCancel stops a run: its LLM calls, tools and subagents.
func (s *Server) apiRunCancel(c echo.Context) error {
	t, err := s.ownThread(c)
	if err != nil {
		return err
	}
	runID, err := pathID(c, "run_id", "run")
	if err != nil {
		return err
	}
	if err := s.runs.Cancel(t.ID, runID); err != nil {
		if _, err := s.store.Run(c.Request().Context(), t.ID, runID); err != nil {
			return errNotFound("run")
		}
		return errConflict("the run has already ended")
	}
	return c.JSON(http.StatusAccepted, map[string]string{"run_id": runID, "status": "cancelling"})
}

// apiTaskCancel cancels one running subagent by its task id.
func (s *Server) apiTaskCancel(c echo.Context) error {
	t, err := s.ownThread(c)
	if err != nil {
		return err
	}
	taskID := c.Param("task_id")
	if taskID == "" || len(taskID) > 200 {
		return errNotFound("task")
	}
	if err := s.runs.CancelTask(t.ID, taskID); err != nil {
		return errNotFound("running task")
	}
	return c.JSON(http.StatusAccepted, map[string]string{"task_id": taskID, "status": "cancelling"})
}

// eventJSON is a persisted event on the wire (docs/API.md).
type eventJSON struct {
	Seq       int64           `json:"seq"`
	ThreadID  string          `json:"thread_id"`
	RunID     string          `json:"run_id"`
	EventType string          `json:"event_type"`
	Category  string          `json:"category"`
	TaskID    string          `json:"task_id"`
	Content   any             `json:"content"`
	Metadata  json.RawMessage `json:"metadata"`
	CreatedAt string          `json:"created_at"`
}

// ownThreadAfter reads the :id thread the current user owns (see
// ownThread) and the after_seq cursor past which its records are wanted,
// the same for the events page and the stream.
func (s *Server) ownThreadAfter(c echo.Context) (*models.Thread, int64, error) {
	t, err := s.ownThread(c)
	if err != nil {
		return nil, 0, err
	}
	after, err := queryInt(c, "after_seq", 0, 0, 1<<62)
	if err != nil {
		return nil, 0, err
	}
	return t, after, nil
}

// apiEvents pages a thread's events by seq (docs/API.md).
func (s *Server) apiEvents(c echo.Context) error {
	t, after, err := s.ownThreadAfter(c)
	if err != nil {
		return err
	}
	limit, err := queryInt(c, "limit", 200, 1, 1000)
	if err != nil {
		return err
	}
	f := models.EventFilter{TaskID: c.QueryParam("task_id"), RunID: c.QueryParam("run_id"), AfterSeq: after, Limit: int(limit)}
	if len(f.TaskID) > 200 {
		return errBadRequest("task_id is too long")
	}
	if types := c.QueryParam("event_types"); types != "" {
		known := agent.EventTypes()
		for _, typ := range strings.Split(types, ",") {
			typ = strings.TrimSpace(typ)
			if !slices.Contains(known, typ) {
				return errBadRequest("unknown event type %q", typ)
			}
			f.EventTypes = append(f.EventTypes, typ)
		}
	}
	events, more, err := s.store.Events(c.Request().Context(), t.ID, f)
	if err != nil {
		return err
	}
	r := s.redaction()
	out := make([]eventJSON, 0, len(events))
	next := after
	for i := range events {
		e := &events[i]
		content, err := agent.DecodeContent(e.Content)
		if err != nil {
			s.log.Warn("unreadable event content", "thread", t.ID, "seq", e.Seq, "err", err)
			content = map[string]any{}
		}
		r.EventContent(content)
		if html := agent.StepTextHTML(e.EventType, content, s.md.Render); html != "" {
			content["text_html"] = html // the card shows the step as Markdown
		}
		out = append(out, eventJSON{
			Seq: e.Seq, ThreadID: e.ThreadID, RunID: e.RunID, EventType: e.EventType, Category: e.Category,
			TaskID: e.TaskID, Content: content, Metadata: hub.RawOr(e.Metadata, "{}"), CreatedAt: e.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z"),
		})
		next = e.Seq
	}
	return c.JSON(http.StatusOK, map[string]any{"events": out, "next_after_seq": next, "has_more": more})
}

// apiUsage answers the thread's ledger totals, what it shows apart from
// what later runs replaced (threadUsage); the token gate hides them.
func (s *Server) apiUsage(c echo.Context) error {
	t, err := s.ownThread(c)
	if err != nil {
		return err
	}
	if !s.redaction().Shows() {
		return c.JSON(http.StatusOK, map[string]any{"token_usage_enabled": false})
	}
	ctx := c.Request().Context()
	runs, err := s.store.Runs(ctx, t.ID)
	if err != nil {
		return err
	}
	u, err := s.threadUsage(ctx, t.ID, runs)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, struct {
		TokenUsageEnabled bool `json:"token_usage_enabled"`
		threadUsage
	}{true, u})
}
