// Answers again: a run's end (views.runEnd: the notice of a failed or
// stopped run, Retry or Regenerate on the latest run) and the Edit of a
// user's message (views.editForm), live. The server decides what a new
// run replaces (docs/DESIGN.md §3); the run.start frame says it, so every
// open page shows the same as a reload.

import { errorMessage, post } from "./api.js";
import { isSendKey } from "./composer.js";
import { clone } from "./dom.js";
import { resumedNotice } from "./format.js";

// runEndElement is a run's end as views.runEnd renders it: d is the
// run.end frame's data. It is the thread's latest run, so it carries
// Retry or Regenerate.
// noRetry says whether a Retry cannot get past d's error_kind (the
// page's no_retry_kinds, agent.NoRetryKinds): then none is offered.
export function runEndElement(d, runID, seq, noRetry = new Set()) {
	const node = clone("run-end-template");
	const status = d.status ?? "failed";
	node.className = `run-end run-end-${status}`;
	node.id = `run-end-${runID}`;
	node.dataset.seq = String(seq ?? 0);
	node.dataset.runId = runID;
	node.dataset.status = status;
	const notice = noticeOf(d, status);
	if (notice) node.querySelector(".run-notice-text").textContent = notice;
	else node.querySelector(".run-notice").remove();
	if (status === "failed" && d.error) node.querySelector(".run-error-text").textContent = d.error;
	else node.querySelector(".run-error").remove();
	const more = node.querySelector(".run-continue");
	if (status === "cancelled" || d.cut === true) more.dataset.runId = runID;
	else more.remove();
	if (d.error_kind) node.dataset.errorKind = d.error_kind;
	const retry = node.querySelector(".run-retry");
	if (status === "failed" && noRetry.has(d.error_kind)) {
		retry.remove();
	} else {
		retry.dataset.runId = runID;
		retry.textContent = status === "completed" ? "Regenerate" : "Retry";
	}
	const versions = Array.isArray(d.versions) ? d.versions : [];
	const nav = node.querySelector(".run-versions");
	if (versions.length > 1) fillVersions(nav, runID, versions);
	else nav.remove();
	return node;
}

// fillVersions sets a run's versions switcher (views.versions): where
// runID is among versions, and the runs either side.
function fillVersions(nav, runID, versions) {
	const i = Math.max(versions.indexOf(runID), 0);
	const [prev, next] = nav.querySelectorAll(".version-pick");
	prev.dataset.runId = versions[i - 1] ?? "";
	prev.disabled = i === 0;
	next.dataset.runId = versions[i + 1] ?? "";
	next.disabled = i === versions.length - 1;
	nav.querySelector(".version-count").textContent = `${i + 1} / ${versions.length}`;
}

// runResumedElement is where a run resumed as views.runResumed renders
// it: d is the run.resumed frame's data, at its commit time (created_at).
export function runResumedElement(d, runID, seq, at) {
	const node = clone("run-resumed-template");
	node.id = `run-resumed-${seq}`;
	node.dataset.seq = String(seq);
	node.dataset.runId = runID;
	node.dataset.at = at ?? "";
	node.dataset.lostMs = String(Number.isInteger(d.lost_ms) ? d.lost_ms : 0);
	node.querySelector(".run-resumed-text").textContent = resumedNotice(d);
	return node;
}

// noticeOf is as the server's for runs that ended before notices were
// written (server/answers.go); a live frame always has its notice.
function noticeOf(d, status) {
	if (d.notice || status === "completed") return d.notice ?? "";
	return status === "cancelled" ? "Stopped." : "The run failed.";
}

export class Answers {
	constructor({ threadID, list, model, showError, onStarted, noRetryKinds }) {
		this.threadID = threadID;
		this.list = list;
		this.model = model; // the composer's model select, if any
		this.showError = showError;
		this.onStarted = onStarted;
		this.versions = new Map(); // run → the versions of its answer, from its run.start
		this.noRetry = new Set(noRetryKinds ?? []);
	}

	// listen handles the buttons under the list, now and later; while a
	// run is active (running) nothing can be edited.
	listen(running) {
		this.list.classList.add("can-act");
		this.setEditable(!running);
		this.list.addEventListener("click", (ev) => {
			const retry = ev.target.closest(".run-retry");
			if (retry) return this.retry(retry);
			const more = ev.target.closest(".run-continue");
			if (more) return this.retry(more, "continue");
			const pick = ev.target.closest(".version-pick");
			if (pick) return this.pick(pick);
			const edit = ev.target.closest(".msg-edit");
			if (edit) return this.openEdit(edit.closest(".msg"), edit);
			const cancel = ev.target.closest(".msg-edit-cancel");
			if (cancel) this.closeEdit(cancel.closest(".msg"));
		});
		// Enter as in the composer (isSendKey); Escape gives the message
		// back unchanged.
		this.list.addEventListener("keydown", (ev) => {
			if (!ev.target.matches?.(".msg-edit-input") || ev.isComposing) return;
			if (ev.key === "Escape") {
				ev.preventDefault(); // not a Stop (static/shortcuts.js)
				this.closeEdit(ev.target.closest(".msg"));
			} else if (isSendKey(ev)) {
				ev.preventDefault();
				ev.target.form.requestSubmit();
			}
		});
		this.list.addEventListener("submit", (ev) => {
			if (!ev.target.matches(".msg-edit-form")) return;
			ev.preventDefault();
			this.sendEdit(ev.target.closest(".msg"), ev.target);
		});
	}

	// runStarted applies what the new run replaces, and takes the
	// controls that answer again away while it runs.
	runStarted(d) {
		if (Array.isArray(d.versions) && d.run_id) this.versions.set(d.run_id, d.versions);
		// Focus on a control the new run removes goes to the composer.
		const focused = document.activeElement;
		const inList = this.list.contains(focused);
		for (const b of this.list.querySelectorAll(".run-retry, .run-continue")) b.remove();
		// A completed run's end stays only for its versions (as a reload
		// shows it: server/answers.go runNotice).
		for (const e of this.list.querySelectorAll(".run-end-completed:not(:has(.run-versions))")) e.remove();
		if (d.retry_of && d.continue) this.continueAnswer(d.retry_of);
		else if (d.retry_of) this.replaceAnswer(d.retry_of);
		if (d.edit_of) this.replaceFrom(d.edit_of);
		this.setEditable(false);
		if (inList && !focused.isConnected) document.getElementById("composer-input")?.focus();
	}

	// runEnded shows where the run ended: its notice when it failed or
	// was stopped, the versions of its answer, and Retry or Regenerate.
	runEnded(d, runID, seq) {
		this.setEditable(true);
		if (!runID || document.getElementById(`run-end-${runID}`)) return;
		this.list.append(runEndElement({ ...d, versions: this.versions.get(runID) }, runID, seq, this.noRetry));
	}

	// pick shows another version of an answer: the server keeps the
	// choice, and the page is made again from it (every part of the
	// thread below, its cards and totals, follows the version), opened
	// where the switch was.
	async pick(button) {
		const runID = button.dataset.runId;
		if (!runID) return;
		button.disabled = true;
		try {
			const res = await post(`/api/threads/${this.threadID}/runs/${encodeURIComponent(runID)}/pick`);
			if (!res.ok) {
				this.showError(await errorMessage(res));
				button.disabled = false;
				return;
			}
		} catch {
			this.showError("The server could not be reached to switch versions.");
			button.disabled = false;
			return;
		}
		location.replace(`${location.pathname}${location.search}#run-end-${runID}`);
		location.reload();
	}

	// runResumed shows where the run resumed. An answer still streaming
	// is saved after this frame, so the notice goes above its bubble, where
	// a reload puts it.
	runResumed(d, runID, seq, at) {
		if (!runID || !Number.isInteger(seq) || document.getElementById(`run-resumed-${seq}`)) return;
		const node = runResumedElement(d, runID, seq, at);
		const streaming = this.list.querySelector(":scope > .msg-streaming");
		if (streaming) streaming.before(node);
		else this.list.append(node);
	}

	setEditable(on) {
		for (const b of this.list.querySelectorAll(".msg-edit, .msg-edit-send")) b.disabled = !on;
	}

	// continueAnswer takes away the stopped answer of run runID and its
	// end: the continuing run's answer starts with its text.
	continueAnswer(runID) {
		document.getElementById(`run-end-${runID}`)?.remove();
		const answers = [...this.list.querySelectorAll(`.msg-ai[data-run-id="${CSS.escape(runID)}"]`)];
		const last = answers.at(-1);
		if (last && !last.querySelector(".tool-call, .task-slot")) last.remove();
	}

	// replaceAnswer hides the answer of run runID, which a Regenerate
	// replaced; a failed or stopped one stays as history.
	replaceAnswer(runID) {
		const end = document.getElementById(`run-end-${runID}`);
		if (end && end.dataset.status !== "completed") return;
		end?.remove();
		for (const node of this.list.querySelectorAll(`:is(.msg, .run-resumed)[data-run-id="${CSS.escape(runID)}"]:not(.msg-human)`)) node.remove();
	}

	// replaceFrom hides the edited message of run runID and everything
	// after it; when that message is on a page not loaded, everything
	// loaded is after it.
	replaceFrom(runID) {
		const first = this.list.querySelector(`.msg-human[data-run-id="${CSS.escape(runID)}"]`);
		const items = [...this.list.querySelectorAll(":scope > [data-seq]")];
		const from = first ? items.indexOf(first) : 0;
		for (const node of items.slice(from)) node.remove();
	}

	// retry answers the run's message again. The button stays enabled
	// (aria-disabled) while the request is out, so it keeps the focus
	// until the run's start takes it away.
	// retry answers the run's message again (Retry, Regenerate), or with
	// action "continue" goes on with its stopped answer (Continue).
	async retry(button, action = "retry") {
		if (button.getAttribute("aria-disabled") === "true") return;
		button.setAttribute("aria-disabled", "true");
		const body = this.model?.value && action === "retry" ? { model: this.model.value } : undefined;
		await this.start(`/api/threads/${this.threadID}/runs/${encodeURIComponent(button.dataset.runId)}/${action}`, body, this.showError);
		button.removeAttribute("aria-disabled");
	}

	// start posts a new run and hands its id to the composer; a refusal
	// (409 while a run is active) shows through showError.
	async start(path, body, showError) {
		try {
			const res = await post(path, body);
			if (!res.ok) {
				showError(await errorMessage(res));
				return false;
			}
			const started = await res.json();
			this.onStarted(started.run_id);
			return true;
		} catch {
			showError("The server could not be reached; try again when it is back.");
			return false;
		}
	}

	openEdit(msg, button) {
		if (!msg || msg.querySelector(".msg-edit-form")) return;
		const form = clone("edit-template");
		const input = form.querySelector(".msg-edit-input");
		input.value = button.dataset.source ?? "";
		msg.classList.add("msg-editing");
		msg.append(form);
		input.focus();
	}

	closeEdit(msg) {
		msg?.querySelector(".msg-edit-form")?.remove();
		msg?.classList.remove("msg-editing");
		msg?.querySelector(".msg-edit")?.focus();
	}

	async sendEdit(msg, form) {
		const content = form.querySelector(".msg-edit-input").value;
		const error = form.querySelector(".msg-edit-error");
		const send = form.querySelector(".msg-edit-send");
		if (content.trim() === "") {
			error.textContent = "Write the message to send.";
			return;
		}
		send.disabled = true;
		const body = { content };
		if (this.model?.value) body.model = this.model.value;
		const id = encodeURIComponent(msg.id.replace(/^msg-/, ""));
		const ok = await this.start(`/api/threads/${this.threadID}/messages/${id}/edit`, body, (text) => (error.textContent = text));
		if (!ok && form.isConnected) send.disabled = false;
	}
}
