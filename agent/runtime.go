package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"herd/agent/tools"
	"herd/models"
)

// Options builds a Runtime.
type Options struct {
	Models        []*Model // the first is the default
	Lead          LeadConfig
	Subagents     SubagentsConfig
	WorkspaceRoot string
	// Tools are the tools the lead has besides task (workspace tools, and
	// bash when the sandbox allows it).
	Tools     []tools.Tool
	Journal   Journal
	History   History
	Publisher Publisher
	Logger    *slog.Logger
	Now       func() time.Time
	NewID     func() string

	// CommandsOffReason tells the lead of a run without commands
	// (StartRequest.Commands false) why it has none, so it can tell the
	// user; it should end with a full stop.
	CommandsOffReason string

	// MCP, when set, offers the tools of MCP servers to the lead and the
	// subagent types whose tools lists name them.
	MCP ToolSource
	// ToolImages, when set, keeps the images tools return, to show with
	// their calls; without it a call's images are only named.
	ToolImages *ToolImages

	// Claims, when set, has the database enforce one running run per
	// thread across every instance (docs/DESIGN.md §14). Lease, when set,
	// is the lease this instance runs under: recorded on each run (its
	// instance and fencing epoch); a zero epoch (a lease lost, not yet
	// rejoined) refuses new runs with models.ErrFenced.
	Claims RunClaims
	Lease  func() models.Fence
	// Resume is whether and how often runs resume after a restart or a
	// failover (Resume); its zero value resumes none.
	Resume ResumeConfig
	// BudgetOf, when set, is the token budget of userID now, read from
	// the ledger: a resumed run is given it (a new one gets its own in
	// StartRequest.Budget). nil: resumed runs have none.
	BudgetOf func(ctx context.Context, userID string) (Budget, error)
}

// RunClaims claims a thread for a run in the database; models.Store
// implements it. ClaimRun fails with models.ErrConflict while the thread
// has a running run, and with models.ErrTooManyRuns when the user has
// perUser running runs, whichever instances run them.
type RunClaims interface {
	ClaimRun(ctx context.Context, r *models.Run, perUser int) error
	AbandonRun(ctx context.Context, id string, f models.Fence) error
}

// ToolSource offers tools that come and go: the MCP servers' (agent/mcp).
type ToolSource interface {
	// Tools are the tools a user's run may be offered now; admin says
	// whether the user is an admin.
	Tools(ctx context.Context, admin bool) []tools.Tool
	// Generation changes whenever the tools may have.
	Generation() uint64
}

// Runtime runs the lead loop of every active run and owns the subagent
// executor. Runs are independent of any request or socket: they end when
// they finish, are stopped, or the runtime shuts down.
type Runtime struct {
	runEnv
	// cat is the catalog new runs start with, swapped whole by
	// SetModels; a run keeps the one it started with (docs/DESIGN.md §12).
	cat atomic.Pointer[catalog]
	// limits are the limits in force (SetLimits).
	limits atomic.Pointer[Limits]
	// boxes builds a run's toolboxes of a catalog's models with the MCP
	// tools of the moment.
	boxes func(models map[string]*Model, agents map[string]AgentConfig, extra []tools.Tool) (with, without *toolbox, err error)
	mcp   ToolSource

	base     context.Context
	stopBase context.CancelFunc
	wg       sync.WaitGroup

	claims   RunClaims
	lease    func() models.Fence
	resume   ResumeConfig
	budgetOf func(ctx context.Context, userID string) (Budget, error)
	// released stops every write of a run (Release).
	released *atomic.Bool

	mu     sync.Mutex
	closed bool
	active map[string]*run // by thread id
	byUser map[string]int  // active runs by user id
}

// New builds a Runtime.
func New(o Options) (*Runtime, error) {
	if len(o.Models) == 0 {
		return nil, errors.New("agent: no models configured")
	}
	if o.Journal == nil || o.History == nil {
		return nil, errors.New("agent: a journal and a history are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewID == nil {
		o.NewID = uuid.NewString
	}
	if o.Publisher == nil {
		o.Publisher = nopPublisher{}
	}
	if o.Lead.MaxTurns <= 0 {
		o.Lead.MaxTurns = 25
	}
	if o.Lead.MaxActiveRunsPerUser <= 0 {
		o.Lead.MaxActiveRunsPerUser = 3
	}
	sub := o.Subagents.withDefaults()
	released := new(atomic.Bool)
	rt := &Runtime{
		released: released,
		runEnv: runEnv{
			journal: releasable{o.Journal, released}, history: o.History, pub: o.Publisher, lead: o.Lead,
			wsRoot: o.WorkspaceRoot, log: o.Logger, now: o.Now, newID: o.NewID,
			persistTO: 30 * time.Second, images: o.ToolImages, decodes: make(chan struct{}, maxDecodes),
			strays: &strays{grace: time.Duration(sub.CancelGraceSeconds) * time.Second},
		},
		active: map[string]*run{},
		byUser: map[string]int{},

		claims:   o.Claims,
		lease:    o.Lease,
		resume:   o.Resume,
		budgetOf: o.BudgetOf,
	}
	rt.boxes = func(models map[string]*Model, agents map[string]AgentConfig, extra []tools.Tool) (*toolbox, *toolbox, error) {
		cfg := sub
		cfg.Agents = agents
		return newToolboxes(o.Tools, extra, cfg, models, o.Lead, o.CommandsOffReason)
	}
	rt.mcp = o.MCP
	if err := rt.SetCatalog(o.Models, sub.Agents); err != nil {
		return nil, err
	}
	rt.base, rt.stopBase = context.WithCancel(context.Background())
	rt.exec = newExecutor(sub, rt.strays, o.Now, o.NewID)
	rt.limits.Store(&Limits{MaxTurns: o.Lead.MaxTurns, MaxActiveRunsPerUser: o.Lead.MaxActiveRunsPerUser,
		MaxRunning: sub.MaxRunning, MaxRunningPerUser: sub.MaxRunningPerUser})
	return rt, nil
}

// StartRequest is one user message.
type StartRequest struct {
	ThreadID string
	UserID   string
	Content  string
	// Attachments are the files of the thread's workspace the message
	// attaches, as Runtime.Attachments checked them; an edit keeps the
	// edited message's (AttachmentsOf). Unused with RetryOf.
	Attachments []Attachment
	Model       string // "" for the default
	// Commands offers the run the bash tool and the bash subagent type,
	// when they are configured; without it no model of the run is
	// offered either (docs/DESIGN.md §4, the shell rule).
	Commands bool
	// Admin offers the tools of MCP servers that are for admins only.
	Admin bool
	// RetryOf, when set, answers the message of that run again (Retry,
	// Regenerate) instead of a new one: Content is unused and the run
	// must be the thread's latest. EditOf, when set, sends Content as the
	// edited message of that run, replacing it and every later run
	// (docs/DESIGN.md §3). At most one is set.
	RetryOf, EditOf string
	// Continue, with RetryOf naming a run the user stopped, continues
	// its answer from where it stopped instead of answering again.
	Continue bool
	// Budget, when its Limit is set, is the user's token budget for the
	// period: the run stops with stop reason budget once the ledger at
	// its start plus its own calls reach it (docs/DESIGN.md §6).
	Budget Budget
}

// Started describes a run that Start accepted.
type Started struct {
	RunID     string
	MessageID string // the new human message; "" for a RetryOf run
	ModelName string
}

// Start persists the user's message and starts a run for it. It returns
// ErrRunActive while the thread has one, ErrUnknownModel for a model
// that is not configured, and for what req replaces ErrNotLatest,
// ErrReplaced or models.ErrNotFound.
func (rt *Runtime) Start(ctx context.Context, req StartRequest) (Started, error) {
	if req.RetryOf != "" && req.EditOf != "" {
		return Started{}, errors.New("agent: a run retries or edits, not both")
	}
	cat := rt.cat.Load()
	model, err := cat.model(req.Model)
	if err != nil {
		return Started{}, err
	}
	box, err := rt.toolbox(ctx, cat, req.Commands, req.Admin)
	if err != nil {
		return Started{}, err
	}
	r := rt.newRun(req, model, box)
	if err := rt.claimWhenEnded(ctx, r); err != nil {
		r.cancel(nil)
		return Started{}, err
	}
	// Checked once the thread is claimed, so no run can start between
	// the check and the new run's start.
	if err := rt.place(ctx, req, r); err != nil {
		rt.release(r)
		r.cancel(nil)
		return Started{}, err
	}

	if rt.mcp != nil {
		r.rebox = func(b *toolbox) *toolbox { return rt.refresh(b, cat, req.Commands, req.Admin, r.logger()) }
	}

	msgID := rt.newID()
	// The start is written whole or not at all, even if the request that
	// asked for it goes away meanwhile.
	bctx, cancel := rt.persistCtx(ctx)
	defer cancel()
	if err := rt.claimRow(bctx, r); err != nil {
		rt.release(r)
		r.cancel(nil)
		return Started{}, err
	}
	if err = r.begin(bctx, msgID, req.Content, req.Attachments); err != nil {
		rt.abandon(bctx, r, err)
		rt.release(r)
		r.cancel(nil)
		return Started{}, err
	}
	rt.wg.Go(r.loop)
	if req.RetryOf != "" {
		msgID = ""
	}
	return Started{RunID: r.id, MessageID: msgID, ModelName: model.Config.Name}, nil
}

// newRun is the run req asks for, not yet started: its context is the
// runtime's, not the request's.
func (rt *Runtime) newRun(req StartRequest, model *Model, box *toolbox) *run {
	r := &run{
		env:       &rt.runEnv,
		box:       box,
		release:   rt.release,
		id:        rt.newID(),
		threadID:  req.ThreadID,
		userID:    req.UserID,
		model:     model,
		done:      make(chan struct{}),
		retryOf:   req.RetryOf,
		continues: req.Continue,
		editOf:    req.EditOf,
		commands:  req.Commands,
		admin:     req.Admin,
		maxTurns:  rt.limits.Load().MaxTurns,
	}
	r.sink = rt.runEnv.newSink(owner{r.threadID, r.userID}, r.id)
	if req.Budget.Limit > 0 {
		r.budget = &budgetGuard{Budget: req.Budget, sink: r.sink}
	}
	r.ctx, r.cancel = context.WithCancelCause(rt.base)
	r.ctx = withRun(r.ctx)
	return r
}

// model is the model called name of the catalog of the moment, or its
// default for "".
func (rt *Runtime) model(name string) (*Model, error) {
	return rt.cat.Load().model(name)
}

// place finds where run r goes in the thread's tree of runs
// (ReplacedIn): a new message follows the last run shown; a Retry or
// Regenerate, of that run only, and an Edit, of a message shown, follow
// what the run they replace followed, as its next version. It refuses an
// edit of a run that is not in the thread, is not shown, or has no
// message of its own.
func (rt *Runtime) place(ctx context.Context, req StartRequest, r *run) error {
	runs, err := rt.history.Runs(ctx, req.ThreadID)
	if err != nil {
		return fmt.Errorf("agent: read runs: %w", err)
	}
	rp := ReplacedIn(runs)
	target := cmp.Or(req.RetryOf, req.EditOf)
	if target == "" {
		r.parent = rp.Latest()
		return nil
	}
	i := slices.IndexFunc(runs, func(r models.Run) bool { return r.ID == target })
	switch {
	case i < 0:
		return fmt.Errorf("agent: run %s: %w", target, models.ErrNotFound)
	case req.RetryOf != "" && target != rp.Latest():
		return ErrNotLatest
	case req.EditOf != "" && (rp.Whole(target) || runs[i].RetryOf != ""):
		return ErrReplaced
	}
	if req.Continue {
		text, cut, err := rt.stoppedAnswer(ctx, req.ThreadID, target)
		if err != nil {
			return err
		}
		if req.RetryOf == "" || runs[i].Status != models.RunCancelled && !(runs[i].Status == models.RunCompleted && cut) {
			return ErrNotStopped
		}
		r.continues = true
		r.continued = &openAnswer{id: rt.newID(), text: text}
	}
	r.parent = rp.Parent(target)
	// The versions the page switches between: a failed or stopped run
	// answered again stays history, no version; its retry takes its place.
	retry := req.RetryOf != "" && runs[i].Status != models.RunCompleted
	r.versions = rp.NextVersions(r.parent, target, r.id, retry)
	return nil
}

// stoppedAnswer is the text run runID's answer had when the user stopped
// it or the model's output limit cut it: its last AI message, if that
// called no tools ("" when it had none), and whether the limit cut it.
func (rt *Runtime) stoppedAnswer(ctx context.Context, threadID, runID string) (string, bool, error) {
	msgs, err := rt.history.Messages(ctx, threadID)
	if err != nil {
		return "", false, fmt.Errorf("agent: read messages: %w", err)
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if m := &msgs[i]; m.RunID == runID && m.Type == TypeAI {
			if hasToolCalls(m) {
				return "", false, nil
			}
			var kw struct {
				Cut bool `json:"cut"`
			}
			_ = json.Unmarshal(m.AdditionalKwargs, &kw)
			return m.Content, kw.Cut, nil
		}
	}
	return "", false, nil
}

// firstUseWait bounds how long a run's start waits for MCP servers that
// connect on first use; their tools reach the run's next model call.
const firstUseWait = 5 * time.Second

// toolbox is what a run gets: the built-in tools with or without
// commands, and the MCP tools the user may use as they are now.
func (rt *Runtime) toolbox(ctx context.Context, cat *catalog, commands, admin bool) (*toolbox, error) {
	if rt.mcp == nil {
		if commands {
			return cat.withCommands, nil
		}
		return cat.withoutCommands, nil
	}
	gen := rt.mcp.Generation()
	// An HTTP server connects on first use; a run does not wait long
	// for one that is slow to answer.
	wctx, cancel := context.WithTimeout(ctx, firstUseWait)
	defer cancel()
	with, without, err := rt.boxes(cat.byName, cat.agents, rt.mcp.Tools(wctx, admin))
	if err != nil {
		return nil, err
	}
	box := without
	if commands {
		box = with
	}
	box.gen = gen
	return box, nil
}

// refresh is b, or b rebuilt when the MCP tools changed since it was
// built (tools/list_changed, a server restarted), so the next model call
// sees the tools as they are, with the models of the run's catalog cat.
func (rt *Runtime) refresh(b *toolbox, cat *catalog, commands, admin bool, log *slog.Logger) *toolbox {
	if rt.mcp.Generation() == b.gen {
		return b
	}
	nb, err := rt.toolbox(rt.base, cat, commands, admin)
	if err != nil {
		log.Error("rebuild the toolbox", "err", err)
		return b
	}
	return nb
}

// Cancel stops run runID of thread threadID: every in-flight LLM call, tool
// and subagent of it. It returns at once; the run writes its end shortly.
func (rt *Runtime) Cancel(threadID, runID string) error {
	rt.mu.Lock()
	r := rt.active[threadID]
	rt.mu.Unlock()
	if r == nil || r.id != runID {
		return ErrNoActiveRun
	}
	r.cancel(errStopped)
	return nil
}

// CancelTask cancels the running subagent with tool-call id taskID in
// thread threadID.
func (rt *Runtime) CancelTask(threadID, taskID string) error {
	rt.mu.Lock()
	r := rt.active[threadID]
	rt.mu.Unlock()
	if r == nil {
		return ErrNoTask
	}
	if !rt.exec.cancelTask(r.id, taskID) {
		return ErrNoTask
	}
	return nil
}

// ActiveRun returns the id of the thread's active run, if any.
func (rt *Runtime) ActiveRun(threadID string) (string, bool) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if r := rt.active[threadID]; r != nil {
		return r.id, true
	}
	return "", false
}

// Wait blocks until the thread has no active run or ctx ends.
func (rt *Runtime) Wait(ctx context.Context, threadID string) error {
	rt.mu.Lock()
	r := rt.active[threadID]
	rt.mu.Unlock()
	if r == nil {
		return nil
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Models returns the models new runs may use, the default first.
func (rt *Runtime) Models() []ModelConfig {
	order := rt.cat.Load().order
	out := make([]ModelConfig, len(order))
	for i, m := range order {
		out[i] = m.Config
	}
	return out
}

// endingWait bounds how long a new run waits for the thread's run that
// is writing its end.
const endingWait = 10 * time.Second

// claimWhenEnded is claim, except that a thread whose run is writing its
// end is claimed once that run is over: its run.end reaches the pages
// before the run lets go of the thread, and a Retry sent on it must not
// meet a 409.
func (rt *Runtime) claimWhenEnded(ctx context.Context, r *run) error {
	var bound <-chan time.Time // endingWait in all, however many runs end meanwhile
	for {
		ending, err := rt.claim(r)
		if ending == nil {
			return err
		}
		if bound == nil {
			t := time.NewTimer(endingWait)
			defer t.Stop()
			bound = t.C
		}
		select {
		case <-ending:
		case <-ctx.Done():
			return ctx.Err()
		case <-bound:
			return ErrRunActive
		}
	}
}

// claim makes r the thread's active run, unless the runtime is closing,
// the thread has a run or the user has as many as they may. When the
// thread's run is ending it also returns that run's done.
func (rt *Runtime) claim(r *run) (ending <-chan struct{}, err error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch a := rt.active[r.threadID]; {
	case rt.closed:
		return nil, ErrShuttingDown
	case a != nil && a.ending.Load():
		return a.done, ErrRunActive
	case a != nil:
		return nil, ErrRunActive
	case rt.byUser[r.userID] >= rt.limits.Load().MaxActiveRunsPerUser:
		return nil, &RunLimitError{Limit: rt.limits.Load().MaxActiveRunsPerUser}
	}
	rt.active[r.threadID] = r
	rt.byUser[r.userID]++
	return nil, nil
}

// claimRow claims the thread for r in the database too, where another
// instance's runs count (ErrRunActive, RunLimitError).
func (rt *Runtime) claimRow(ctx context.Context, r *run) error {
	if rt.claims == nil {
		return nil
	}
	if rt.lease != nil {
		if r.lease = rt.lease(); r.lease.Epoch == 0 {
			return fmt.Errorf("agent: start a run: %w", models.ErrFenced)
		}
	}
	row := &models.Run{ID: r.id, ThreadID: r.threadID, UserID: r.userID, Status: models.RunRunning,
		ModelName: r.model.Config.Name, StartedAt: rt.now().UTC(), InstanceID: r.lease.Instance, LeaseEpoch: r.lease.Epoch, RetryOf: r.retryOf, EditOf: r.editOf, ParentRun: r.parent, Continues: r.continues}
	perUser := rt.limits.Load().MaxActiveRunsPerUser
	err := rt.claims.ClaimRun(ctx, row, perUser)
	switch {
	case errors.Is(err, models.ErrConflict):
		return ErrRunActive
	case errors.Is(err, models.ErrTooManyRuns):
		return &RunLimitError{Limit: perUser}
	}
	return err
}

// abandon frees the thread a claimed run could not start in.
func (rt *Runtime) abandon(ctx context.Context, r *run, cause error) {
	if rt.claims == nil {
		return
	}
	if err := rt.claims.AbandonRun(ctx, r.id, r.lease); err != nil {
		rt.log.Error("free the thread of a run that could not start", "thread", r.threadID, "run", r.id, "cause", cause, "err", err)
	}
}

func (rt *Runtime) release(r *run) {
	rt.mu.Lock()
	if rt.active[r.threadID] == r {
		delete(rt.active, r.threadID)
		if rt.byUser[r.userID]--; rt.byUser[r.userID] <= 0 {
			delete(rt.byUser, r.userID)
		}
	}
	rt.mu.Unlock()
}

// Commands reports whether runs may be offered commands at all: the bash
// tool is configured. A run offered none although they exist has the
// reason in its lead's prompt.
func (rt *Runtime) Commands() bool {
	cat := rt.cat.Load()
	return cat.withCommands != cat.withoutCommands
}

// Drain stops accepting runs (ErrShuttingDown) and waits, until ctx ends,
// for the running ones to end by themselves: the first half of a stop
// that lets work finish (a rolling upgrade, docs/OPERATIONS.md). Shutdown
// then interrupts what is left. The waiting goroutine it leaves when ctx
// ends is over once Shutdown has ended the runs.
func (rt *Runtime) Drain(ctx context.Context) error {
	rt.mu.Lock()
	rt.closed = true
	rt.mu.Unlock()
	done := make(chan struct{})
	go func() { rt.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown stops accepting runs, cancels the running ones and waits (until
// ctx ends) for them to write their terminal state.
func (rt *Runtime) Shutdown(ctx context.Context) error {
	return rt.stop(ctx, ErrShuttingDown)
}

// stop ends the runs with cause and waits for them (Shutdown, Release).
func (rt *Runtime) stop(ctx context.Context, cause error) error {
	rt.cancelAll(cause, true)
	done := make(chan struct{})
	go func() {
		rt.wg.Wait()
		rt.exec.wait()
		// Abandoned calls (strays) are waited for too: a tool that
		// ignored its cancellation may still be writing to a workspace.
		rt.strays.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		rt.stopBase()
		rt.exec.close()
		return nil
	case <-ctx.Done():
		rt.stopBase()
		if n := rt.strays.abandoned.Load(); n > 0 {
			return fmt.Errorf("agent: shutdown: %d abandoned calls still running: %w", n, ctx.Err())
		}
		return fmt.Errorf("agent: shutdown: %w", ctx.Err())
	}
}

// cancelAll ends every active run's context with cause, first closing the
// runtime to new runs when closing, and returns the runs.
func (rt *Runtime) cancelAll(cause error, closing bool) []*run {
	rt.mu.Lock()
	rt.closed = rt.closed || closing
	runs := make([]*run, 0, len(rt.active))
	for _, r := range rt.active {
		runs = append(runs, r)
	}
	rt.mu.Unlock()
	for _, r := range runs {
		r.cancel(cause)
	}
	return runs
}

// Abandon stops every run of this instance without ending it here: its
// lease was taken over (docs/DESIGN.md §14), so another instance owns
// them now, and every write they would still make is refused in the
// database (models.ErrFenced). Unlike Shutdown it leaves the runtime
// open for new runs. It waits, until ctx ends, for the runs to be gone
// and returns how many there were.
func (rt *Runtime) Abandon(ctx context.Context) int {
	runs := rt.cancelAll(ErrLeaseTaken, false)
	for _, r := range runs {
		select {
		case <-r.done:
		case <-ctx.Done():
			return len(runs)
		}
	}
	return len(runs)
}

// Release is Shutdown for a stop the runs outlive (a deploy, with
// runs.resume on; docs/DESIGN.md §11): from the moment it is called
// nothing more of any run is written, so each stays as its last commit
// left it, a checkpoint the next start (or another instance) resumes.
// It stops accepting runs, stops the running ones and waits, until ctx
// ends, for them to be gone. It returns how many there were.
func (rt *Runtime) Release(ctx context.Context) (int, error) {
	rt.released.Store(true)
	rt.mu.Lock()
	n := len(rt.active)
	rt.mu.Unlock()
	return n, rt.stop(ctx, ErrReleased)
}

// ActiveRuns is the number of runs in progress.
func (rt *Runtime) ActiveRuns() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return len(rt.active)
}

// Stats reports the registry size, queued subagents and executions by
// status.
func (rt *Runtime) Stats() Stats {
	st := rt.exec.stats()
	st.Abandoned = rt.strays.abandoned.Load()
	return st
}
