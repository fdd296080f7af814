// Keyboard shortcuts of every signed-in page, and the dialog that lists
// them (? or Ctrl+/). The keys are those ChatGPT and Open WebUI use where
// they have one (Ctrl+Shift+O, Shift+Esc, Ctrl+Shift+S, Ctrl+Shift+C,
// Ctrl+K, Ctrl+/), so a hand that knows them finds them here; Cmd stands
// for Ctrl on a Mac. One table drives both the keys and the dialog, so the
// dialog cannot list a key that does nothing.

import { touchScreen } from "./dom.js";

const MAC = /Mac|iPhone|iPad/.test(navigator.platform);
const MOD = MAC ? "⌘" : "Ctrl";

const byID = (id) => document.getElementById(id);
const visible = (el) => !!el && el.getClientRects().length > 0;

// typing says whether the key goes into a field (a letter typed there is
// text, not a shortcut).
function typing(el) {
	return !!el && (el.isContentEditable || el.matches("input:not([type=checkbox], [type=radio], [type=button], [type=submit]), textarea, select"));
}

function focusComposer() {
	const input = byID("composer-input");
	if (!input) return false;
	input.focus();
	return true;
}

// stopRun presses Stop while a run runs; Esc does nothing else then.
function stopRun() {
	const stop = byID("stop-button");
	if (!visible(stop) || stop.disabled) return false;
	stop.click();
	return true;
}

// search focuses the visible thread search: the sidebar's (opening its
// drawer on a narrow screen), else the thread list's; pages without one
// go to the thread list, which has it.
function search() {
	const list = byID("thread-q");
	if (visible(list)) return list.focus(), true;
	const field = byID("sidebar-q");
	if (!field) return location.assign("/"), true;
	if (!visible(field)) toggleSidebar();
	field.focus();
	return true;
}

// toggleSidebar opens or closes the drawer on a narrow screen and hides or
// shows the sidebar on a wide one (app.css, .sidebar-hidden).
function toggleSidebar() {
	const toggle = document.querySelector(".sidebar-toggle");
	if (visible(toggle)) {
		toggle.click();
		return true;
	}
	if (!byID("sidebar")) return false;
	document.body.classList.toggle("sidebar-hidden");
	return true;
}

// copyLastAnswer presses the Copy of the last answer, which says Copied.
function copyLastAnswer() {
	const button = [...document.querySelectorAll("#messages .msg-ai .msg-copy")].at(-1);
	if (!visible(button)) return false;
	button.click();
	return true;
}

// toggleCards expands every card when one is collapsed, else collapses
// them all.
function toggleCards() {
	const toggles = [...document.querySelectorAll("#messages section.card .card-toggle")];
	if (toggles.length === 0) return false;
	const collapsed = toggles.filter((t) => t.getAttribute("aria-expanded") !== "true");
	for (const t of collapsed.length > 0 ? collapsed : toggles) t.click();
	return true;
}

// SHORTCUTS: combos are what comboOf makes of a key press; keys what the
// dialog shows; a single-character combo never fires in a field.
const SHORTCUTS = [
	{ combos: ["?", "mod+/"], keys: [["?"], [MOD, "/"]], what: "Show these shortcuts", run: () => openDialog() },
	{ combos: ["mod+shift+o"], keys: [[MOD, "Shift", "O"]], what: "New thread", run: () => location.assign("/threads/new") },
	{ combos: ["/", "shift+escape"], keys: [["/"], ["Shift", "Esc"]], what: "Focus the message field", run: focusComposer },
	{ combos: ["escape"], keys: [["Esc"]], what: "Stop the run (while one runs)", run: stopRun },
	{ combos: ["mod+k"], keys: [[MOD, "K"]], what: "Search threads", run: search },
	{ combos: ["mod+shift+s"], keys: [[MOD, "Shift", "S"]], what: "Show or hide the sidebar", run: toggleSidebar },
	{ combos: ["mod+shift+c"], keys: [[MOD, "Shift", "C"]], what: "Copy the last answer", run: copyLastAnswer },
	{ combos: ["mod+shift+e"], keys: [[MOD, "Shift", "E"]], what: "Expand or collapse all cards", run: toggleCards },
];

// comboOf names a key press: a printable key alone is itself ("?", "/"),
// anything else its modifiers and key ("mod+shift+o", "escape").
export function comboOf(ev) {
	const mod = ev.ctrlKey || ev.metaKey;
	if (!mod && !ev.altKey && ev.key.length === 1) return ev.key;
	const parts = [];
	if (mod) parts.push("mod");
	if (ev.altKey) parts.push("alt");
	if (ev.shiftKey) parts.push("shift");
	parts.push(ev.key.toLowerCase());
	return parts.join("+");
}

function onKey(ev) {
	if (ev.defaultPrevented || ev.isComposing || byID("shortcuts")?.open) return;
	const combo = comboOf(ev);
	const s = SHORTCUTS.find((x) => x.combos.includes(combo));
	if (!s) return;
	const target = ev.target;
	if (combo.length === 1 && typing(target)) return;
	// Esc in another field is that field's (a search box clears itself).
	if (combo === "escape" && typing(target) && target.id !== "composer-input") return;
	if (combo === "escape" && document.body.classList.contains("sidebar-open")) return;
	if (s.run() !== false) ev.preventDefault();
}

function kbd(keys) {
	const span = document.createElement("span");
	keys.forEach((k, i) => {
		if (i > 0) span.append("+");
		const key = document.createElement("kbd");
		key.textContent = k;
		span.append(key);
	});
	return span;
}

// dialog builds the shortcuts dialog once: a modal <dialog> keeps the
// focus inside it and closes on Esc, giving the focus back.
function dialog() {
	let d = byID("shortcuts");
	if (d) return d;
	d = document.createElement("dialog");
	d.id = "shortcuts";
	d.className = "shortcuts";
	d.setAttribute("aria-labelledby", "shortcuts-title");
	const head = document.createElement("h2");
	head.id = "shortcuts-title";
	head.textContent = "Keyboard shortcuts";
	const table = document.createElement("table");
	const body = table.createTBody();
	for (const s of SHORTCUTS) {
		const row = body.insertRow();
		const what = document.createElement("th");
		what.scope = "row";
		what.textContent = s.what;
		const keys = row.insertCell();
		s.keys.forEach((k, i) => {
			if (i > 0) keys.append(" or ");
			keys.append(kbd(k));
		});
		row.prepend(what);
	}
	const note = document.createElement("p");
	note.className = "muted";
	note.textContent = "Single keys (? and /) work when you are not typing in a field.";
	const close = document.createElement("button");
	close.type = "button";
	close.className = "button-secondary";
	close.textContent = "Close";
	close.addEventListener("click", () => d.close());
	d.append(head, table, note, close);
	// Tab and Shift+Tab go round the dialog's controls: a modal dialog
	// makes the page inert, but Tab would still leave for the browser's
	// own controls.
	d.addEventListener("keydown", (ev) => {
		if (ev.key !== "Tab") return;
		const stops = [...d.querySelectorAll("button, a[href], input, [tabindex]:not([tabindex='-1'])")];
		const first = stops[0];
		const last = stops.at(-1);
		if (ev.shiftKey ? document.activeElement === first : document.activeElement === last) {
			ev.preventDefault();
			(ev.shiftKey ? last : first).focus();
		}
	});
	let back = null;
	d.addEventListener("close", () => back?.isConnected && back.focus());
	d.openFrom = (el) => {
		back = el;
		d.showModal();
		close.focus();
	};
	document.body.append(d);
	return d;
}

function openDialog() {
	dialog().openFrom(document.activeElement);
}

// shortcuts listens for the keys and shows the header's Shortcuts button
// where there is a keyboard to use them.
export function shortcuts() {
	document.addEventListener("keydown", onKey);
	const button = byID("shortcuts-button");
	if (!button) return;
	button.hidden = touchScreen();
	button.addEventListener("click", openDialog);
}
