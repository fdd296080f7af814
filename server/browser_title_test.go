package server

import (
	"testing"
	"time"
)

// TestBrowserModelTitle: a first message sent from the new-thread page
// opens the thread under its first message's title; the model's title
// then reaches the open page live — heading, tab and sidebar entry — and
// the usage panel counts the title call under the lead.
func TestBrowserModelTitle(t *testing.T) {
	// A slow title, so the page is open when it comes.
	a, fake := openaiTitleApp(t, "Kyoto trip in March", 300*time.Millisecond)
	u := a.newUser("ann@example.com", false)
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.navigate("/threads/new")
	b.waitFor("the new-thread page", `document.documentElement.dataset.herdReady === "1"`, 10*time.Second)
	b.sendMessage("can you plan my trip to kyoto in march?")
	b.waitFor("the thread page", `/^\/threads\/[0-9a-f-]{36}$/.test(location.pathname) && !!document.querySelector("#herd-state")`, 10*time.Second)
	b.waitFor("the model's title everywhere on the page", `(() => {
		const want = "Kyoto trip in March";
		const item = document.querySelector('#sidebar-list a[aria-current="page"]');
		return document.querySelector("#thread-title").textContent === want && document.title === want + " · herd"
			&& item?.textContent === want && item.closest("li").dataset.title === want
			&& document.querySelector("#rename-title").value === want;
	})()`, 20*time.Second)
	b.waitFor("the title call in the lead's figures", `document.querySelector('[data-usage="lead"]')?.textContent === "596"`, 20*time.Second)
	b.shot("model-title")
	if n := len(titleCalls(fake)); n != 1 {
		t.Errorf("%d title calls, want 1", n)
	}
	// A reload shows the same.
	b.navigate(evalAs[string](b, `location.pathname`))
	b.waitFor("the title after a reload", `document.querySelector("#thread-title").textContent === "Kyoto trip in March"`, 10*time.Second)
}
