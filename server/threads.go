package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"herd/agent"
	"herd/agent/event"
	"herd/models"
	"herd/server/auth"
	"herd/server/hub"
	"herd/views"
)

const maxTitle = 200

type threadJSON struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func newThreadJSON(t *models.Thread) threadJSON {
	return threadJSON{ID: t.ID, Title: t.Title, CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC()}
}

type runJSON struct {
	ID        string              `json:"id"`
	Status    string              `json:"status"`
	ModelName string              `json:"model_name"`
	Error     string              `json:"error,omitempty"`
	StartedAt time.Time           `json:"started_at"`
	EndedAt   *time.Time          `json:"ended_at"`
	Usage     *models.UsageReport `json:"usage,omitempty"`
}

// ownThread loads the :id thread if the current user owns it; any other id
// is 404, whoever asks (docs/DESIGN.md §10).
func (s *Server) ownThread(c echo.Context) (*models.Thread, error) {
	id, err := pathID(c, "id", "thread")
	if err != nil {
		return nil, err
	}
	t, err := s.store.Thread(c.Request().Context(), auth.User(c).ID, id)
	if errors.Is(err, models.ErrNotFound) {
		return nil, errNotFound("thread")
	}
	return t, err
}

func cleanTitle(raw string) (string, *apiError) {
	t := strings.Join(strings.Fields(raw), " ")
	if utf8.RuneCountInString(t) > maxTitle {
		return "", errUnprocessable("the title may have at most %d characters", maxTitle)
	}
	return t, nil
}

// threadView gathers everything a thread's page and JSON show: one page
// of its messages (the newest unless the query asks for an older one) and
// their cards.
type threadView struct {
	thread   *models.Thread
	messages []models.Message
	active   *models.Run
	lastSeq  int64
	cards    []agent.Card
	// leadWaiting: the active run's lead waits for a slot of its model.
	leadWaiting bool
	before      int64 // the page's bound (0: the newest page)
	next        int64 // before of the next older page; 0: none
	// notices are what the thread shows of its page's runs besides their
	// messages, in seq order (loadReplaced): where a run resumed, and
	// where one ended with a notice, a Retry or Regenerate.
	notices []views.MessageView
	// runs are the thread's runs, oldest first: what replaced what, and
	// the usage panel's split (threadUsage).
	runs []models.Run
}

// loadThread loads the :id thread the current user owns (see ownThread)
// with the page of messages ?before= and ?limit= ask for.
func (s *Server) loadThread(c echo.Context) (*threadView, error) {
	t, err := s.ownThread(c)
	if err != nil {
		return nil, err
	}
	before, limit, err := pageQuery(c, parseBeforeSeq, messagesPage, maxMessagesPg)
	if err != nil {
		return nil, err
	}
	ctx := c.Request().Context()
	msgs, more, err := s.store.MessagesBefore(ctx, t.ID, before, limit)
	if err != nil {
		return nil, err
	}
	v := &threadView{thread: t, messages: msgs, lastSeq: t.LastSeq, before: before}
	if more {
		v.next = msgs[0].Seq
	}
	// The runtime knows which run is live; a row left "running" by a
	// failed write (closed at the next start) must not show as active.
	if runID, ok := s.runs.ActiveRun(t.ID); ok {
		r, err := s.store.Run(ctx, t.ID, runID)
		switch {
		case err == nil:
			v.active = r
		case !errors.Is(err, models.ErrNotFound):
			return nil, err
		}
	}
	if err := s.loadCards(ctx, v); err != nil {
		return nil, err
	}
	if err := s.loadReplaced(ctx, v); err != nil {
		return nil, err
	}
	return v, nil
}

// Pages.

// sidebarThreads is how many recent threads the sidebar lists; the rest
// are a search or the thread list away.
const sidebarThreads = 50

// maxSearchResults bounds a search of thread titles.
const maxSearchResults = 100

func (s *Server) threadListPage(c echo.Context) error {
	q := strings.TrimSpace(c.QueryParam("q"))
	var ts []models.Thread
	var next string
	var err error
	var found []views.SearchResult
	if q != "" {
		ts, err = s.store.SearchThreads(c.Request().Context(), auth.User(c).ID, q, maxSearchResults)
		if err == nil {
			found, err = s.searchResults(c, q)
		}
	} else {
		ts, next, err = s.threadsPageOf(c)
	}
	if err != nil {
		return err
	}
	items := make([]views.ThreadItem, len(ts))
	for i, t := range ts {
		items[i] = threadItem(&t)
	}
	p := s.page(c, "Threads")
	p.Flash = flashText(c.QueryParam("flash"))
	deleted := ""
	if id, err := uuid.Parse(c.QueryParam("deleted")); err == nil {
		deleted = id.String()
	}
	return s.render(c, http.StatusOK, views.ThreadList(views.ThreadListPage{Page: p, Threads: items, Older: next, Paged: c.QueryParam("before") != "", Deleted: deleted, Query: q, Results: found}))
}

func threadItem(t *models.Thread) views.ThreadItem {
	title := t.Title
	if title == "" {
		title = "Untitled thread"
	}
	return views.ThreadItem{ID: t.ID, Title: title, UpdatedAt: t.UpdatedAt}
}

// flashText maps the fixed notices a redirect may ask for; arbitrary text
// from the URL is never shown.
func flashText(key string) string {
	switch key {
	case "renamed":
		return "Thread renamed."
	}
	return ""
}

// createThread creates a thread for the current user, within their
// thread-creation rate.
func (s *Server) createThread(c echo.Context, title string) (*models.Thread, error) {
	u := auth.User(c)
	// As a new run (checkNewWork): while the writer retries through a
	// storage fault, the insert would only wait out the busy timeout
	// behind the writer's own attempts.
	if f := s.storage.Fault(); f != nil {
		return nil, storageUnavailable(f)
	}
	if !s.threadLimiter.Allow("user:" + u.ID) {
		return nil, &apiError{http.StatusTooManyRequests, "rate_limited", "too many new threads in a minute; wait a moment and try again"}
	}
	return s.store.CreateThread(c.Request().Context(), u.ID, title)
}

func (s *Server) threadRenameSubmit(c echo.Context) error {
	t, err := s.ownThread(c)
	if err != nil {
		return err
	}
	title, ae := cleanTitle(c.FormValue("title"))
	if ae != nil {
		return ae
	}
	if _, err := s.store.RenameThread(c.Request().Context(), auth.User(c).ID, t.ID, title); err != nil {
		return err
	}
	s.pages.Publish(t.ID, "", event.Renamed{Title: title})
	if c.FormValue("from") == "thread" {
		return c.Redirect(http.StatusSeeOther, "/threads/"+t.ID)
	}
	return c.Redirect(http.StatusSeeOther, "/?flash=renamed")
}

func (s *Server) threadDeleteSubmit(c echo.Context) error {
	t, err := s.deleteThread(c)
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/?deleted="+url.QueryEscape(t.ID))
}

// deleteThread deletes the :id thread the current user owns (see
// ownThread): it stops the thread's run and waits for it to write its
// end; the thread leaves the owner's view at once, and it and its
// workspace are removed for good after the undo window unless the owner
// restores it first.
func (s *Server) deleteThread(c echo.Context) (*models.Thread, error) {
	t, err := s.ownThread(c)
	if err != nil {
		return nil, err
	}
	ctx := c.Request().Context()
	if err := s.stopRun(ctx, t.ID); err != nil {
		return nil, err
	}
	at := s.now().Add(s.undoWindow)
	if err := s.store.ScheduleThreadDelete(ctx, t.UserID, t.ID, at); err != nil {
		if errors.Is(err, models.ErrNotFound) {
			return nil, errNotFound("thread")
		}
		return nil, err
	}
	s.purger.Schedule(t.ID, at)
	return t, nil
}

// restoreThread undoes the delete of the :id thread while its undo window
// lasts; after it, the thread is gone (404).
func (s *Server) restoreThread(c echo.Context) (*models.Thread, error) {
	id, err := pathID(c, "id", "thread")
	if err != nil {
		return nil, err
	}
	t, err := s.store.RestoreThread(c.Request().Context(), auth.User(c).ID, id)
	if errors.Is(err, models.ErrNotFound) {
		return nil, &apiError{http.StatusNotFound, "not_found", "the thread is gone: it can be restored only in the seconds after its delete"}
	}
	if err != nil {
		return nil, err
	}
	s.purger.Cancel(id)
	return t, nil
}

func (s *Server) threadRestoreSubmit(c echo.Context) error {
	t, err := s.restoreThread(c)
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/threads/"+t.ID)
}

func (s *Server) apiThreadRestore(c echo.Context) error {
	t, err := s.restoreThread(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newThreadJSON(t))
}

// removeWorkspace deletes a deleted thread's files. The thread is already
// gone, so a failure is the operator's to see in the log, not the user's.
func (s *Server) removeWorkspace(threadID string) {
	if err := s.rt.RemoveWorkspace(threadID); err != nil {
		s.log.Error("a deleted thread's workspace was not removed", "thread", threadID, "err", err)
	}
}

// stopRun stops the thread's active run, if any, and waits (bounded) for
// it to write its end, so what is deleted next is not written again.
func (s *Server) stopRun(ctx context.Context, threadID string) error {
	runID, ok := s.runs.ActiveRun(threadID)
	if !ok {
		return nil
	}
	_ = s.runs.Cancel(threadID, runID)
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := s.runs.Wait(wctx, threadID); err != nil {
		return &apiError{http.StatusConflict, "conflict", "the thread's run is still stopping; try again in a moment"}
	}
	return nil
}

func (s *Server) threadPage(c echo.Context) error {
	v, err := s.loadThread(c)
	if err != nil {
		return err
	}
	t := v.thread
	r := s.redaction()
	sidebar, err := s.sidebar(c)
	if err != nil {
		return err
	}
	page := views.ThreadPage{
		Sidebar:  sidebar,
		Page:     s.page(c, threadItem(t).Title),
		Thread:   threadItem(t),
		Messages: withRunNotices(s.messageViews(v.messages, v.cards, r), v.notices),
		Models:   s.modelOptions(),
		LastSeq:  v.lastSeq,
		Older:    v.next,
		Before:   v.before,
	}
	state := map[string]any{
		"thread_id": t.ID,
		"last_seq":  v.lastSeq,
		// Sent back with last_seq when the stream resumes: a restore
		// since this page was made gets a resync (docs/DESIGN.md §11).
		"restore_generation":  s.hub.Generation(),
		"active_run_id":       nil,
		"token_usage_enabled": r.Shows(),
		// The model is naming the thread: the page asks for the title
		// again once its stream is open, in case the title came between.
		"title_pending": s.titles.Pending(t.ID),
		// The server's clock, so the page's elapsed times read right
		// whatever the reader's clock says.
		"server_time": s.now().UnixMilli(),
		// The failures a Retry cannot get past: no Retry on their run.end.
		"no_retry_kinds": agent.NoRetryKinds,
	}
	if v.active != nil {
		page.ActiveRunID = v.active.ID
		page.LeadWaiting = v.leadWaiting
		state["active_run_id"] = v.active.ID
	}
	if r.Shows() {
		u, err := s.threadUsage(c.Request().Context(), t.ID, v.runs)
		if err != nil {
			return err
		}
		page.Usage = s.usageView(u)
		// The same figures for the script, which adds what frames report.
		state["usage"] = u
	}
	if page.DefaultModel, err = s.threadModel(c.Request().Context(), t.ID, auth.User(c)); err != nil {
		return err
	}
	page.CommandsOff = s.commandsOff(auth.User(c))
	if page.Budget, err = s.budgetNote(c.Request().Context(), auth.User(c).ID); err != nil {
		return err
	}
	b, err := json.Marshal(state)
	if err != nil {
		return err
	}
	page.StateJSON = string(b)
	return s.render(c, http.StatusOK, views.Thread(page))
}

// threadNewPage is a thread before its first message: the composer alone.
// Sending creates the thread with its run (POST /api/threads with content),
// so no empty thread is ever left behind.
func (s *Server) threadNewPage(c echo.Context) error {
	u := auth.User(c)
	sidebar, err := s.sidebar(c)
	if err != nil {
		return err
	}
	note, err := s.budgetNote(c.Request().Context(), u.ID)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.NewThread(views.ThreadPage{
		Sidebar:      sidebar,
		Page:         s.page(c, "New thread"),
		Models:       s.modelOptions(),
		DefaultModel: s.defaultModel(u),
		CommandsOff:  s.commandsOff(u),
		Budget:       note,
	}))
}

// sidebar is the current user's most recently active threads.
func (s *Server) sidebar(c echo.Context) ([]views.ThreadItem, error) {
	ts, _, err := s.store.ThreadsPage(c.Request().Context(), auth.User(c).ID, nil, sidebarThreads)
	if err != nil {
		return nil, err
	}
	items := make([]views.ThreadItem, len(ts))
	for i := range ts {
		items[i] = threadItem(&ts[i])
	}
	return items, nil
}

// threadMessagesFragment answers the page of older messages the thread
// page loads on demand (views.OlderMessages): the same markup and cards
// as the page renders.
func (s *Server) threadMessagesFragment(c echo.Context) error {
	v, err := s.loadThread(c)
	if err != nil {
		return err
	}
	msgs := withRunNotices(s.messageViews(v.messages, v.cards, s.redaction()), v.notices)
	return s.render(c, http.StatusOK, views.OlderMessages(views.MessagesPage{ThreadID: v.thread.ID, Messages: msgs, Older: v.next}))
}

func (s *Server) messageViews(msgs []models.Message, cards []agent.Card, r hub.Redaction) []views.MessageView {
	byCall := make(map[string]*agent.Card, len(cards))
	for i := range cards {
		// A card continued after the per-response limit held it sits in
		// its first call's place (agent.Card.Slot).
		byCall[cards[i].RunID+"\x00"+cards[i].Slot()] = &cards[i]
	}
	out := make([]views.MessageView, 0, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		mv := views.MessageView{ID: m.ID, Seq: m.Seq, RunID: m.RunID, Type: m.Type, ModelName: m.ModelName, ModelLabel: s.modelLabel(m.ModelName), ToolCallID: m.ToolCallID, CreatedAt: m.CreatedAt}
		if m.Type == agent.TypeTool {
			mv.Content = m.Content // tool output is shown as text, not Markdown
		} else {
			mv.HTML = s.md.Render(m.Content)
		}
		var calls []agent.ToolCall
		if len(m.ToolCalls) > 0 && json.Unmarshal(m.ToolCalls, &calls) == nil {
			for _, tc := range calls {
				tv := views.ToolCallView{ID: tc.ID, Name: tc.Name, Label: agent.ToolLabel(tc.Name, ""), Args: string(tc.Args)}
				if card := byCall[m.RunID+"\x00"+tc.ID]; card != nil && tc.Name == agent.ToolTask {
					tv.Card = s.cardView(m.ThreadID, *card, r)
				}
				mv.ToolCalls = append(mv.ToolCalls, tv)
			}
		}
		if m.Type == agent.TypeHuman {
			mv.Editable, mv.Content = true, m.Content // Edit starts from the text
			for _, a := range agent.AttachmentsOf(m) {
				mv.Attachments = append(mv.Attachments, views.AttachmentView{ThreadID: m.ThreadID, Path: a.Path, Size: a.Size, Type: a.Type})
			}
		}
		var kw struct {
			Stopped    bool               `json:"stopped"`
			Incomplete bool               `json:"incomplete"`
			Trimmed    *views.ContextTrim `json:"context_trimmed"`
			// Reasoning is the model's, shown apart from the answer.
			Reasoning string `json:"reasoning_content"`
			// ToolOutput is a tool call's images and log (agent.ToolOutput),
			// which the page shows below its result (static/tool-output.js).
			ToolOutput json.RawMessage `json:"tool_output"`
		}
		if len(m.AdditionalKwargs) > 0 && json.Unmarshal(m.AdditionalKwargs, &kw) == nil && m.Type == agent.TypeAI {
			mv.Stopped, mv.Incomplete, mv.Trimmed, mv.Reasoning = kw.Stopped, kw.Incomplete, kw.Trimmed, kw.Reasoning
		}
		if m.Type == agent.TypeTool && len(kw.ToolOutput) > 0 {
			mv.ToolOutput = string(kw.ToolOutput)
		}
		out = append(out, mv)
	}
	return out
}

// threadModel is the model the composer preselects: the one the thread's
// latest run used, while it is still configured; else the first model.
func (s *Server) threadModel(ctx context.Context, threadID string, u *models.User) (string, error) {
	last, err := s.store.LastModel(ctx, threadID)
	if err != nil {
		return "", err
	}
	if last != "" && s.hasModel(last) {
		return last, nil
	}
	return s.defaultModel(u), nil
}

func (s *Server) modelOptions() []views.ModelOption {
	ms := s.rt.Models()
	out := make([]views.ModelOption, len(ms))
	for i, m := range ms {
		out[i] = views.ModelOption{Name: m.Name, Label: m.Label(), Provider: m.Provider}
	}
	return out
}

// JSON API.

// apiThreads answers a page of the user's threads (docs/API.md
// "Pagination").
func (s *Server) apiThreads(c echo.Context) error {
	ts, next, err := s.threadsPageOf(c)
	if err != nil {
		return err
	}
	out := make([]threadJSON, len(ts))
	for i := range ts {
		out[i] = newThreadJSON(&ts[i])
	}
	return c.JSON(http.StatusOK, map[string]any{"threads": out, "has_more": next != "", "next": nullIfZero(next)})
}

// nullIfZero is v, or JSON null for its zero value: a next cursor that
// there is none of.
func nullIfZero[T comparable](v T) any {
	var zero T
	if v == zero {
		return nil
	}
	return v
}

// listJSON answers {key: [...]}: the rows list returns for the current
// user (an admin's list of users ignores the id), each as toJSON makes it.
func listJSON[T, J any](c echo.Context, key string, list func(ctx context.Context, userID string) ([]T, error), toJSON func(*T) J) error {
	rows, err := list(c.Request().Context(), auth.User(c).ID)
	if err != nil {
		return err
	}
	out := make([]J, len(rows))
	for i := range rows {
		out[i] = toJSON(&rows[i])
	}
	return c.JSON(http.StatusOK, map[string]any{key: out})
}

type threadRequest struct {
	Title *string `json:"title"`
	// Content, when sent, is the thread's first message: the thread is
	// created with its run, or not at all.
	Content *string `json:"content"`
	Model   string  `json:"model"`
	// Attachments must be empty: a thread not made yet has no files.
	Attachments []string `json:"attachments"`
}

func (s *Server) apiThreadCreate(c echo.Context) error {
	var req threadRequest
	if c.Request().ContentLength != 0 {
		if err := bindJSON(c, &req); err != nil {
			return err
		}
	}
	title := ""
	if req.Title != nil {
		t, ae := cleanTitle(*req.Title)
		if ae != nil {
			return ae
		}
		title = t
	}
	if req.Content != nil {
		if err := s.checkMessage(c, req.Content); err != nil {
			return err
		}
	}
	if len(req.Attachments) > 0 {
		return &apiError{http.StatusBadRequest, "bad_attachment", "attachments: a new thread has no files yet; create it, upload its files, then start a run with them"}
	}
	t, err := s.createThread(c, title)
	if err != nil {
		return err
	}
	if req.Content == nil {
		return c.JSON(http.StatusCreated, newThreadJSON(t))
	}
	started, err := s.startRun(c, t, *req.Content, req.Model, nil)
	if err != nil {
		// A thread exists only with its first message.
		if derr := s.store.DeleteThread(c.Request().Context(), t.UserID, t.ID); derr != nil {
			s.log.Warn("remove a thread whose first run did not start", "thread", t.ID, "err", derr)
		}
		return err
	}
	if fresh, err := s.store.Thread(c.Request().Context(), t.UserID, t.ID); err == nil {
		t = fresh // with the title its first message gave it
	}
	return c.JSON(http.StatusCreated, map[string]any{"thread": newThreadJSON(t), "run": startedJSON(started)})
}

func (s *Server) apiThread(c echo.Context) error {
	v, err := s.loadThread(c)
	if err != nil {
		return err
	}
	out := s.messagesPageJSON(v)
	out["thread"] = newThreadJSON(v.thread)
	out["active_run"] = nil
	out["last_seq"] = v.lastSeq
	out["restore_generation"] = s.hub.Generation()
	if v.active != nil {
		out["active_run"] = newRunJSON(v.active)
	}
	return c.JSON(http.StatusOK, out)
}

// apiThreadMessages answers a page of the thread's messages and their
// cards, without the thread's own fields.
func (s *Server) apiThreadMessages(c echo.Context) error {
	v, err := s.loadThread(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.messagesPageJSON(v))
}

// messagesPageJSON is a page of messages and the cards of their task
// calls, with the cursor of the next older page.
func (s *Server) messagesPageJSON(v *threadView) map[string]any {
	r := s.redaction()
	msgs := make([]hub.MessageJSON, len(v.messages))
	for i := range v.messages {
		msgs[i] = r.Message(&v.messages[i], "")
	}
	tasks := make([]cardJSON, len(v.cards))
	for i, card := range v.cards {
		tasks[i] = s.cardJSON(card, r)
	}
	return map[string]any{"messages": msgs, "tasks": tasks, "has_more": v.next != 0, "next": nullIfZero(v.next)}
}

func newRunJSON(r *models.Run) runJSON {
	return runJSON{ID: r.ID, Status: r.Status, ModelName: r.ModelName, Error: r.Error, StartedAt: r.StartedAt.UTC(), EndedAt: r.EndedAt}
}

func (s *Server) apiThreadRename(c echo.Context) error {
	t, err := s.ownThread(c)
	if err != nil {
		return err
	}
	var req threadRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if req.Title == nil {
		return errUnprocessable("send the new title as {\"title\": \"…\"}")
	}
	title, ae := cleanTitle(*req.Title)
	if ae != nil {
		return ae
	}
	t, err = s.store.RenameThread(c.Request().Context(), auth.User(c).ID, t.ID, title)
	if err != nil {
		return err
	}
	s.pages.Publish(t.ID, "", event.Renamed{Title: t.Title})
	return c.JSON(http.StatusOK, newThreadJSON(t))
}

func (s *Server) apiThreadDelete(c echo.Context) error {
	if _, err := s.deleteThread(c); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
