package server

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"herd/agent"
	"herd/models"
	"herd/views"
)

// The admin usage page's ranges, in whole UTC days ending today.
const (
	usageDaysDefault = 30
	usageDaysMax     = 365
)

// usageDayChoices are the ranges the page's picker offers; any other
// ?days= within bounds is shown as asked.
var usageDayChoices = []int{7, 30, 90, 365}

// usageHistory reads ?days= and the ledger over that range.
func (s *Server) usageHistory(c echo.Context) (models.UsageHistory, int, error) {
	days := usageDaysDefault
	if raw := c.QueryParam("days"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > usageDaysMax {
			return models.UsageHistory{}, 0, errBadRequest("days must be a whole number from 1 to %d", usageDaysMax)
		}
		days = n
	}
	h, err := s.store.UsageHistory(c.Request().Context(), s.now(), days)
	return h, days, err
}

// usageTotalsJSON is a series' totals over the range and per day, aligned
// with usageHistoryJSON.Days.
type usageTotalsJSON struct {
	Total models.UsageTotals   `json:"total"`
	Days  []models.UsageTotals `json:"days"`
	// Cost is what the tokens cost per currency, from the models' prices;
	// absent when none of its models has one.
	Cost costs `json:"cost,omitempty"`
}

type userUsageJSON struct {
	UserID string `json:"user_id"`
	Email  string `json:"email"`
	usageTotalsJSON
}

type modelUsageJSON struct {
	Model       string `json:"model"`
	DisplayName string `json:"display_name"`
	usageTotalsJSON
}

// usageHistoryJSON is GET /api/admin/usage (docs/API.md).
type usageHistoryJSON struct {
	Days    []string         `json:"days"`
	ByUser  []userUsageJSON  `json:"by_user"`
	ByModel []modelUsageJSON `json:"by_model"`
	Totals  usageTotalsJSON  `json:"totals"`
}

func (s *Server) apiAdminUsage(c echo.Context) error {
	h, _, err := s.usageHistory(c)
	if err != nil {
		return err
	}
	prices := s.prices()
	totals := func(s models.UsageSeries, c costs) usageTotalsJSON {
		return usageTotalsJSON{Total: s.Total, Days: s.Days, Cost: c}
	}
	out := usageHistoryJSON{
		Days:    h.Days,
		ByUser:  make([]userUsageJSON, len(h.ByUser)),
		ByModel: make([]modelUsageJSON, len(h.ByModel)),
		Totals:  totals(h.Total, historyCost(prices, h)),
	}
	for i, u := range h.ByUser {
		out.ByUser[i] = userUsageJSON{UserID: u.Key, Email: u.Label, usageTotalsJSON: totals(u, costOf(prices, u.ByModel))}
	}
	for i, m := range h.ByModel {
		out.ByModel[i] = modelUsageJSON{Model: m.Key, DisplayName: s.modelLabel(m.Key), usageTotalsJSON: totals(m, modelCost(prices, m))}
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) adminUsagePage(c echo.Context) error {
	return s.renderUsage(c, http.StatusOK, "", "")
}

// renderUsage is the usage page, with a form's flash or error.
func (s *Server) renderUsage(c echo.Context, status int, flash, errMsg string) error {
	h, days, err := s.usageHistory(c)
	if err != nil {
		return err
	}
	prices := s.prices()
	page := s.page(c, "Token usage")
	page.Flash, page.Error = flash, errMsg
	budgets, err := s.budgetsView(c.Request().Context())
	if err != nil {
		return err
	}
	p := views.UsagePage{
		Page:              page,
		Budgets:           budgets,
		Range:             days,
		DayChoices:        usageDayChoices,
		TokenUsageEnabled: s.settings.TokenUsage(),
		Total:             usageLine("Total", "", h.Total, historyCost(prices, h)),
		PerDay:            make([]views.UsageTotals, len(h.Days)),
		JSONURL:           "/api/admin/usage?days=" + strconv.Itoa(days),
	}
	p.Priced = len(prices) > 0
	if !slices.Contains(usageDayChoices, days) {
		p.DayChoices = append(slices.Clone(usageDayChoices), days)
		slices.Sort(p.DayChoices)
	}
	for i, d := range h.Days {
		day, err := time.Parse(time.DateOnly, d)
		if err != nil {
			return err
		}
		p.Days = append(p.Days, day)
		p.PerDay[i] = viewTotals(h.Total.Days[i])
	}
	for _, u := range h.ByUser {
		label := u.Label
		if label == "" { // the ledger outlived its user's row
			label = "(deleted user)"
		}
		p.ByUser = append(p.ByUser, usageLine(label, u.Key, u, costOf(prices, u.ByModel)))
	}
	for _, m := range h.ByModel {
		p.ByModel = append(p.ByModel, usageLine(s.modelLabel(m.Key), m.Key, m, modelCost(prices, m)))
	}
	return s.render(c, status, views.AdminUsage(p))
}

// modelCost is what a model's series cost; nil without a price.
func modelCost(prices map[string]agent.ModelPrice, m models.UsageSeries) costs {
	return costOf(prices, map[string]models.UsageTotals{m.Key: m.Total})
}

// historyCost is what the whole range cost, the sum of its models'.
func historyCost(prices map[string]agent.ModelPrice, h models.UsageHistory) costs {
	byModel := make(map[string]models.UsageTotals, len(h.ByModel))
	for _, m := range h.ByModel {
		byModel[m.Key] = m.Total
	}
	return costOf(prices, byModel)
}

// usageLine is a series of the history as the page shows it, with its
// cost (nil: no price applies).
func usageLine(label, title string, s models.UsageSeries, c costs) views.UsageLine {
	l := views.UsageLine{Label: label, Title: title, UsageTotals: viewTotals(s.Total), CacheRead: s.Total.CacheReadTokens, PerDay: make([]int64, len(s.Days))}
	if c != nil {
		l.Cost = c.String()
	}
	for i, d := range s.Days {
		l.PerDay[i] = d.TotalTokens
	}
	return l
}
