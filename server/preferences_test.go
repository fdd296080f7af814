package server

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestPreferences: a user's theme reaches every page and their default
// model starts new threads and API runs; bad values get a clear 422 and
// change nothing; a thread that used a model keeps it.
func TestPreferences(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	other := a.newUser("bob@example.com", false)

	var p preferencesJSON
	u.mustJSON("GET", "/api/account/preferences", nil, http.StatusOK, &p)
	if p != (preferencesJSON{Theme: "system", EnterKey: "auto"}) {
		t.Fatalf("fresh preferences = %+v, want the system theme and the server's model", p)
	}
	if page := string(u.do("GET", "/", nil).body); strings.Contains(page, "data-theme") {
		t.Error("the system theme pins a scheme on the page")
	}

	for _, bad := range []string{`{"theme": "purple"}`, `{"default_model": "gpt-nope"}`, `{}`, `{"theme": "dark", "default_model": "gpt-nope"}`} {
		if r := u.do("PUT", "/api/account/preferences", bad); r.status != http.StatusUnprocessableEntity {
			t.Errorf("PUT %s: %d %s, want 422", bad, r.status, r.body)
		}
	}
	u.mustJSON("GET", "/api/account/preferences", nil, http.StatusOK, &p)
	if p.Theme != "system" || p.DefaultModel != "" {
		t.Fatalf("after refused changes the preferences are %+v", p)
	}

	u.mustJSON("PUT", "/api/account/preferences", map[string]string{"theme": "dark", "default_model": "demo-deep"}, http.StatusOK, &p)
	if p != (preferencesJSON{Theme: "dark", DefaultModel: "demo-deep", EnterKey: "auto"}) {
		t.Fatalf("saved preferences = %+v", p)
	}
	for _, path := range []string{"/", "/settings", "/account"} {
		if page := string(u.do("GET", path, nil).body); !strings.Contains(page, `<html lang="en" data-theme="dark"`) {
			t.Errorf("%s is not dark", path)
		}
	}
	if page := string(other.do("GET", "/", nil).body); strings.Contains(page, "data-theme") {
		t.Error("one user's theme reached another's pages")
	}

	fresh := u.newThread("fresh")
	if page := string(u.do("GET", "/threads/"+fresh, nil).body); !strings.Contains(page, `<option value="demo-deep" selected>`) {
		t.Error("a new thread's composer does not start with the user's model")
	}
	var listed struct{ Default string }
	u.mustJSON("GET", "/api/models", nil, http.StatusOK, &listed)
	if listed.Default != "demo-deep" {
		t.Errorf("GET /api/models says the default is %q, want the user's demo-deep", listed.Default)
	}
	var started struct{ Model string }
	u.mustJSON("POST", "/api/threads/"+fresh+"/runs", map[string]string{"content": "hello"}, http.StatusAccepted, &started)
	if started.Model != "demo-deep" {
		t.Errorf("a run without a model started with %q, want the user's demo-deep", started.Model)
	}
	a.waitIdle(fresh)

	// A thread that ran on demo-fast remembers it over the preference.
	used := u.newThread("used")
	u.mustJSON("POST", "/api/threads/"+used+"/runs", map[string]string{"content": "hello", "model": "demo-fast"}, http.StatusAccepted, &started)
	a.waitIdle(used)
	if page := string(u.do("GET", "/threads/"+used, nil).body); !strings.Contains(page, `<option value="demo-fast" selected>`) {
		t.Error("a thread's own model gave way to the preference")
	}

	// The form: the same rules, with the page again.
	r := u.do("POST", "/settings/preferences", url.Values{"theme": {"sepia"}, "default_model": {"demo-fast"}, "_csrf": {u.csrf}})
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "theme must be one of system, light, dark") {
		t.Errorf("bad theme by form: %d, want 422 with the rule", r.status)
	}
	r = u.do("POST", "/settings/preferences", url.Values{"theme": {"light"}, "default_model": {"demo-fast"}}, "X-CSRF-Token", "")
	if r.status != http.StatusForbidden {
		t.Errorf("form without CSRF: %d, want 403", r.status)
	}
	r = u.do("POST", "/settings/preferences", url.Values{"theme": {"light"}, "default_model": {"demo-fast"}, "_csrf": {u.csrf}})
	if body := string(r.body); r.status != http.StatusOK || !strings.Contains(body, "Preferences saved.") || !strings.Contains(body, `data-theme="light"`) {
		t.Errorf("form save: %d, want 200, saved, and the page already light", r.status)
	}
	u.mustJSON("GET", "/api/account/preferences", nil, http.StatusOK, &p)
	if p != (preferencesJSON{Theme: "light", DefaultModel: "demo-fast", EnterKey: "auto"}) {
		t.Errorf("after the form the preferences are %+v", p)
	}
}

// TestBrowserTheme: choosing Dark on the settings page turns every page
// dark, whatever the system says; System follows the browser again.
func TestBrowserTheme(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	bg := `getComputedStyle(document.body).backgroundColor`

	b.navigate("/settings")
	light := evalAs[string](b, bg)
	b.activate("choose dark", `input[name="theme"][value="dark"]`)
	b.activate("save", `form[action="/settings/preferences"] button[type="submit"]`)
	b.waitFor("saved", `document.querySelector(".notice-ok")?.textContent === "Preferences saved."`, 10*time.Second)
	dark := evalAs[string](b, bg)
	if dark == light || dark != "rgb(21, 24, 28)" {
		t.Errorf("the dark theme's background is %s (light: %s), want rgb(21, 24, 28)", dark, light)
	}
	b.shot("settings-dark")
	th := u.newThread("dark thread")
	b.openThread(th, "")
	if got := evalAs[string](b, bg); got != dark {
		t.Errorf("the thread page is %s, want the dark %s", got, dark)
	}
	b.shot("thread-dark")

	b.navigate("/settings")
	b.activate("choose system", `input[name="theme"][value="system"]`)
	b.activate("save", `form[action="/settings/preferences"] button[type="submit"]`)
	b.waitFor("saved", `document.querySelector(".notice-ok")?.textContent === "Preferences saved."`, 10*time.Second)
	if got := evalAs[string](b, bg); got != light {
		t.Errorf("with the system theme (light here) the background is %s, want %s", got, light)
	}
}
