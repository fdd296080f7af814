// The subagent cards of one thread page (docs/DESIGN.md §9): each card's
// state is merged from the thread's task frames and its task ToolMessage
// (merge.js), shown in the markup of views.Card (card-view.js), with a
// step timeline (steps.js), the run timelines (timeline.js) and the
// thread's usage panel (usage-panel.js). The server projects the same
// state from history (agent.ProjectCards), so a reload shows what was
// shown live.

import { announce, cardAnnouncement } from "./announce.js";
import { getJSON, postFromButton } from "./api.js";
import { cardNode, readCard, renderCard, renderTime } from "./card-view.js";
import { every, serverTime } from "./clock.js";
import { intAttr } from "./dom.js";
import { isTerminal } from "./format.js";
import { applyTaskCall, applyTaskFrame, applyTaskResult, applyWorkspaceFrame, continueCard, failUnfinished, instant, newCard, raiseTotal, taskContinues } from "./merge.js";
import { normalizeUsage, str } from "./metadata.js";
import { addStep, expanded, setExpanded, stepOf } from "./steps.js";
import { Timelines } from "./timeline.js";
import { UsageTally, fillUsagePanel, ledgerUsage, removeUsagePanel } from "./usage-panel.js";

const STEPS_PAGE = 200; // the events API's default page
const MESSAGES_PAGE = 200; // the messages API's largest page

function cardKey(runID, taskID) {
	return `${runID}\u0000${taskID}`;
}

function storageKey(card) {
	return `herd.card.expanded.${card.runID}.${card.taskID}`;
}

// The browser may refuse storage (privacy modes); cards then simply start
// collapsed.
function remembered(card) {
	try {
		return localStorage.getItem(storageKey(card)) === "1";
	} catch {
		return false;
	}
}

function remember(card, open) {
	try {
		if (open) localStorage.setItem(storageKey(card), "1");
		else localStorage.removeItem(storageKey(card));
	} catch {
		// Not remembered; the card still toggles.
	}
}

// Cards runs the cards of one thread page; thread.js feeds it frames and
// messages.
export class Cards {
	// oldestSeq tells the seq of the oldest message the page shows; usage
	// is the server's figure at load (views.ThreadPage state), list the
	// message list.
	constructor({ threadID, tokenUsage, showError, oldestSeq, usage, serverNow, activeRunID, list }) {
		this.threadID = threadID;
		this.activeRunID = activeRunID ?? "";
		serverTime(serverNow);
		this.tally = new UsageTally();
		if (usage) this.tally.reset(usage);
		this.timelines = new Timelines({ list, cardsOf: (runID) => [...this.cards.values()].filter((c) => c.runID === runID && c.node?.isConnected) });
		this.stopClock = null;
		this.oldestSeq = oldestSeq;
		this.tokensOn = tokenUsage;
		this.showError = showError;
		this.cards = new Map(); // cardKey → card state, with its DOM node once placed
		// cardKey of a call that continues a held card → that card: one
		// card per item, keyed by the call it was placed for.
		this.aliases = new Map();
		this.labels = new Map(); // model name → display name
		// Bumped on every token-gate change, so an answer fetched before a
		// change is never applied after it.
		this.gateEpoch = 0;
		// Tests shrink the events page with ?steps_page=N to exercise paging.
		const page = intAttr(new URLSearchParams(location.search).get("steps_page")) || STEPS_PAGE;
		this.steps = { threadID, pageSize: Math.min(Math.max(page, 1), 1000) };
		// One listener serves the server-rendered and the cloned cards.
		document.addEventListener("click", (ev) => this.onClick(ev));
	}

	// showTokens is the token gate as this page knows it: the same for
	// users and admins (docs/DESIGN.md §9).
	showTokens() {
		return this.tokensOn;
	}

	// find is the card of a task call, the held card it continues
	// included; undefined for none.
	find(runID, taskID) {
		const key = cardKey(runID, taskID);
		return this.cards.get(key) ?? this.aliases.get(key);
	}

	card(runID, taskID) {
		const key = cardKey(runID, taskID);
		let c = this.find(runID, taskID);
		if (!c) {
			c = newCard(runID, taskID);
			c.timeline = new Map(); // seq → step
			c.complete = false; // whether the timeline holds every step so far
			this.cards.set(key, c);
		}
		return c;
	}

	render(c) {
		renderCard(c, { showTokens: this.showTokens(), labels: this.labels, threadID: this.threadID });
	}

	// update applies change to a card's state and renders it, unless
	// change reports (false) that it changed nothing. A new status is
	// announced to screen readers, once.
	update(c, change) {
		const [result, html, status] = [c.result, c.resultHTML, c.status];
		if (change() === false) return;
		if (c.result !== result || c.resultHTML !== html) c.resultChanged = true;
		this.render(c);
		if (c.status !== status && c.node?.isConnected) announce(cardAnnouncement(c));
	}

	place(c, slot) {
		if (c.node?.isConnected) return;
		c.node = cardNode(c);
		slot.replaceChildren(c.node);
		c.resultChanged = true;
		this.render(c);
		if (remembered(c)) setExpanded(c, true, this.steps);
	}

	adopt(node) {
		const c = this.card(node.dataset.runId ?? "", node.dataset.taskId ?? "");
		readCard(c, node, this.labels);
		// A continued card sits in its item's first call's slot, which
		// later links name (agent.Card.Slot).
		const first = node.closest(".task-slot")?.dataset.taskId ?? "";
		if (first !== "" && first !== c.taskID) {
			c.continues = first;
			this.aliases.set(cardKey(c.runID, first), c);
		}
		// What of its usage the server's figure at load already counts.
		const part = (v) => intAttr(v ?? "");
		c.counted = c.total === null ? null : { input_tokens: part(node.dataset.inputTokens), output_tokens: part(node.dataset.outputTokens), total_tokens: c.total };
		if (remembered(c)) setExpanded(c, true, this.steps);
		return c;
	}

	onClick(ev) {
		const button = ev.target.closest?.("section.card .card-toggle, section.card .card-cancel");
		const node = button?.closest("section.card");
		const c = node && this.find(node.dataset.runId ?? "", node.dataset.taskId ?? "");
		if (!c) return;
		if (button.matches(".card-cancel")) {
			this.cancel(c, button);
			return;
		}
		const open = !expanded(c);
		remember(c, open);
		setExpanded(c, open, this.steps);
	}

	cancel(c, button) {
		postFromButton(
			button,
			`/api/threads/${this.threadID}/tasks/${encodeURIComponent(c.taskID)}/cancel`,
			this.showError,
			"Could not reach the server to cancel the subagent.",
		);
	}

	// ---- token figures ----

	// showUsage shows the thread's figure as the page knows it now.
	showUsage() {
		if (this.showTokens()) fillUsagePanel(this.tally.report(), this.labels);
	}

	// countUsage adds what a card's usage snapshot grew by to the thread's
	// figure; call counts a model step, unreported unless the snapshot grew
	// (a call that reports usage always adds tokens: agent.ledgerEntry).
	countUsage(c, usage, call) {
		if (!this.showTokens()) return;
		const prev = c.counted ?? null;
		const grew = usage !== null && (prev === null || usage.total_tokens > prev.total_tokens);
		if (call) this.tally.add(c.runID, false, c.modelName, {}, 1, grew ? 0 : 1);
		if (grew) {
			const delta = {};
			for (const f of ["input_tokens", "output_tokens", "total_tokens"]) delta[f] = Math.max(usage[f] - (prev?.[f] ?? 0), 0);
			this.tally.add(c.runID, false, c.modelName, delta);
			c.counted = usage;
		}
		if (call || grew) this.showUsage();
	}

	// refreshUsage fetches the server's figures: only when the token gate
	// reopens; frames keep them current from then on.
	async refreshUsage() {
		if (!this.showTokens()) return;
		const epoch = this.gateEpoch;
		try {
			const u = await getJSON(`/api/threads/${this.threadID}/usage`);
			if (epoch !== this.gateEpoch) return;
			if (u.token_usage_enabled === false) {
				removeUsagePanel();
				return;
			}
			this.tally.reset(u);
			this.showUsage();
		} catch (err) {
			this.showError(`Could not load the token figures: ${err.message}`);
		}
	}

	// refetchTotals brings back the totals the gate kept from this page,
	// then shows every card's token label. The messages API pages the
	// thread from the newest message: it reads pages until the one that
	// holds the oldest message shown (older pages may have been loaded).
	async refetchTotals() {
		const epoch = this.gateEpoch;
		const oldest = this.oldestSeq();
		const path = `/api/threads/${this.threadID}/messages?limit=${MESSAGES_PAGE}`;
		try {
			for (let page = await getJSON(path); ; page = await getJSON(`${path}&before=${page.next}`)) {
				if (epoch !== this.gateEpoch) return;
				for (const t of page.tasks ?? []) {
					const c = this.find(t.run_id, t.task_id);
					if (!c) continue;
					c.counted = normalizeUsage(t.usage);
					raiseTotal(c, c.counted);
				}
				if (!page.has_more || page.next <= oldest) break;
			}
		} catch (err) {
			this.showError(`Could not load the token figures: ${err.message}`);
		}
		if (epoch === this.gateEpoch) for (const c of this.cards.values()) this.render(c);
	}

	// ---- the clock ----

	// tick moves every live card's time and every live run timeline on;
	// with nothing live it stops the page's clock.
	tick(t) {
		let live = this.timelines.renderAll(t);
		for (const c of this.cards.values()) {
			if (isTerminal(c.status) || !c.node) continue;
			renderTime(c, t);
			live = true;
		}
		if (!live) this.stopTicking();
	}

	// live reports whether anything on the page moves with the clock: a
	// card queued or running, or an active run's timeline.
	live() {
		return [...this.cards.values()].some((c) => c.node && !isTerminal(c.status)) || this.timelines.active();
	}

	startTicking() {
		if (this.live()) this.stopClock ??= every((t) => this.tick(t));
	}

	stopTicking() {
		this.stopClock?.();
		this.stopClock = null;
	}

	// changed redraws a run's timeline after one of its cards changed, and
	// keeps the clock going while anything is live.
	changed(runID) {
		this.timelines.render(runID);
		this.startTicking();
	}

	// ---- what thread.js calls ----

	// load adopts the server-rendered cards under root, draws their runs'
	// timelines and learns the models' display names; it resolves when the
	// cards are ready.
	async load(root) {
		for (const node of root.querySelectorAll("section.card")) this.adopt(node);
		this.timelines.read(root);
		this.timelines.setActive(this.activeRunID, true);
		this.placeTimelines(root);
		this.startTicking();
		try {
			const body = await getJSON("/api/models");
			for (const m of body.models ?? []) this.labels.set(m.name, m.display_name || m.name);
			for (const c of this.cards.values()) this.render(c);
			this.showUsage();
		} catch {
			// Live cards show raw model names, as for an unknown model.
		}
	}

	placeTimelines(root) {
		for (const node of root.querySelectorAll("article.msg[data-run-id]")) {
			if (node.querySelector("section.card")) this.timelines.place(node.dataset.runId, node);
		}
	}

	// adoptUnder adopts the server-rendered cards of a page of older
	// messages (nodes, the page's top-level elements).
	adoptUnder(nodes) {
		for (const node of nodes) {
			for (const card of node.querySelectorAll("section.card")) this.render(this.adopt(card));
			this.timelines.read(node);
			if (node.matches?.("article.msg[data-run-id]") && node.querySelector("section.card")) this.timelines.place(node.dataset.runId, node);
		}
	}

	// mount places the cards of a live message's task calls, and counts
	// the message in its run's timeline and, for a lead answer, its call in
	// the thread's figure.
	mount(node, m) {
		const runID = str(m.run_id);
		const at = instant(m.created_at);
		serverTime(at);
		this.timelines.note(runID, m.type === "human" ? "human" : "ai", at);
		if (m.type === "human" && runID !== "") this.timelines.setActive(runID, true);
		if (m.type === "ai") this.countLead(runID, m);
		const links = taskContinues(m);
		for (const call of m.tool_calls ?? []) {
			if (call.name !== "task") continue;
			if (this.continueHeld(runID, str(call.id), links, call.args)) continue;
			const c = this.card(runID, str(call.id));
			applyTaskCall(c, call.args);
			// Frames follow their message: this page will see every step.
			if (c.version === 0) c.complete = true;
			const slot = node.querySelector(`.task-slot[data-task-id="${CSS.escape(c.taskID)}"]`);
			if (slot) this.place(c, slot);
			this.timelines.place(runID, node);
		}
		this.changed(runID);
	}

	// continueHeld joins a task call to the held card it continues (its
	// message's task_continues), which stays in its place: the item has
	// one card (docs/DESIGN.md §9). It reports whether there was one.
	continueHeld(runID, taskID, links, args) {
		const held = links.has(taskID) ? this.find(runID, links.get(taskID)) : undefined;
		if (!held) return false;
		this.aliases.set(cardKey(runID, taskID), held);
		this.update(held, () => {
			continueCard(held, taskID, args);
			// Its steps are the new call's, and every frame of it follows.
			held.timeline = new Map();
			held.complete = true;
		});
		return true;
	}

	// countLead counts a lead answer's call (agent.ledgerEntry: no usage
	// worth recording is a call not reported).
	countLead(runID, m) {
		if (!this.showTokens()) return;
		const u = ledgerUsage(m.usage);
		this.tally.add(runID, true, str(m.model_name), u ?? {}, 1, u ? 0 : 1);
		this.showUsage();
	}

	// toolResult counts a tool result of the lead in its run's timeline.
	toolResult(m) {
		this.timelines.note(str(m.run_id), "tool", instant(m.created_at));
		this.changed(str(m.run_id));
	}

	taskFrame(type, d, frame) {
		const c = this.card(str(d.run_id) || str(frame.run_id), str(d.task_id));
		// Under the token gate frames carry no usage; never keep a figure
		// this page may not show.
		const data = this.showTokens() ? d : { ...d, usage: null };
		const at = instant(frame.created_at);
		serverTime(at);
		let applied = false;
		this.update(c, () => (applied = applyTaskFrame(c, type, data, frame.seq, at)));
		if (!applied) return;
		const step = type === "task_running" ? d.step : null;
		if (step && Number.isInteger(frame.seq)) addStep(c, stepOf(frame.seq, step, frame.created_at));
		this.countUsage(c, normalizeUsage(data.usage), step?.kind === "ai");
		this.changed(c.runID);
	}

	// progress shows a running tool's progress (an MCP server's
	// notifications/progress) as a running card's status line, until its
	// next step replaces it.
	progress(d, frame) {
		const c = this.find(str(d.run_id) || str(frame.run_id), str(d.task_id));
		if (!c || c.status !== "running") return;
		this.update(c, () => {
			c.activity = str(d.text);
		});
	}

	// workspace lists the files a workspace frame says a subagent wrote on
	// its card; a change without a task (an upload) or of a card not on
	// this page changes none.
	workspace(d, frame) {
		const runID = str(d.run_id) || str(frame.run_id);
		for (const c of applyWorkspaceFrame(d, (task) => this.find(runID, task))) this.render(c);
	}

	toolMessage(m) {
		const c = this.card(str(m.run_id), str(m.tool_call_id));
		const kwargs = this.showTokens() ? m.additional_kwargs : { ...m.additional_kwargs, subagent_token_usage: null };
		this.update(c, () => applyTaskResult(c, { ...m, additional_kwargs: kwargs }));
		this.countUsage(c, normalizeUsage(kwargs?.subagent_token_usage), false);
		this.changed(c.runID);
	}

	// runEnded fails the run's cards that never got a result and takes the
	// run's own totals from its end frame (d).
	runEnded(runID, d = {}) {
		for (const c of this.cards.values()) {
			if (c.runID === runID) this.update(c, () => failUnfinished(c));
		}
		this.timelines.setActive(runID, false);
		this.changed(runID);
		if (!this.showTokens()) return;
		this.tally.endRun(runID, d.status, d.usage ?? null);
		this.showUsage();
	}

	// runResumed marks on the run's timeline where it was gone: d is the
	// run.resumed frame's data, createdAt its commit time.
	runResumed(runID, d, createdAt) {
		this.timelines.gap(runID, instant(createdAt), d.lost_ms);
		this.changed(runID);
	}

	// runStarted notes a new run: the runs it replaces (d, the run.start
	// frame's data) leave the thread's total, as their answers leave the
	// page.
	runStarted(runID, d) {
		// A run without a message of its own (a Regenerate) is live from
		// its start: its timeline grows with the clock.
		this.timelines.setActive(runID, true);
		if (!this.showTokens() || !runID) return;
		this.tally.startRun(runID, d);
		this.showUsage();
	}

	// runsReplaced drops the timelines of runs whose messages a new run
	// replaced (Regenerate, Edit).
	runsReplaced() {
		this.timelines.prune();
	}

	// titleUsage counts the call that named the thread (a usage.title
	// frame; null under the token gate).
	titleUsage(report) {
		if (!this.showTokens() || !report) return;
		this.tally.setTitle(report);
		this.showUsage();
	}

	// catchUpTitleUsage reads the title call's figures once, when the
	// model was naming the thread as the page was made: its frame may have
	// gone out before the stream opened. Setting is idempotent, so the
	// frame and this answer may come in either order.
	async catchUpTitleUsage() {
		if (!this.showTokens()) return;
		const epoch = this.gateEpoch;
		try {
			const u = await getJSON(`/api/threads/${this.threadID}/usage`);
			if (epoch === this.gateEpoch && u.token_usage_enabled !== false) this.titleUsage(u.title);
		} catch {
			// The next page load counts it.
		}
	}

	setTokenUsage(on) {
		if (on === this.tokensOn) return;
		this.tokensOn = on;
		this.gateEpoch++;
		if (on) {
			this.refetchTotals();
			this.refreshUsage();
			return;
		}
		for (const c of this.cards.values()) {
			c.total = null;
			c.counted = null;
			this.render(c);
		}
		removeUsagePanel();
	}
}
