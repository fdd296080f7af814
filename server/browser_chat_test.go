package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"herd/agent"

	"github.com/chromedp/chromedp"
)

// TestBrowserChat is the walking skeleton as a newcomer uses it: set up
// the admin, sign in, start a thread, watch the answer stream in, reload
// and find the same conversation; hostile Markdown stays inert; the page
// fits a phone.
func TestBrowserChat(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 200, 25), demoModel("demo-deep", 200, 25)))
	b := newBrowser(t, a.http.URL)

	// An empty instance sends everyone to set-up, which asks for the
	// link herd printed; that link shows the form.
	b.navigate("/")
	b.waitFor("the set-up instructions", `location.pathname === "/setup" && document.body.innerText.includes("set-up link herd printed")`, 10*time.Second)
	link, err := a.srv.SetupURL(context.Background(), "")
	if err != nil || link == "" {
		t.Fatalf("set-up link %q, %v", link, err)
	}
	b.navigate(link)
	b.do("set-up page", chromedp.WaitVisible(chromedp.CSS(`form[action="/setup"]`)))
	b.shot("setup")
	b.do("create the admin",
		chromedp.SendKeys(chromedp.CSS(`input[name="email"]`), "admin@example.com"),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), "correct horse"),
		chromedp.SendKeys(chromedp.CSS(`input[name="password_confirm"]`), "correct horse"),
		chromedp.Submit(chromedp.CSS(`form[action="/setup"]`)),
	)
	b.waitFor("the thread list", `location.pathname === "/"`, 10*time.Second)

	// Sign out and in again through the sign-in page.
	b.do("sign out", chromedp.Submit(chromedp.CSS(`form[action="/logout"]`)))
	b.waitFor("the sign-in page", `location.pathname === "/login"`, 10*time.Second)
	b.do("sign in",
		chromedp.WaitVisible(chromedp.CSS(`form[action="/login"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="email"]`), "admin@example.com"),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), "correct horse"),
		chromedp.Submit(chromedp.CSS(`form[action="/login"]`)),
	)
	b.waitFor("the thread list", `location.pathname === "/"`, 10*time.Second)
	b.shot("threads-empty")

	b.activate("new thread", `a[href="/threads/new"]`)
	b.waitFor("the new-thread page", `location.pathname === "/threads/new" && document.documentElement.dataset.herdReady === "1"`, 10*time.Second)
	b.shot("thread-new")

	// The thread is created with its first message, titled from it.
	b.sendMessage("What can you do?")
	b.waitFor("the thread page", `/^\/threads\/[0-9a-f-]{36}$/.test(location.pathname) && !!document.querySelector("#herd-state")`, 10*time.Second)
	if title := evalAs[string](b, `document.querySelector("#thread-title").textContent`); title != "What can you do?" {
		t.Errorf("the new thread is titled %q, want its first message", title)
	}
	// The answer streams in: a streaming bubble first, then the message.
	b.waitFor("streamed text", `(() => { const s = document.querySelector(".msg-streaming .msg-body"); return s && s.textContent.length > 10; })()`, 10*time.Second)
	b.shot("streaming")
	b.waitFor("the persisted answer", `!document.querySelector(".msg-streaming") && document.querySelectorAll("article.msg-ai .msg-body").length === 1`, 20*time.Second)
	b.waitFor("the composer idle again", `document.querySelector("#composer").dataset.state === "idle" && document.querySelector("#stop-button").hidden`, 10*time.Second)
	// Send waits for a message: blank input keeps it disabled.
	if !evalAs[bool](b, `document.querySelector("#send-button").disabled`) {
		t.Error("Send is enabled with an empty message")
	}
	b.do("type spaces", chromedp.SendKeys(`#composer-input`, "   "))
	if !evalAs[bool](b, `document.querySelector("#send-button").disabled`) {
		t.Error("Send is enabled with a blank message")
	}
	b.do("type a word", chromedp.SendKeys(`#composer-input`, "hi"))
	b.do("Send enabled", chromedp.WaitEnabled(`#send-button`))
	evalAs[chromedp.Void](b, `document.querySelector("#composer-input").value = ""`)
	before := evalAs[string](b, `document.querySelector("#messages").innerText`)
	b.shot("answered")

	// A reload rebuilds the same conversation from the database.
	b.reload()
	b.waitFor("messages after reload", `document.querySelectorAll("article.msg").length === 2`, 10*time.Second)
	after := evalAs[string](b, `document.querySelector("#messages").innerText`)
	if after != before {
		t.Errorf("after reload the conversation reads\n%q\nwant\n%q", after, before)
	}

	// Hostile input renders inert, in the user's message and in the
	// answer that quotes it, live and after a reload.
	b.allowErrors(`img|onerror|x\.png|404`)
	hostile := "**bold** then <script>window.__pwned = 1</script> and <img src=x onerror=\"window.__pwned = 2\">\n\n<img src=x onerror=\"window.__pwned = 3\">"
	b.sendMessage(hostile)
	b.waitFor("the answer", `document.querySelectorAll("article.msg-ai .msg-body").length === 2 && !document.querySelector(".msg-streaming")`, 20*time.Second)
	for _, when := range []string{"live", "after reload"} {
		if when == "after reload" {
			b.reload()
			b.waitFor("messages after reload", `document.querySelectorAll("article.msg").length === 4`, 10*time.Second)
		}
		if n := evalAs[int](b, `document.querySelectorAll("#messages script, #messages img[onerror], #messages [onerror]").length`); n != 0 {
			t.Errorf("%s: %d live script/onerror elements in the messages", when, n)
		}
		if v := evalAs[bool](b, `window.__pwned === undefined`); !v {
			t.Errorf("%s: the hostile message ran script", when)
		}
		if n := evalAs[int](b, `document.querySelectorAll("#messages article.msg-human strong").length`); n != 1 {
			t.Errorf("%s: Markdown in the user's message not rendered (%d <strong>)", when, n)
		}
	}
	b.shot("hostile-inert")

	// A phone-width screen: no horizontal scroll, composer reachable.
	b.do("phone viewport", chromedp.EmulateViewport(375, 740, chromedp.EmulateMobile))
	b.reload()
	b.waitFor("messages", `document.querySelectorAll("article.msg").length === 4`, 10*time.Second)
	if w := evalAs[int](b, `document.documentElement.scrollWidth`); w > 375 {
		t.Errorf("page is %d px wide on a 375 px screen", w)
	}
	b.shot("phone")

	if n, _ := a.store.LastSeq(context.Background(), threadOf(t, a)); n == 0 {
		t.Error("nothing persisted")
	}
}

// threadOf returns the only thread of the app's only user.
func threadOf(t *testing.T, a *testApp) string {
	t.Helper()
	us, err := a.store.Users(context.Background())
	if err != nil || len(us) != 1 {
		t.Fatalf("users: %v %v", us, err)
	}
	ts, err := a.store.Threads(context.Background(), us[0].ID)
	if err != nil || len(ts) != 1 {
		t.Fatalf("threads: %v %v", ts, err)
	}
	return ts[0].ID
}

// TestBrowserReconnect drops the socket under an open page: the page
// reconnects with its last seq and shows what happened meanwhile exactly
// once.
func TestBrowserReconnect(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 100, 5)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("reconnect")
	b := newBrowser(t, a.http.URL)
	b.signIn("ann@example.com", "password123")
	b.navigate("/threads/" + th)
	b.sendMessage("first")
	b.waitFor("the first answer", `document.querySelectorAll("article.msg").length === 2 && !document.querySelector(".msg-streaming")`, 20*time.Second)
	a.waitIdle(th) // the answer shows before the run writes its end

	for round := range 3 {
		a.dropAll()
		// Meanwhile, the conversation goes on without this page.
		if _, err := a.rt.Start(context.Background(), agent.StartRequest{ThreadID: th, UserID: u.id, Content: fmt.Sprintf("while you were away %d", round)}); err != nil {
			t.Fatal(err)
		}
		a.waitIdle(th)
		want := 2 * (round + 2)
		b.waitFor("the missed messages", fmt.Sprintf(`document.querySelectorAll("article.msg").length === %d`, want), 20*time.Second)
	}
	ids := evalAs[[]string](b, `[...document.querySelectorAll("article.msg")].map(a => a.id)`)
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("message %s shown twice", id)
		}
		seen[id] = true
	}
	msgs, _ := a.store.Messages(context.Background(), th)
	if len(ids) != len(msgs) {
		t.Errorf("page shows %d messages, the database has %d", len(ids), len(msgs))
	}
	b.shot("after-reconnects")
}
