// herd's script: plain ES modules, no dependencies, no build step. Every
// page works without it; it adds copy buttons, and on the thread page (the
// one with #herd-state) thread.js streams the conversation and sends
// messages. Modules import each other by relative URL (/static/x.js); the
// server serves those with an ETag and no-cache, so a page never runs a
// stale module (server/server.go serveStatic). Only the thread page loads
// thread.js and the modules it imports; the new-thread page only the
// composer. Every page has the keyboard shortcuts (shortcuts.js); the
// thread page marks its hidden tab and the settings page offers desktop
// notifications (notify.js), and the admin console tests connections in
// place (console.js).

import { copyText } from "./copy.js";
import { shortcuts } from "./shortcuts.js";
import { threadLists } from "./threadlist.js";

// Copy buttons are rendered hidden: they only work with this script and a
// clipboard, so they appear only then.
function copyButtons() {
	if (!navigator.clipboard) return;
	for (const button of document.querySelectorAll("button[data-copy]")) {
		const field = document.getElementById(button.dataset.copy);
		if (!field) continue;
		button.hidden = false;
		button.addEventListener("click", async () => {
			if (!(await copyText(button, field.value))) field.select();
		});
	}
}

// A form that sends a password posts once: herd checks one password at a
// time per address and account and answers another sent meanwhile (a
// double click) with 429 (docs/DESIGN.md §10), which would replace the
// page the first one is about to bring.
function passwordFormsPostOnce() {
	const forms = new Set([...document.querySelectorAll('input[type="password"]')].map((input) => input.form).filter(Boolean));
	for (const form of forms) {
		form.addEventListener("submit", (ev) => {
			if (form.dataset.posting) ev.preventDefault();
			else form.dataset.posting = "1";
		});
	}
	// A page brought back by the back button may post again.
	window.addEventListener("pageshow", (ev) => {
		if (ev.persisted) for (const form of forms) delete form.dataset.posting;
	});
}

copyButtons();
passwordFormsPostOnce();
// Before threadLists: an Esc that closes the sidebar's drawer must still
// find it open, or it would stop a run too.
shortcuts();
threadLists();
const stateNode = document.getElementById("herd-state");
if (stateNode) {
	const [{ ThreadPage }, { watchRuns }] = await Promise.all([import("./thread.js"), import("./notify.js")]);
	watchRuns();
	new ThreadPage(JSON.parse(stateNode.textContent)).start();
} else if (document.getElementById("notify-setting")) {
	const { notifySetting } = await import("./notify.js");
	notifySetting();
} else if (document.querySelector("button[data-test]")) {
	const { testButtons } = await import("./console.js");
	testButtons();
} else if (document.getElementById("new-thread")) {
	const { Composer } = await import("./composer.js");
	new Composer({}).listen();
	document.documentElement.dataset.herdReady = "1";
}
