// herd's script: plain ES modules, no dependencies, no build step. Every
// page works without it; it adds copy buttons, and on the thread page (the
// one with #herd-state) it streams the conversation over WebSocket and
// sends messages; cards.js runs the subagent cards. The DOM it builds
// mirrors views/thread.templ (Message); keep the two in step.

import { TASK_FRAME_TYPES, createCards } from "./cards.js";

const RECONNECT_MIN_MS = 500;
const RECONNECT_MAX_MS = 5000;
// Closes that mean "you may not have this stream": retrying cannot help.
const FATAL_CLOSE_CODES = new Set([1008, 4401, 4403, 4404]);
// How close to the bottom counts as "following along" for auto-scroll.
const NEAR_BOTTOM_PX = 120;

function el(tag, className, text) {
	const node = document.createElement(tag);
	if (className) node.className = className;
	if (text !== undefined) node.textContent = text;
	return node;
}

function argsText(args) {
	if (typeof args === "string") return args;
	return JSON.stringify(args ?? {});
}

// ---- message markup (mirrors the Message component) ----

function toolResultElement(m) {
	const node = el("div", "tool-result");
	node.id = `msg-${m.id}`;
	node.dataset.seq = String(m.seq);
	node.append(el("pre", "tool-output", m.content ?? ""));
	return node;
}

function toolCallElement(call) {
	if (call.name === "task") {
		const slot = el("div", "task-slot");
		slot.dataset.taskId = call.id;
		return slot;
	}
	const details = el("details", "tool-call");
	details.dataset.toolCallId = call.id;
	const summary = el("summary");
	summary.append(el("span", "tool-name", call.name), el("code", "tool-brief", argsText(call.args)));
	details.append(summary, el("pre", "tool-args", argsText(call.args)));
	return details;
}

function messageElement(m) {
	const node = el("article", m.type === "human" ? "msg msg-human" : "msg msg-ai");
	node.id = `msg-${m.id}`;
	node.dataset.seq = String(m.seq);
	node.dataset.runId = m.run_id ?? "";
	if (m.html) {
		const body = el("div", "msg-body");
		// The one innerHTML: the server rendered and sanitized this field.
		body.innerHTML = m.html;
		node.append(body);
	}
	if (m.additional_kwargs?.stopped === true) node.append(el("p", "msg-note", "Stopped"));
	const calls = m.tool_calls ?? [];
	if (calls.length > 0) {
		const tools = el("div", "msg-tools");
		tools.append(...calls.map(toolCallElement));
		node.append(tools);
	}
	if (m.model_name && m.html) node.append(el("p", "msg-meta", m.model_name));
	return node;
}

// ---- the thread page ----

function threadPage(stateNode) {
	const state = JSON.parse(stateNode.textContent);
	const threadID = encodeURIComponent(state.thread_id);
	const csrf = document.querySelector('meta[name="csrf-token"]')?.content ?? "";
	const list = document.getElementById("messages");
	const form = document.getElementById("composer");
	const input = document.getElementById("composer-input");
	const model = document.getElementById("composer-model");
	const send = document.getElementById("send-button");
	const stop = document.getElementById("stop-button");
	const errorLine = document.getElementById("composer-error");
	const connStatus = document.getElementById("conn-status");

	const cards = createCards({
		threadID,
		isAdmin: state.is_admin === true,
		tokenUsage: state.token_usage_enabled === true,
		post,
		errorMessage,
		showError,
	});
	const cardsLoaded = cards.load(list);

	let lastSeq = state.last_seq ?? 0;
	let activeRun = state.active_run_id || null;
	let sending = false;
	// A run can end before the POST that started it answers; remember ends
	// so a late 202 does not revive a finished run.
	const endedRuns = new Set();

	function updateComposer() {
		send.disabled = sending || activeRun !== null;
		stop.hidden = activeRun === null;
	}

	// The error line grows the sticky composer; stay pinned so it does not
	// cover the last message.
	function showError(text) {
		keepPinned(() => {
			errorLine.textContent = text;
		});
	}

	function showConn(text) {
		connStatus.textContent = text;
		connStatus.hidden = text === "";
	}

	function nearBottom() {
		const doc = document.documentElement;
		return doc.scrollHeight - doc.scrollTop - doc.clientHeight < NEAR_BOTTOM_PX;
	}

	function scrollToBottom() {
		window.scrollTo(0, document.documentElement.scrollHeight);
	}

	// Makes a change, then keeps the view pinned to the bottom if the reader
	// was already there.
	function keepPinned(change) {
		const follow = nearBottom();
		change();
		if (follow) scrollToBottom();
	}

	function changeList(change) {
		keepPinned(() => {
			document.getElementById("empty-state")?.remove();
			change();
		});
	}

	function addMessage(m) {
		if (document.getElementById(`msg-${m.id}`)) return;
		if (m.type === "tool" && m.name === "task") {
			cards.toolMessage(m);
			return;
		}
		if (m.type === "tool") {
			// A result goes under the latest call with its id (provider ids
			// may repeat across runs).
			const id = CSS.escape(m.tool_call_id ?? "");
			const calls = list.querySelectorAll(`.tool-call[data-tool-call-id="${id}"], .task-slot[data-task-id="${id}"]`);
			const call = calls[calls.length - 1];
			if (call?.matches(".tool-call")) changeList(() => call.append(toolResultElement(m)));
			return;
		}
		const node = messageElement(m);
		const streaming = document.getElementById(`stream-${m.id}`);
		changeList(() => {
			if (streaming) streaming.replaceWith(node);
			else list.append(node);
			cards.mount(node, m);
		});
	}

	function appendDelta(d) {
		if (!d.message_id || document.getElementById(`msg-${d.message_id}`)) return;
		changeList(() => {
			let bubble = document.getElementById(`stream-${d.message_id}`);
			if (!bubble) {
				bubble = el("article", "msg msg-ai msg-streaming");
				bubble.id = `stream-${d.message_id}`;
				bubble.setAttribute("aria-busy", "true");
				const body = el("div", "msg-body");
				body.append(el("p", "stream-text"));
				bubble.append(body);
				list.append(bubble);
			}
			bubble.querySelector(".stream-text").append(d.text ?? "");
		});
	}

	function startRun(runID) {
		if (!runID || endedRuns.has(runID)) return;
		activeRun = runID;
		updateComposer();
	}

	function endRun(d, runID) {
		endedRuns.add(runID);
		if (activeRun === runID) activeRun = null;
		// A bubble whose message was never saved (stopped before any text,
		// or a failure) would otherwise blink forever.
		for (const bubble of list.querySelectorAll(".msg-streaming")) bubble.remove();
		if (d.status === "failed") showError(d.error ? `The run failed: ${d.error}` : "The run failed.");
		cards.runEnded(runID);
		updateComposer();
	}

	// Frame types this page understands; any other type (ping, and types
	// added later) is ignored.
	const handlers = new Map([
		["message", (d) => addMessage(d)],
		["run.start", (d, f) => startRun(d.run_id ?? f.run_id)],
		["run.end", (d, f) => endRun(d, d.run_id ?? f.run_id)],
		["ai_delta", (d) => appendDelta(d)],
		["settings", (d) => cards.setTokenUsage(d.token_usage_enabled === true)],
		...TASK_FRAME_TYPES.map((type) => [type, (d, f) => cards.taskFrame(type, d, f)]),
	]);

	function onFrame(raw) {
		let frame;
		try {
			frame = JSON.parse(raw);
		} catch {
			return;
		}
		handleFrame(frame);
	}

	function handleFrame(frame) {
		if (!frame || typeof frame !== "object") return;
		if (typeof frame.seq === "number") {
			if (frame.seq <= lastSeq) return; // a replay we already have
			lastSeq = frame.seq;
		}
		handlers.get(frame.type)?.(frame.data ?? {}, frame);
	}

	let retryDelay = RECONNECT_MIN_MS;

	function connect() {
		const scheme = location.protocol === "https:" ? "wss:" : "ws:";
		const socket = new WebSocket(`${scheme}//${location.host}/api/threads/${threadID}/stream?after_seq=${lastSeq}`);
		socket.addEventListener("open", () => {
			retryDelay = RECONNECT_MIN_MS;
			showConn("");
			// Tests wait for this before they act on the page.
			cardsLoaded.then(() => {
				document.documentElement.dataset.herdReady = "1";
			});
		});
		socket.addEventListener("message", (ev) => onFrame(ev.data));
		// "error" is always followed by "close", so close alone decides.
		socket.addEventListener("close", (ev) => {
			if (FATAL_CLOSE_CODES.has(ev.code)) {
				showConn("Session ended. Reload the page to continue.");
				return;
			}
			showConn("Reconnecting…");
			setTimeout(connect, retryDelay);
			retryDelay = Math.min(retryDelay * 2, RECONNECT_MAX_MS);
		});
	}

	function post(path, body) {
		const headers = { "X-CSRF-Token": csrf };
		if (body !== undefined) headers["Content-Type"] = "application/json";
		return fetch(path, {
			method: "POST",
			headers,
			body: body === undefined ? undefined : JSON.stringify(body),
		});
	}

	async function errorMessage(res) {
		try {
			const body = await res.json();
			if (body?.error?.message) return body.error.message;
		} catch {
			// Not JSON (a proxy's error page): fall through to the status.
		}
		return `The request failed (HTTP ${res.status}).`;
	}

	async function submit(ev) {
		ev.preventDefault();
		const content = input.value;
		if (content.trim() === "" || sending || activeRun !== null) return;
		sending = true;
		showError("");
		updateComposer();
		try {
			const body = { content };
			if (model) body.model = model.value;
			const res = await post(`/api/threads/${threadID}/runs`, body);
			if (res.status === 202) {
				input.value = "";
				startRun((await res.json()).run_id);
			} else {
				showError(await errorMessage(res));
			}
		} catch {
			showError("Could not reach the server. Check your connection and try again.");
		} finally {
			sending = false;
			updateComposer();
		}
	}

	async function cancel() {
		if (activeRun === null) return;
		stop.disabled = true;
		try {
			const res = await post(`/api/threads/${threadID}/runs/${encodeURIComponent(activeRun)}/cancel`);
			if (!res.ok) showError(await errorMessage(res));
		} catch {
			showError("Could not reach the server to stop the run.");
		} finally {
			stop.disabled = false;
		}
	}

	// The test hook: a herd:frame event is handled exactly like a frame
	// from the socket (seq checks included), so tests can replay frames.
	document.addEventListener("herd:frame", (ev) => handleFrame(ev.detail));
	form.addEventListener("submit", submit);
	stop.addEventListener("click", cancel);
	input.addEventListener("keydown", (ev) => {
		if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
			ev.preventDefault();
			form.requestSubmit();
		}
	});

	updateComposer();
	scrollToBottom();
	connect();
}

// ---- every page ----

// Copy buttons are rendered hidden: they only work with this script and a
// clipboard, so they appear only then.
function copyButtons() {
	if (!navigator.clipboard) return;
	for (const button of document.querySelectorAll("button[data-copy]")) {
		const field = document.getElementById(button.dataset.copy);
		if (!field) continue;
		button.hidden = false;
		button.addEventListener("click", async () => {
			try {
				await navigator.clipboard.writeText(field.value);
				button.textContent = "Copied";
			} catch {
				field.select();
			}
		});
	}
}

copyButtons();
const stateNode = document.getElementById("herd-state");
if (stateNode) threadPage(stateNode);
