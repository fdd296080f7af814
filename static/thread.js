// The thread page (views.Thread, the one with #herd-state): streams the
// conversation over the WebSocket, adds live messages, and hands task
// frames and task results to the cards.

import { Answers } from "./answers.js";
import { refreshBudget } from "./budget.js";
import { Cards } from "./cards.js";
import { Composer } from "./composer.js";
import { getJSON } from "./api.js";
import { addCodeButtons, listenCopy } from "./copy.js";
import { intAttr } from "./dom.js";
import { FileLinks } from "./filelinks.js";
import { applyLiveHTML } from "./markdown-live.js";
import { watchMath } from "./math.js";
import { TASK_FRAME_TYPES } from "./merge.js";
import { messageElement, streamElement, toolResultElement } from "./messages.js";
import { FilesPanel } from "./files-panel.js";
import { OlderMessages } from "./older.js";
import { jumpToHash } from "./search-jump.js";
import { Follower } from "./pinned.js";
import { openStream } from "./socket.js";
import { endCardLive, endLive, showToolOutput, showToolOutputsIn, toolLog, toolProgress } from "./tool-output.js";

export class ThreadPage {
	constructor(state) {
		this.threadID = encodeURIComponent(state.thread_id);
		this.list = document.getElementById("messages");
		this.connStatus = document.getElementById("conn-status");
		this.lastSeq = state.last_seq ?? 0;
		// The database's restore generation this page was made from: sent
		// back with lastSeq, so a restore since gets a resync, not records.
		this.generation = state.restore_generation ?? "";
		this.titlePending = state.title_pending === true;
		this.titleFrames = 0; // thread.renamed frames received
		this.follower = new Follower(this.list, document.getElementById("jump-latest"));
		this.composer = new Composer({
			threadID: this.threadID,
			activeRun: state.active_run_id,
			onSend: () => this.follower.jump(),
		});
		this.cards = new Cards({
			threadID: this.threadID,
			tokenUsage: state.token_usage_enabled === true,
			showError: (text) => this.composer.showError(text),
			oldestSeq: () => this.oldestSeq(),
			usage: state.usage,
			serverNow: state.server_time,
			activeRunID: state.active_run_id,
			list: this.list,
		});
		this.cardsLoaded = this.cards.load(this.list);
		watchMath(this.list);
		this.fileLinks = new FileLinks({ threadID: this.threadID, list: this.list });
		this.answers = new Answers({
			threadID: this.threadID,
			list: this.list,
			model: document.getElementById("composer-model"),
			showError: (text) => this.composer.showError(text),
			onStarted: (runID) => this.composer.startRun(runID),
			noRetryKinds: state.no_retry_kinds,
		});
		this.files = new FilesPanel({ threadID: this.threadID });
		this.older = new OlderMessages({
			threadID: this.threadID,
			list: this.list,
			onLoaded: (nodes) => {
				this.cards.adoptUnder(nodes);
				for (const n of nodes) {
					addCodeButtons(n);
					showToolOutputsIn(n);
					this.fileLinks.scan(n);
				}
			},
			showError: (text) => this.composer.showError(text),
		});
		// Frame types this page understands; any other type (ping, and
		// types added later) is ignored.
		this.handlers = new Map([
			["message", (d) => this.addMessage(d)],
			["run.start", (d, f) => this.startRun(d, d.run_id ?? f.run_id)],
			["run.end", (d, f) => this.endRun(d, d.run_id ?? f.run_id, f.seq)],
			["run.wait", (d, f) => this.composer.setWaiting(d.run_id ?? f.run_id, d.waiting === true)],
			["run.resumed", (d, f) => this.resumeRun(d, d.run_id ?? f.run_id, f)],
			["ai_delta", (d) => this.appendDelta(d)],
			["ai_html", (d) => this.showLiveHTML(d)],
			["ai_reasoning_delta", (d) => this.appendReasoning(d)],
			["task_progress", (d, f) => this.cards.progress(d, f)],
			[
				"workspace",
				(d, f) => {
					this.cards.workspace(d, f);
					this.fileLinks.workspace(d);
					this.files.workspace(d);
				},
			],
			["tool_progress", (d) => toolProgress(this.list, d)],
			["tool_log", (d) => toolLog(this.list, d)],
			["settings", (d) => this.cards.setTokenUsage(d.token_usage_enabled === true)],
			["usage.title", (d) => this.cards.titleUsage(d.usage ?? null)],
			[
				"thread.renamed",
				(d) => {
					this.titleFrames++;
					this.showTitle(d.title);
				},
			],
			// The server's thread is behind this page's cursor, or another
			// restore generation (a restored backup): what the page shows is
			// not what the thread holds.
			["resync", () => location.reload()],
			...TASK_FRAME_TYPES.map((type) => [type, (d, f) => this.taskFrame(type, d, f)]),
		]);
	}

	start() {
		// The test hook: a herd:frame event is handled exactly like a frame
		// from the socket (seq checks included), so tests can replay frames.
		document.addEventListener("herd:frame", (ev) => this.handleFrame(ev.detail));
		this.composer.listen();
		this.older.listen();
		this.files.listen();
		showToolOutputsIn(this.list);
		this.fileLinks.scan(this.list);
		listenCopy(this.list);
		this.answers.listen(this.composer.activeRun !== null);
		this.follower.jump();
		// After the cards load: they may put a card's element anew.
		this.cardsLoaded.then(() => jumpToHash(this.list, this.older));
		const scheme = location.protocol === "https:" ? "wss:" : "ws:";
		openStream({
			url: () => this.streamURL(scheme),
			onFrame: (raw) => this.onFrame(raw),
			onStatus: (text, down) => this.showConn(text, down === true),
			// Tests wait for data-herd-ready before they act on the page.
			onOpen: () => {
				this.catchUpTitle();
				this.cardsLoaded.then(() => (document.documentElement.dataset.herdReady = "1"));
			},
		});
	}

	// streamURL asks for what came after lastSeq, in this page's history.
	streamURL(scheme) {
		const q = new URLSearchParams({ after_seq: String(this.lastSeq) });
		if (this.generation) q.set("restore_generation", this.generation);
		return `${scheme}//${location.host}/api/threads/${this.threadID}/stream?${q}`;
	}

	// catchUpTitle reads the title, and its call's usage, once more when
	// the model was naming the thread as the page was made: their frames
	// may have gone out before this stream opened.
	async catchUpTitle() {
		if (!this.titlePending) return;
		this.titlePending = false;
		this.cards.catchUpTitleUsage();
		const frames = this.titleFrames;
		try {
			const { thread } = await getJSON(`/api/threads/${this.threadID}?limit=1`);
			// A frame that came meanwhile is newer than this answer.
			if (thread?.title && this.titleFrames === frames) this.showTitle(thread.title);
		} catch {
			// The frame, or the next page load, brings it.
		}
	}

	// showTitle shows the thread's new title (a model named it, or it was
	// renamed in another tab): heading, tab, the sidebar's entry and the
	// rename field unless the reader is editing it. (The model's call
	// reaches the usage panel in its own frame, usage.title, title used or
	// not.)
	showTitle(title) {
		if (typeof title !== "string" || title === "") return;
		const heading = document.getElementById("thread-title");
		const old = heading.textContent;
		heading.textContent = title;
		document.title = `${title} · herd`;
		const item = document.querySelector('#sidebar-list a[aria-current="page"]');
		if (item) {
			item.textContent = title;
			item.closest("li").dataset.title = title;
		}
		const field = document.getElementById("rename-title");
		if (field && document.activeElement !== field && (field.value === old || field.value === "")) field.value = title;
	}

	// oldestSeq is the seq of the oldest message shown (older pages are
	// loaded on demand), 0 when there is none.
	oldestSeq() {
		return intAttr(this.list.querySelector(":scope > [data-seq]")?.dataset.seq);
	}

	// showConn writes the connection line. While the server is out of
	// reach nothing on the page is live: running cards say they wait for
	// the connection (app.css, [data-offline]) and the controls that need
	// the server are disabled until it is back.
	showConn(text, down = false) {
		this.connStatus.textContent = text;
		this.connStatus.hidden = text === "";
		document.documentElement.toggleAttribute("data-offline", down);
		this.composer.setOffline(down);
		for (const b of this.list.querySelectorAll(".card-cancel")) b.disabled = down;
	}

	// changeList changes the message list; the follower keeps the view
	// where the reader wants it.
	changeList(change) {
		document.getElementById("empty-state")?.remove();
		change();
	}

	addMessage(m) {
		if (document.getElementById(`msg-${m.id}`)) return;
		if (m.type === "tool" && m.name === "task") {
			this.cards.toolMessage(m);
			return;
		}
		if (m.type === "tool") {
			this.addToolResult(m);
			return;
		}
		const node = messageElement(m, this.cards.labels, this.threadID);
		const streaming = document.getElementById(`stream-${m.id}`);
		// A Thinking block the reader opened while it streamed stays open.
		if (streaming?.querySelector(".msg-thinking")?.open) node.querySelector(".msg-thinking")?.setAttribute("open", "");
		this.changeList(() => {
			if (streaming) streaming.replaceWith(node);
			else this.list.append(node);
			this.cards.mount(node, m);
			addCodeButtons(node);
		});
		// A saved answer is final: its paths link now (static/filelinks.js).
		if (m.type === "ai") this.fileLinks.scan(node);
	}

	// addToolResult puts a result under the latest call with its id
	// (provider ids may repeat across runs).
	addToolResult(m) {
		const id = CSS.escape(m.tool_call_id ?? "");
		const calls = this.list.querySelectorAll(`.tool-call[data-tool-call-id="${id}"], .task-slot[data-task-id="${id}"]`);
		const call = calls[calls.length - 1];
		if (call?.matches(".tool-call")) {
			const node = toolResultElement(m);
			showToolOutput(node, m.additional_kwargs?.tool_output ?? null);
			this.changeList(() => {
				endLive(call);
				call.append(node);
			});
		}
		this.cards.toolResult(m);
	}

	// taskFrame hands a task frame to the cards; a card's tool steps end
	// the live log lines of its calls (tool-output.js).
	taskFrame(type, d, f) {
		if (type === "task_running" && d.step?.kind === "tool") endCardLive(this.list, d.task_id);
		this.cards.taskFrame(type, d, f);
	}

	// appendDelta opens the answer's bubble; its text shows rendered, from
	// the ai_html frames that follow (markdown-live.js).
	appendDelta(d) {
		this.streamInto(d, () => {});
	}

	showLiveHTML(d) {
		this.streamInto(d, (bubble) => {
			if (applyLiveHTML(bubble.querySelector(".msg-body"), d)) addCodeButtons(bubble);
		});
	}

	// appendReasoning streams the model's reasoning into the bubble's
	// Thinking block, collapsed, above the answer.
	appendReasoning(d) {
		this.streamInto(d, (bubble) => {
			const block = bubble.querySelector(".msg-thinking");
			block.hidden = false;
			block.querySelector(".thinking-text").append(d.text ?? "");
		});
	}

	// streamInto applies add to the bubble of the answer being written,
	// created on its first frame; a saved message takes no more frames.
	streamInto(d, add) {
		// Text or reasoning is arriving: the lead's call has its slot,
		// whichever of its frames comes first.
		this.composer.setWaiting(this.composer.activeRun, false);
		if (!d.message_id || document.getElementById(`msg-${d.message_id}`)) return;
		this.changeList(() => {
			let bubble = document.getElementById(`stream-${d.message_id}`);
			if (!bubble) {
				bubble = streamElement(d.message_id);
				this.list.append(bubble);
			}
			add(bubble);
		});
	}

	startRun(d, runID) {
		this.composer.startRun(runID);
		this.cards.runStarted(runID, d);
		this.changeList(() => this.answers.runStarted(d));
		this.cards.runsReplaced();
	}

	// resumeRun shows, where the conversation is, that the run went on
	// after a restart or on another instance and how long it was gone.
	resumeRun(d, runID, f) {
		this.changeList(() => this.answers.runResumed(d, runID, f.seq, f.created_at));
		this.cards.runResumed(runID, d, f.created_at);
	}

	// endRun ends the run; a failure or a Stop is told where the run
	// ended, in the conversation (static/answers.js), not on the
	// composer's line, so that it stays after a reload.
	endRun(d, runID, seq) {
		this.composer.endRun(runID, d.status);
		// A bubble whose message was never saved (stopped before any text,
		// or a failure) would otherwise blink forever.
		for (const bubble of this.list.querySelectorAll(".msg-streaming")) bubble.remove();
		this.changeList(() => this.answers.runEnded(d, runID, seq));
		this.cards.runEnded(runID, d);
		refreshBudget(this.cards.tokensOn);
	}

	onFrame(raw) {
		let frame;
		try {
			frame = JSON.parse(raw);
		} catch {
			return;
		}
		this.handleFrame(frame);
	}

	handleFrame(frame) {
		if (!frame || typeof frame !== "object") return;
		if (typeof frame.seq === "number") {
			if (frame.seq <= this.lastSeq) return; // a replay we already have
			this.lastSeq = frame.seq;
		}
		this.follower.noteOutput();
		this.handlers.get(frame.type)?.(frame.data ?? {}, frame);
	}
}
