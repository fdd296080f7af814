package server

import (
	"context"
	"testing"
	"time"
)

// TestBrowserServerDown: when the server goes away mid-run, the page says
// it is reconnecting, running cards stop spinning and say they have no
// connection, and Cancel, Stop and Send are disabled.
func TestBrowserServerDown(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 1500, 2)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("down")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")
	b.allowErrors(`WebSocket|ERR_CONNECTION_REFUSED|net::`)

	b.sendMessage("Two jobs:\n- alpha\n- beta")
	b.waitFor("two running cards", `[...document.querySelectorAll("#messages section.card")].filter((c) => c.dataset.status === "running").length === 2`, 20*time.Second)

	// The server goes: no new connections, and its sockets close.
	_ = a.http.Listener.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = a.hub.Close(ctx)

	b.waitFor("the page offline", `document.documentElement.hasAttribute("data-offline") && document.querySelector("#conn-status").textContent === "Reconnecting…"`, 10*time.Second)
	got := evalAs[map[string]any](b, `(() => {
		const card = document.querySelector('#messages section.card[data-status="running"]');
		return {
			status: getComputedStyle(card.querySelector(".card-status"), "::after").content,
			spin: getComputedStyle(card.querySelector(".card-icon"), "::before").animationName,
			cancel: [...document.querySelectorAll(".card-cancel")].every((b) => b.disabled),
			stop: document.querySelector("#stop-button").disabled,
			send: document.querySelector("#send-button").disabled,
		};
	})()`)
	if got["status"] != `" · no connection"` || got["spin"] != "none" {
		t.Errorf("a running card offline: status %v, animation %v", got["status"], got["spin"])
	}
	if got["cancel"] != true || got["stop"] != true || got["send"] != true {
		t.Errorf("controls offline: %v, want Cancel, Stop and Send disabled", got)
	}
	b.shot("offline")
}
