package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"herd/agent"
	"herd/agent/event"
	"herd/models"
	"herd/views"
)

// settingBudgets is where the admin's budgets are stored, as BudgetsJSON.
const settingBudgets = "budgets"

// BudgetRule is a token budget: Tokens per Period (day, week or month, UTC
// calendar periods: models.PeriodBounds). Tokens 0 is no budget.
type BudgetRule struct {
	Tokens int64  `json:"tokens"`
	Period string `json:"period,omitempty"`
}

// Budgets are the token budgets (docs/DESIGN.md §6): Default for every
// user, Users for the users who have their own (one with Tokens 0 has
// none, whatever the default).
type Budgets struct {
	Default BudgetRule            `json:"default"`
	Users   map[string]BudgetRule `json:"users"`
}

// rule is the budget that applies to userID; ok is false for none.
func (b *Budgets) rule(userID string) (BudgetRule, bool) {
	r, own := b.Users[userID]
	if !own {
		r = b.Default
	}
	return r, r.Tokens > 0
}

// check says what is wrong with b, in plain words, or nil.
func (b *Budgets) check() error {
	if err := b.Default.check("default"); err != nil {
		return err
	}
	for id, r := range b.Users {
		if err := r.check("users." + id); err != nil {
			return err
		}
	}
	return nil
}

func (r BudgetRule) check(key string) error {
	switch {
	case r.Tokens < 0:
		return fmt.Errorf("%s.tokens must be 0 (no budget) or more, got %d", key, r.Tokens)
	case r.Tokens == 0 && r.Period == "":
		return nil
	}
	if _, _, ok := models.PeriodBounds(r.Period, time.Time{}); !ok {
		return fmt.Errorf("%s.period must be one of day, week, month, got %q", key, r.Period)
	}
	return nil
}

// LoadBudgets sets the config file's default budget (budgets.default),
// which holds until an admin first saves budgets, and reads the stored
// ones (docs/DESIGN.md §12).
func (s *Settings) LoadBudgets(ctx context.Context, seed BudgetRule) error {
	s.budgetSeed = seed
	b, err := s.storedBudgets(ctx)
	if err != nil {
		return err
	}
	s.budgets.Store(b)
	return nil
}

// storedBudgets are the budgets as the store has them: the config file's
// default while none were saved.
func (s *Settings) storedBudgets(ctx context.Context) (*Budgets, error) {
	v, err := s.store.Setting(ctx, settingBudgets)
	switch {
	case errors.Is(err, models.ErrNotFound):
		return &Budgets{Default: s.budgetSeed, Users: map[string]BudgetRule{}}, nil
	case err != nil:
		return nil, err
	}
	var b Budgets
	if err := json.Unmarshal([]byte(v), &b); err != nil {
		return nil, fmt.Errorf("settings: stored budgets: %w", err)
	}
	if b.Users == nil {
		b.Users = map[string]BudgetRule{}
	}
	return &b, nil
}

// Budgets are the budgets in force; never nil.
func (s *Settings) Budgets() *Budgets {
	if b := s.budgets.Load(); b != nil {
		return b
	}
	return &Budgets{Default: s.budgetSeed, Users: map[string]BudgetRule{}}
}

// SetBudgets stores b (checked), applies it here at once, and has every
// other instance read it again: the settings frame they reread on is the
// token gate's (server/cluster), sent unchanged.
func (s *Settings) SetBudgets(ctx context.Context, b *Budgets, pages Broadcaster) (prev *Budgets, err error) {
	v, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.store.SetSetting(ctx, settingBudgets, string(v)); err != nil {
		return nil, err
	}
	prev = s.budgets.Swap(b)
	pages.Publish("", "", event.Settings{TokenUsage: s.tokens.Load()})
	return prev, nil
}

// reloadBudgets reads the budgets again (Reload).
func (s *Settings) reloadBudgets(ctx context.Context) error {
	b, err := s.storedBudgets(ctx)
	if err != nil {
		return err
	}
	s.budgets.Store(b)
	return nil
}

// userBudget is the budget that applies to userID now, with what the
// ledger holds for its period (one query), and the period; a zero Budget
// and "" when none applies.
func (s *Server) userBudget(ctx context.Context, userID string) (agent.Budget, string, error) {
	return budgetOf(ctx, s.settings, s.store, userID, s.now())
}

// LedgerReader sums a user's ledger over a period; models.Store
// implements it.
type LedgerReader interface {
	UsedTokens(ctx context.Context, userID string, start, end time.Time) (int64, error)
}

// budgetOf is userBudget for settings and ledger at now.
func budgetOf(ctx context.Context, settings *Settings, ledger LedgerReader, userID string, now time.Time) (agent.Budget, string, error) {
	r, ok := settings.Budgets().rule(userID)
	if !ok {
		return agent.Budget{}, "", nil
	}
	start, end, _ := models.PeriodBounds(r.Period, now)
	used, err := ledger.UsedTokens(ctx, userID, start, end)
	if err != nil {
		return agent.Budget{}, "", err
	}
	return agent.Budget{Limit: r.Tokens, Used: used, ResetsAt: end}, r.Period, nil
}

// ResumedBudgets is agent.Options.BudgetOf: the budget a run resumed
// after a restart or a failover is given, as a new run would be.
func ResumedBudgets(settings *Settings, ledger LedgerReader) func(ctx context.Context, userID string) (agent.Budget, error) {
	return func(ctx context.Context, userID string) (agent.Budget, error) {
		b, _, err := budgetOf(ctx, settings, ledger, userID, time.Now())
		return b, err
	}
}

// budgetError refuses a run whose user's budget is used up (HTTP 429,
// budget_exhausted, with resets_at and Retry-After).
type budgetError struct {
	apiError
	resetsAt time.Time
}

func errBudget(b agent.Budget, period string) *budgetError {
	return &budgetError{
		apiError: apiError{http.StatusTooManyRequests, "budget_exhausted", fmt.Sprintf(
			// No figures: the token gate may hide them (docs/DESIGN.md §9).
			"Your token budget for %s is used up; it resets %s.", views.PeriodPhrase(period), agent.ResetTime(b.ResetsAt))},
		resetsAt: b.ResetsAt,
	}
}

// retryAfter is the whole seconds until the budget resets, at least 1.
func (e *budgetError) retryAfter(now time.Time) string {
	return strconv.Itoa(max(1, int(e.resetsAt.Sub(now).Seconds()+0.999)))
}

// checkBudget is the budget of u's next run, refused when it is spent.
func (s *Server) checkBudget(ctx context.Context, userID string) (agent.Budget, error) {
	b, period, err := s.userBudget(ctx, userID)
	if err != nil {
		return b, err
	}
	if b.Spent(b.Used) {
		return b, errBudget(b, period)
	}
	return b, nil
}

// budgetJSON is a budget as GET /api/auth/me shows it.
type budgetJSON struct {
	Limit    int64  `json:"limit"`
	Used     int64  `json:"used"`
	Period   string `json:"period"`
	ResetsAt string `json:"resets_at"`
}

func newBudgetJSON(b agent.Budget, period string) *budgetJSON {
	if b.Limit <= 0 {
		return nil
	}
	return &budgetJSON{Limit: b.Limit, Used: b.Used, Period: period, ResetsAt: b.ResetsAt.UTC().Format(time.RFC3339)}
}

// apiAdminBudgets answers the budgets in force (docs/API.md).
func (s *Server) apiAdminBudgets(c echo.Context) error {
	return c.JSON(http.StatusOK, s.settings.Budgets())
}

// apiAdminBudgetsPut replaces the budgets: checked, stored and applied at
// once on every instance; the next run of each user is checked against
// them.
func (s *Server) apiAdminBudgetsPut(c echo.Context) error {
	var b Budgets
	if err := bindJSON(c, &b); err != nil {
		return err
	}
	if err := s.saveBudgets(c, &b); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, &b)
}

// saveBudgets checks b, that each user it names exists, stores it, and
// puts each budget it changed on the audit log: the default's, and each
// user's own (target "default" or the user's id; a budget added has no
// before, one removed no after).
func (s *Server) saveBudgets(c echo.Context, b *Budgets) error {
	ctx := c.Request().Context()
	if b.Users == nil {
		b.Users = map[string]BudgetRule{}
	}
	if err := b.check(); err != nil {
		return errUnprocessable("%s", err)
	}
	if len(b.Users) > 0 {
		// One read of the users, not one per budget.
		us, err := s.store.Users(ctx)
		if err != nil {
			return err
		}
		for id := range b.Users {
			if !slices.ContainsFunc(us, func(u models.User) bool { return u.ID == id }) {
				return errUnprocessable("users.%s: no such user", id)
			}
		}
	}
	prev, err := s.settings.SetBudgets(ctx, b, s.pages)
	if err != nil {
		return err
	}
	s.auditBudgets(c, prev, b)
	return nil
}

// auditBudgets records what changed from prev to b, one entry per target.
func (s *Server) auditBudgets(c echo.Context, prev, b *Budgets) {
	if prev == nil {
		prev = &Budgets{}
	}
	if prev.Default != b.Default {
		s.audit(c, models.AuditBudgetUpdate, "default", prev.Default, b.Default)
	}
	ids := make([]string, 0, len(prev.Users)+len(b.Users))
	for id := range prev.Users {
		ids = append(ids, id)
	}
	for id := range b.Users {
		if _, ok := prev.Users[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		was, had := prev.Users[id]
		now, has := b.Users[id]
		if had == has && was == now {
			continue
		}
		var before, after any
		if had {
			before = was
		}
		if has {
			after = now
		}
		s.audit(c, models.AuditBudgetUpdate, id, before, after)
	}
}

// budgetNote is the composer's line about userID's budget (views.BudgetText),
// "" when none applies; under the token gate it gives a share, not
// tokens (docs/DESIGN.md §9).
func (s *Server) budgetNote(ctx context.Context, userID string) (string, error) {
	b, period, err := s.userBudget(ctx, userID)
	if err != nil || b.Limit <= 0 {
		return "", err
	}
	return views.BudgetText(b.Limit, b.Used, period, b.ResetsAt, s.settings.TokenUsage()), nil
}

// budgetsView is the usage page's budgets: the form's values and every
// user's spend of their current period, in one ledger query per period
// in use.
func (s *Server) budgetsView(ctx context.Context) (views.BudgetsView, error) {
	b := s.settings.Budgets()
	users, err := s.store.Users(ctx)
	if err != nil {
		return views.BudgetsView{}, err
	}
	v := views.BudgetsView{DefaultPeriod: cmp.Or(b.Default.Period, models.PeriodWeek)}
	if b.Default.Tokens > 0 {
		v.DefaultTokens = strconv.FormatInt(b.Default.Tokens, 10)
	}
	used := map[string]map[string]int64{} // by period, by user
	for _, u := range users {
		row := views.BudgetRow{UserID: u.ID, Email: u.Email, Period: v.DefaultPeriod}
		if own, ok := b.Users[u.ID]; ok {
			row.Own, row.Tokens, row.Period = true, strconv.FormatInt(own.Tokens, 10), cmp.Or(own.Period, v.DefaultPeriod)
		}
		if r, ok := b.rule(u.ID); ok {
			start, end, _ := models.PeriodBounds(r.Period, s.now())
			if used[r.Period] == nil {
				if used[r.Period], err = s.store.UsedTokensByUser(ctx, start, end); err != nil {
					return views.BudgetsView{}, err
				}
			}
			row.Limit, row.Used, row.ResetsAt = r.Tokens, used[r.Period][u.ID], end
		}
		v.Rows = append(v.Rows, row)
	}
	return v, nil
}

// adminBudgetsSubmit is the usage page's budgets form: the default and
// each user's own tokens (empty: the default; 0: none) and period.
func (s *Server) adminBudgetsSubmit(c echo.Context) error {
	b, err := budgetsForm(c)
	if err == nil {
		err = s.saveBudgets(c, b)
	}
	return formResult(c, err, "Budgets saved.", s.renderUsage)
}

// budgetsForm reads the budgets form.
func budgetsForm(c echo.Context) (*Budgets, error) {
	form, err := c.FormParams()
	if err != nil {
		return nil, errBadRequest("the form could not be read")
	}
	tokens := func(field, what string) (int64, error) {
		raw := strings.TrimSpace(form.Get(field))
		if raw == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return 0, errUnprocessable("%s must be a whole number of tokens, got %q", what, raw)
		}
		return n, nil
	}
	b := &Budgets{Users: map[string]BudgetRule{}}
	if b.Default.Tokens, err = tokens("default_tokens", "the default"); err != nil {
		return nil, err
	}
	b.Default.Period = form.Get("default_period")
	for field := range form {
		id, ok := strings.CutPrefix(field, "tokens_")
		if !ok || strings.TrimSpace(form.Get(field)) == "" {
			continue
		}
		n, err := tokens(field, "a user's tokens")
		if err != nil {
			return nil, err
		}
		b.Users[id] = BudgetRule{Tokens: n, Period: form.Get("period_" + id)}
	}
	return b, nil
}

// accountBudget is the account page's budget line and the cost of the
// budget's period at the models' prices; the cost only while token
// figures are shown (it is made of them, docs/DESIGN.md §9).
func (s *Server) accountBudget(ctx context.Context, userID string) (line, cost string, err error) {
	b, period, err := s.userBudget(ctx, userID)
	if err != nil || b.Limit <= 0 {
		return "", "", err
	}
	shown := s.settings.TokenUsage()
	line = views.BudgetText(b.Limit, b.Used, period, b.ResetsAt, shown)
	prices := s.prices()
	if !shown || len(prices) == 0 {
		return line, "", nil
	}
	start, end, _ := models.PeriodBounds(period, s.now())
	byModel, err := s.store.UsedByModel(ctx, userID, start, end)
	if err != nil {
		return "", "", err
	}
	if c := costOf(prices, byModel); c != nil {
		cost = c.String()
	}
	return line, cost, nil
}
