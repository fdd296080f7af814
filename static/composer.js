// The composer: sends a message (starting a run), stops the active run,
// and shows what went wrong on its error line. One run at a time: Send is
// disabled while a run is active. Without a thread (the new-thread page)
// the first message creates the thread with its run, and opens it; a
// file attached there first creates the thread empty (POST /api/threads
// takes no attachments: the files need a thread to land in), and Send
// then starts its run and opens it. Send waits for the uploads.
//
// Enter sends on a desktop and adds a line on a touch screen, where Send
// sends (a phone's return key is the only way to break a line there); the
// user's setting (<html data-enter-key>, Settings) overrides both. The
// field keeps the focus: it has it on load and after Send and Stop.

import { Attachments } from "./attach.js";
import { errorMessage, post, postFromButton } from "./api.js";
import { touchScreen } from "./dom.js";
import { keepPinned } from "./pinned.js";

// enterSends says whether Enter sends a message (else it adds a line):
// the user's setting, or automatic (docs/API.md "Preferences").
export function enterSends() {
	const mode = document.documentElement.dataset.enterKey;
	if (mode === "send" || mode === "newline") return mode === "send";
	return !touchScreen();
}

// isSendKey is the keydown of a message field that sends it: Enter where
// Enter sends (Shift+Enter always breaks the line), Ctrl/Cmd+Enter
// anywhere, never while an input method composes.
export function isSendKey(ev) {
	if (ev.key !== "Enter" || ev.isComposing || ev.shiftKey) return false;
	return ev.ctrlKey || ev.metaKey || enterSends();
}

export class Composer {
	constructor({ threadID, activeRun, onSend }) {
		this.threadID = threadID;
		this.onSend = onSend;
		this.form = document.getElementById("composer");
		this.input = document.getElementById("composer-input");
		this.model = document.getElementById("composer-model");
		this.send = document.getElementById("send-button");
		this.stop = document.getElementById("stop-button");
		this.errorLine = document.getElementById("composer-error");
		// "Waiting for the model": the lead's call waits for a slot of its
		// model (max_concurrent_requests); the server renders it as it is.
		this.runStatus = document.getElementById("run-status");
		this.activeRun = activeRun || null;
		this.sending = false;
		// A run can end before the POST that started it answers; remember
		// ends so a late 202 does not revive a finished run.
		this.endedRuns = new Set();
		this.files = new Attachments({ threadID: () => this.uploadThread(), onChange: () => this.update() });
		// Set when a first attach created this page's thread (uploadThread).
		this.created = null;
	}

	// uploadThread is the thread files upload to: this page's, or on the
	// new-thread page one made empty on the first attach, once. Its URL
	// becomes the page's, so a reload opens it rather than another.
	uploadThread() {
		if (this.threadID) return Promise.resolve(this.threadID);
		this.created ??= (async () => {
			const res = await post("/api/threads");
			if (res.status !== 201) throw new Error(await errorMessage(res));
			const id = encodeURIComponent((await res.json()).id);
			this.threadID = id;
			history.replaceState(null, "", `/threads/${id}`);
			return id;
		})().catch((err) => {
			this.created = null; // the next attach tries again
			throw err;
		});
		return this.created;
	}

	listen() {
		this.form.addEventListener("submit", (ev) => this.submit(ev));
		this.stop.addEventListener("click", () => this.cancel());
		this.input.addEventListener("input", () => this.update());
		this.files.listen(this.input);
		this.input.addEventListener("keydown", (ev) => {
			if (isSendKey(ev)) {
				ev.preventDefault();
				this.form.requestSubmit();
			}
		});
		if (!enterSends()) this.input.placeholder = "Message the lead agent…";
		this.update();
		// A phone's keyboard would cover half the page on load: there the
		// field waits for a tap. A focus the reader already placed stays.
		if (!touchScreen() && (document.activeElement === document.body || document.activeElement === null)) this.focus();
	}

	// focus puts the cursor in the field without scrolling the page: the
	// conversation's follower decides where the page is.
	focus() {
		this.input.focus({ preventScroll: true });
	}

	// update sets the controls from the state: Send needs a message and no
	// run in flight. The form's data-state (idle, sending, running) says
	// the same to tests and styles.
	// setOffline disables Send and Stop while the server is out of reach.
	setOffline(down) {
		this.offline = down;
		this.update();
	}

	update() {
		const busy = this.sending || this.activeRun !== null;
		this.send.disabled = busy || this.offline === true || this.input.value.trim() === "" || this.files.uploading();
		this.files.setDisabled(this.offline === true || this.sending === "opening");
		// Stop vanishes with the run it stopped; Send is disabled while one
		// runs: a focus on either goes to the field rather than the body.
		const lost = (document.activeElement === this.stop && this.activeRun === null) || (document.activeElement === this.send && busy);
		this.stop.hidden = this.activeRun === null;
		this.stop.disabled = this.offline === true;
		if (lost) this.focus();
		this.form.dataset.state = this.activeRun !== null ? "running" : this.sending ? "sending" : "idle";
	}

	// showError writes the error line. It grows the sticky composer; stay
	// pinned so it does not cover the last message.
	showError(text) {
		keepPinned(() => {
			this.errorLine.textContent = text;
			// A refusal for a spent budget says what the budget line says
			// (static/budget.js): the line steps aside while it shows.
			const note = document.getElementById("budget-note");
			if (note) note.hidden = note.textContent === "" || (text !== "" && note.textContent === text);
		});
	}

	startRun(runID) {
		if (!runID || this.endedRuns.has(runID) || this.activeRun === runID) return;
		this.activeRun = runID;
		document.dispatchEvent(new CustomEvent("herd:run", { detail: { running: true } }));
		this.update();
	}

	// endRun ends run runID, which ended with status (completed, failed,
	// cancelled); a herd:run event tells static/notify.js.
	endRun(runID, status) {
		this.endedRuns.add(runID);
		if (this.activeRun === runID) {
			this.activeRun = null;
			this.setWaiting(runID, false);
			document.dispatchEvent(new CustomEvent("herd:run", { detail: { running: false, status: status ?? "completed" } }));
		}
		this.update();
	}

	// setWaiting shows or hides that the active run's lead waits for its
	// model; a word about any other run changes nothing.
	setWaiting(runID, waiting) {
		if (!runID || runID !== this.activeRun) return;
		keepPinned(() => {
			this.runStatus.hidden = !waiting;
		});
	}

	async submit(ev) {
		ev.preventDefault();
		const content = this.input.value;
		if (content.trim() === "" || this.sending || this.activeRun !== null || this.files.uploading()) return;
		this.sending = true;
		this.showError("");
		this.update();
		this.onSend?.();
		try {
			const body = { content };
			if (this.model) body.model = this.model.value;
			const attachments = this.files.paths();
			if (attachments.length > 0) body.attachments = attachments;
			if (!this.threadID) {
				await this.create(body);
				return;
			}
			const res = await post(`/api/threads/${this.threadID}/runs`, body);
			if (res.status === 202 && this.created) {
				// The new-thread page's thread has its first message: open it.
				this.sending = "opening";
				location.replace(`/threads/${this.threadID}`);
			} else if (res.status === 202) {
				this.input.value = "";
				this.files.clear();
				this.startRun((await res.json()).run_id);
			} else {
				this.showError(await errorMessage(res));
			}
		} catch {
			this.showError("Could not reach the server. Check your connection and try again.");
		} finally {
			if (this.sending !== "opening") this.sending = false;
			this.update();
		}
	}

	// create makes the thread with its first message and opens it; the
	// composer stays busy until the thread's page replaces this one.
	async create(body) {
		const res = await post("/api/threads", body);
		if (res.status !== 201) {
			this.showError(await errorMessage(res));
			return;
		}
		const { thread } = await res.json();
		this.sending = "opening";
		location.replace(`/threads/${encodeURIComponent(thread.id)}`);
	}

	cancel() {
		if (this.activeRun === null) return;
		// Stop is disabled while its request is out and then goes with
		// the run: the focus moves to the field now, not to the body.
		this.focus();
		postFromButton(
			this.stop,
			`/api/threads/${this.threadID}/runs/${encodeURIComponent(this.activeRun)}/cancel`,
			(text) => this.showError(text),
			"Could not reach the server to stop the run.",
		);
	}
}
