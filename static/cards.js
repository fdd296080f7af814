// The subagent cards of one thread page (docs/DESIGN.md §9): each card's
// state is merged from the thread's task frames and its task ToolMessage
// (merge.js), shown in the markup of views.Card (card-view.js), with a
// step timeline (steps.js) and the thread's usage panel (usage-panel.js).
// The server projects the same state from history (agent.ProjectCards),
// so a reload shows what was shown live.

import { announce, cardAnnouncement } from "./announce.js";
import { getJSON, postFromButton } from "./api.js";
import { cardNode, readCard, renderCard } from "./card-view.js";
import { intAttr } from "./dom.js";
import { isTerminal } from "./format.js";
import { applyTaskCall, applyTaskFrame, applyToolMessage, failUnfinished, newCard, raiseTotal } from "./merge.js";
import { normalizeUsage, str } from "./metadata.js";
import { addStep, expanded, setExpanded, stepOf } from "./steps.js";
import { fillUsagePanel, removeUsagePanel } from "./usage-panel.js";

const STEPS_PAGE = 200; // the events API's default page
const USAGE_REFRESH_MS = 250;
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
	// oldestSeq tells the seq of the oldest message the page shows.
	constructor({ threadID, tokenUsage, showError, oldestSeq }) {
		this.threadID = threadID;
		this.oldestSeq = oldestSeq;
		this.tokensOn = tokenUsage;
		this.showError = showError;
		this.cards = new Map(); // cardKey → card state, with its DOM node once placed
		this.labels = new Map(); // model name → display name
		// Bumped on every token-gate change, so an answer fetched before a
		// change is never applied after it.
		this.gateEpoch = 0;
		this.usageTimer = 0;
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

	card(runID, taskID) {
		const key = cardKey(runID, taskID);
		let c = this.cards.get(key);
		if (!c) {
			c = newCard(runID, taskID);
			c.timeline = new Map(); // seq → step
			c.complete = false; // whether the timeline holds every step so far
			this.cards.set(key, c);
		}
		return c;
	}

	render(c) {
		renderCard(c, { showTokens: this.showTokens(), labels: this.labels });
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
		if (remembered(c)) setExpanded(c, true, this.steps);
		return c;
	}

	onClick(ev) {
		const button = ev.target.closest?.("section.card .card-toggle, section.card .card-cancel");
		const node = button?.closest("section.card");
		const c = node && this.cards.get(cardKey(node.dataset.runId ?? "", node.dataset.taskId ?? ""));
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

	async refreshUsage() {
		if (!this.showTokens()) return;
		const epoch = this.gateEpoch;
		try {
			const u = await getJSON(`/api/threads/${this.threadID}/usage`);
			if (epoch !== this.gateEpoch) return;
			if (u.token_usage_enabled === false) removeUsagePanel();
			else fillUsagePanel(u, this.labels);
		} catch {
			// The numbers stay as they were; the next refresh corrects them.
		}
	}

	// refreshUsageSoon refreshes the usage panel at most every
	// USAGE_REFRESH_MS while usage keeps arriving, so the thread's figures
	// follow the cards during a run, not only after it.
	refreshUsageSoon() {
		if (this.usageTimer) return;
		this.usageTimer = setTimeout(() => {
			this.usageTimer = 0;
			this.refreshUsage();
		}, USAGE_REFRESH_MS);
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
					const c = this.cards.get(cardKey(t.run_id, t.task_id));
					if (c) raiseTotal(c, normalizeUsage(t.usage));
				}
				if (!page.has_more || page.next <= oldest) break;
			}
		} catch (err) {
			this.showError(`Could not load the token figures: ${err.message}`);
		}
		if (epoch === this.gateEpoch) for (const c of this.cards.values()) this.render(c);
	}

	// ---- what thread.js calls ----

	// load adopts the server-rendered cards under root and learns the
	// models' display names; it resolves when the cards are ready.
	async load(root) {
		for (const node of root.querySelectorAll("section.card")) this.adopt(node);
		try {
			const body = await getJSON("/api/models");
			for (const m of body.models ?? []) this.labels.set(m.name, m.display_name || m.name);
			for (const c of this.cards.values()) this.render(c);
		} catch {
			// Live cards show raw model names, as for an unknown model.
		}
	}

	// adoptUnder adopts the server-rendered cards of a page of older
	// messages (nodes, the page's top-level elements).
	adoptUnder(nodes) {
		for (const node of nodes) {
			for (const card of node.querySelectorAll("section.card")) this.render(this.adopt(card));
		}
	}

	// mount places the cards of a live AI message's task calls.
	mount(node, m) {
		for (const call of m.tool_calls ?? []) {
			if (call.name !== "task") continue;
			const c = this.card(str(m.run_id), str(call.id));
			applyTaskCall(c, call.args);
			// Frames follow their message: this page will see every step.
			if (c.version === 0) c.complete = true;
			const slot = node.querySelector(`.task-slot[data-task-id="${CSS.escape(c.taskID)}"]`);
			if (slot) this.place(c, slot);
		}
	}

	taskFrame(type, d, frame) {
		const c = this.card(str(d.run_id) || str(frame.run_id), str(d.task_id));
		// Under the token gate frames carry no usage; never keep a figure
		// this page may not show.
		const data = this.showTokens() ? d : { ...d, usage: null };
		let applied = false;
		this.update(c, () => (applied = applyTaskFrame(c, type, data, frame.seq)));
		if (!applied) return;
		if (type === "task_running" && Number.isInteger(frame.seq) && d.step) addStep(c, stepOf(frame.seq, d.step));
		if (isTerminal(c.status) || d.usage) this.refreshUsageSoon();
	}

	// progress shows a running tool's progress (an MCP server's
	// notifications/progress) as a running card's status line, until its
	// next step replaces it.
	progress(d, frame) {
		const c = this.cards.get(cardKey(str(d.run_id) || str(frame.run_id), str(d.task_id)));
		if (!c || c.status !== "running") return;
		this.update(c, () => {
			c.activity = str(d.text);
		});
	}

	toolMessage(m) {
		const c = this.card(str(m.run_id), str(m.tool_call_id));
		const kwargs = this.showTokens() ? m.additional_kwargs : { ...m.additional_kwargs, subagent_token_usage: null };
		this.update(c, () => applyToolMessage(c, { ...m, additional_kwargs: kwargs }));
		this.refreshUsageSoon();
	}

	// runEnded fails the run's cards that never got a result.
	runEnded(runID) {
		for (const c of this.cards.values()) {
			if (c.runID === runID) this.update(c, () => failUnfinished(c));
		}
		this.refreshUsageSoon();
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
			this.render(c);
		}
		removeUsagePanel();
	}
}
