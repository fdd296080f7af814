// What a hidden tab says about its thread's run: the title ("● Running —
// title", then "✓ Done —", "✕ Failed —" or "■ Stopped —") and a dot on the
// favicon, both put back when the tab is shown; and, when the user opted
// in on the settings page, a desktop notification when a run ends there.
// The opt-in is this browser's (localStorage), as the permission is.

const OPT_IN = "herd.notify";

const MARKS = {
	running: { sign: "●", word: "Running", colour: "#d08700" },
	completed: { sign: "✓", word: "Done", colour: "#1a7f37" },
	failed: { sign: "✕", word: "Failed", colour: "#cf222e" },
	cancelled: { sign: "■", word: "Stopped", colour: "#6e7781" },
};

const supported = () => "Notification" in window && window.isSecureContext;
const optedIn = () => supported() && localStorage.getItem(OPT_IN) === "1" && Notification.permission === "granted";

// watchRuns marks the tab of the thread page while it is hidden. Runs are
// told by herd:run events (static/composer.js); a run going when the tab
// is hidden shows as running.
export function watchRuns() {
	const link = document.querySelector('link[rel="icon"]');
	const plainIcon = link?.href ?? "";
	let base = document.title; // the title without a mark
	let shown = null; // the title this module set, while it shows
	let state = null; // the mark shown, while hidden
	let svg = null; // the favicon's text, fetched when first marked

	const threadTitle = () => document.getElementById("thread-title")?.textContent.trim() || "herd";

	async function icon(mark) {
		if (!link) return;
		svg ??= fetch(plainIcon).then((r) => (r.ok ? r.text() : null)).catch(() => null);
		const text = await svg;
		// The tab may have been shown, or marked otherwise, meanwhile.
		if (!text || state !== mark) return;
		const dot = `<circle cx="25" cy="7" r="6.5" fill="${MARKS[mark].colour}" stroke="#fff" stroke-width="1.5"/></svg>`;
		link.href = "data:image/svg+xml," + encodeURIComponent(text.replace(/<\/svg>\s*$/, dot));
	}

	function mark(next) {
		// Another part renamed the page meanwhile (the model named the
		// thread): that is the title to come back to.
		if (document.title !== shown) base = document.title;
		state = next;
		shown = `${MARKS[next].sign} ${MARKS[next].word} — ${threadTitle()}`;
		document.title = shown;
		icon(next);
	}

	function unmark() {
		if (state === null) return;
		if (document.title === shown) document.title = base;
		state = null;
		shown = null;
		if (link) link.href = plainIcon;
	}

	const running = () => document.getElementById("composer")?.dataset.state === "running";

	document.addEventListener("visibilitychange", () => {
		if (!document.hidden) unmark();
		else if (running()) mark("running");
	});
	document.addEventListener("herd:run", (ev) => {
		if (!document.hidden) return;
		const status = ev.detail.running ? "running" : (MARKS[ev.detail.status] ? ev.detail.status : "completed");
		mark(status);
		if (status !== "running") notify(status, threadTitle());
	});
	// A rename while hidden replaces the mark; put it back on the new title.
	const title = document.querySelector("title");
	if (title) {
		new MutationObserver(() => {
			if (state !== null && document.title !== shown) mark(state);
		}).observe(title, { childList: true, characterData: true, subtree: true });
	}
}

// notify shows the desktop notification of a run's end; a click on it
// brings the tab forward.
function notify(status, title) {
	if (!optedIn()) return;
	const n = new Notification(`${MARKS[status].word} — ${title}`, {
		body: "herd finished working on this thread.",
		icon: "/static/icon-192.png",
		tag: `herd-${location.pathname}`,
	});
	n.addEventListener("click", () => {
		window.focus();
		n.close();
	});
}

// notifySetting makes the settings page's switch work: turning it on asks
// the browser's permission (only on that click, as browsers require).
export function notifySetting() {
	const box = document.getElementById("notify-setting");
	const toggle = document.getElementById("notify-toggle");
	const note = document.getElementById("notify-note");
	if (!box || !toggle || !supported()) return;
	box.hidden = false;
	toggle.checked = optedIn();
	if (Notification.permission === "denied") note.textContent = "This browser blocks herd's notifications: allow them in its site settings first.";
	toggle.addEventListener("change", async () => {
		if (!toggle.checked) {
			localStorage.removeItem(OPT_IN);
			note.textContent = "Notifications off.";
			return;
		}
		const permission = await Notification.requestPermission();
		toggle.checked = permission === "granted";
		if (toggle.checked) {
			localStorage.setItem(OPT_IN, "1");
			note.textContent = "Notifications on: you will hear when a run ends in a background tab.";
		} else note.textContent = "The browser did not allow notifications; allow them in its site settings to turn this on.";
	});
}
