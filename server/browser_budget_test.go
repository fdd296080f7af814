package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"herd/agent"
	"herd/models"
)

// TestBrowserBudget: under a budget of 2,000 tokens a week the composer
// says what is left; a demo run that delegates a list stops with the
// budget, its end and a card saying so; the composer then says the budget
// is used up and refuses the next message with the reset time.
func TestBrowserBudget(t *testing.T) {
	a := newApp(t)
	admin, ann := a.newUser("admin@example.com", true), a.newUser("ann@example.com", false)
	admin.mustJSON("PUT", "/api/admin/budgets", map[string]any{"default": map[string]any{"tokens": 2000, "period": "week"}}, http.StatusOK, nil)
	_, monday, _ := models.PeriodBounds(models.PeriodWeek, time.Now())
	resets := agent.ResetTime(monday)
	th := ann.newThread("budget")

	b := newBrowser(t, a.http.URL)
	b.allowErrors(`status of 429`)
	b.signIn(ann.email, "password123")
	b.navigate("/threads/" + th)
	if got := evalAs[string](b, `document.querySelector("#budget-note").textContent`); got != "2,000 of 2,000 tokens left this week, resets "+resets+"." {
		t.Errorf("the composer's budget line: %q", got)
	}
	b.sendMessage("Look into each of these:\n- the alpha logs\n- the beta logs\n- the gamma logs\n- the delta logs\n- the epsilon logs\n- the zeta logs")
	b.waitFor("the run's end", `document.querySelector(".run-end") !== null`, 30*time.Second)
	if got := evalAs[string](b, `document.querySelector(".run-end").textContent`); !strings.Contains(got, "Stopped: the token budget for this period is used up (resets "+resets+").") {
		t.Errorf("the run's end says %q", got)
	}
	b.waitFor("a card capped by the budget", `[...document.querySelectorAll(".card-badge")].some((e) => !e.hidden && e.textContent === "capped: budget used up")`, 10*time.Second)
	b.waitFor("the budget line used up", `document.querySelector("#budget-note").textContent.startsWith("Your token budget for this week is used up")`, 10*time.Second)
	b.shot("budget-used-up")

	b.sendMessage("And now?")
	b.waitFor("the refusal", `document.querySelector("#composer-error").textContent.includes("resets `+resets+`")`, 10*time.Second)
	if got := evalAs[string](b, `document.querySelector("#composer-error").textContent`); !strings.HasPrefix(got, "Your token budget for this week is used up") {
		t.Errorf("the composer's refusal: %q", got)
	}
	if evalAs[bool](b, `!document.querySelector("#budget-note").hidden`) {
		t.Error("the budget line shows beside the refusal that says the same")
	}
	b.shot("budget-refused")
}
