// Subagent cards (SPEC §6.5). A card's state is merged from the task frames
// of the thread's WebSocket and from its task ToolMessage, then rendered
// into the markup of views.Card (views/card.templ documents that DOM
// contract): server-rendered cards are adopted from the page, cards that
// appear live are cloned from <template id="card-template">. The server
// projects the same state from history (agent.ProjectCards), so a reload
// shows what was shown live. The pure functions below (formatting,
// metadata, merging) are exported for the browser contract tests.

const TERMINAL_STATUSES = ["completed", "failed", "cancelled", "timed_out", "polling_timed_out"];
const STOP_LABELS = {
	token_capped: "capped: token budget",
	turn_capped: "capped: turn budget",
	loop_capped: "capped: repeated tool-call loop",
};
const TERMINAL_FRAMES = {
	task_completed: "completed",
	task_failed: "failed",
	task_cancelled: "cancelled",
	task_timed_out: "timed_out",
};

export const TASK_FRAME_TYPES = ["task_queued", "task_started", "task_running", ...Object.keys(TERMINAL_FRAMES)];

// The error of a card whose run ended without its ToolMessage: the text of
// agent.NoResult, so a live card reads as it will after a reload.
const NO_RESULT = "the run ended before this subagent reported a result";
const STEPS_PAGE = 200; // the events API's default page
// Steps kept for a collapsed card; past this it forgets them and reloads
// them from the events API when expanded.
const MAX_KEPT_STEPS = 500;
const USAGE_REFRESH_MS = 250;

// ---- formatting (views/card_format.go; contracts/card_format_contract.json) ----

export function groupThousands(n) {
	return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

// tenths writes a count of tenths as "12.3".
function tenths(t) {
	return `${Math.floor(t / 10)}.${t % 10}`;
}

// tokenLabel follows views.TokenLabel: tenths rounded half up in integers,
// the unit chosen after rounding.
export function tokenLabel(total, terminal) {
	if (total === null || total === undefined) return terminal ? "usage unavailable" : "collecting…";
	if (total < 10_000) return `${groupThousands(total)} tokens`;
	const k = Math.floor((total + 50) / 100);
	if (k < 10_000) return `${tenths(k)}K tokens`;
	return `${tenths(Math.floor((total + 50_000) / 100_000))}M tokens`;
}

export function statusText(status, activity) {
	switch (status) {
		case "queued":
			return "Queued";
		case "running":
			return activity || "Running";
		case "completed":
			return "Completed";
		case "failed":
			return "Failed";
		case "cancelled":
			return "Cancelled";
		case "timed_out":
		case "polling_timed_out":
			return "Timed out";
	}
	return "Running";
}

export function stopLabel(reason) {
	return Object.hasOwn(STOP_LABELS, reason) ? STOP_LABELS[reason] : "";
}

export function isTerminal(status) {
	return TERMINAL_STATUSES.includes(status);
}

// ---- reading what the server sent (agent/contract.go) ----

function str(v) {
	return typeof v === "string" ? v : "";
}

function isCount(v) {
	return Number.isInteger(v) && v >= 0;
}

// normalizeUsage accepts a usage snapshot whose three counts are all
// integers ≥ 0; anything else is absent (null), as agent.NormalizeUsage.
export function normalizeUsage(u) {
	if (!u || typeof u !== "object" || Array.isArray(u)) return null;
	const { input_tokens: input, output_tokens: output, total_tokens: total } = u;
	if (!isCount(input) || !isCount(output) || !isCount(total)) return null;
	return { input_tokens: input, output_tokens: output, total_tokens: total };
}

// readMetadata reads a task ToolMessage's additional_kwargs tolerantly, as
// agent.ReadMetadata: legacy max_turns_reached reads as completed or
// failed with turn_capped; an unknown status means no metadata (null).
export function readMetadata(kwargs) {
	if (!kwargs || typeof kwargs !== "object") return null;
	const md = {
		status: str(kwargs.subagent_status),
		stopReason: str(kwargs.subagent_stop_reason),
		error: str(kwargs.subagent_error),
		resultBrief: str(kwargs.subagent_result_brief),
		modelName: str(kwargs.subagent_model_name).trim(),
		usage: normalizeUsage(kwargs.subagent_token_usage),
	};
	if (md.status === "max_turns_reached") {
		md.stopReason = "turn_capped";
		md.status = md.resultBrief.trim() !== "" ? "completed" : "failed";
	} else if (!isTerminal(md.status)) {
		return null;
	}
	if (stopLabel(md.stopReason) === "") md.stopReason = "";
	return md;
}

// statusFromContent reads a terminal status from a ToolMessage's text,
// for rows without usable metadata ("" when the text says nothing).
export function statusFromContent(content) {
	const c = str(content).trim();
	if (c.startsWith("Task Succeeded")) return "completed";
	if (c.startsWith("Task failed")) return "failed";
	if (c.startsWith("Task cancelled")) return "cancelled";
	if (c.startsWith("Task timed out")) return "timed_out";
	return "";
}

// afterMarker is what follows marker in content ("Task …. Result: R"),
// or "" when content does not start with prefix or has no marker.
function afterMarker(content, prefix, marker) {
	const i = content.indexOf(marker);
	return content.startsWith(prefix) && i >= 0 ? content.slice(i + marker.length) : "";
}

function stepActivity(step) {
	if (str(step?.tool_name) !== "") return step.tool_name;
	const calls = Array.isArray(step?.tool_calls) ? step.tool_calls : [];
	return str(calls[calls.length - 1]?.name);
}

// ---- card state and merging (agent/cards.go) ----

export function newCard(runID, taskID) {
	return {
		runID,
		taskID,
		executionID: "",
		description: "",
		prompt: "",
		subagentType: "",
		status: "queued",
		activity: "",
		modelName: "",
		total: null, // the latest cumulative total_tokens; null without usage
		stopReason: "",
		result: "",
		resultHTML: null, // the ToolMessage's sanitized HTML; null: show result as text
		error: "",
		version: 0,
		lastSeq: 0,
		steps: 0,
	};
}

function raiseTotal(card, usage) {
	if (usage && (card.total === null || usage.total_tokens >= card.total)) card.total = usage.total_tokens;
}

// applyTaskFrame merges one task frame into card and reports whether it
// changed anything. A frame no newer than the card's version is dropped,
// so replays and duplicates change nothing; usage only ever rises; a
// terminal card never goes back to queued or running.
export function applyTaskFrame(card, type, d, seq) {
	if (!TASK_FRAME_TYPES.includes(type) || !d || typeof d !== "object") return false;
	if (!Number.isInteger(d.version) || d.version <= card.version) return false;
	card.version = d.version;
	if (Number.isInteger(seq) && seq > card.lastSeq) card.lastSeq = seq;
	if (str(d.execution_id) !== "") card.executionID = d.execution_id;
	if (str(d.model_name).trim() !== "") card.modelName = d.model_name.trim();
	raiseTotal(card, normalizeUsage(d.usage));
	if (type === "task_queued" || type === "task_started") {
		// The task call's arguments came first when the card has them.
		card.description ||= str(d.description).trim();
		card.prompt ||= str(d.prompt);
		card.subagentType ||= str(d.subagent_type).trim();
	}
	if (isTerminal(card.status)) return true;
	switch (type) {
		case "task_queued":
			card.status = "queued";
			break;
		case "task_started":
			card.status = "running";
			break;
		case "task_running":
			card.status = "running";
			if (Number.isInteger(d.message_index) && d.message_index > card.steps) card.steps = d.message_index;
			card.activity = stepActivity(d.step);
			break;
		default:
			card.status = type === "task_timed_out" && d.status === "polling_timed_out" ? d.status : TERMINAL_FRAMES[type];
			card.activity = "";
			card.steps = 0; // counted only while live, as the server does
			card.result = str(d.result);
			// The server renders the result as it renders the page, so the
			// card reads the same before its ToolMessage arrives.
			card.resultHTML = str(d.result_html) !== "" ? d.result_html : null;
			card.error = str(d.error);
			if (stopLabel(d.stop_reason) !== "") card.stopReason = d.stop_reason;
	}
	return true;
}

// applyToolMessage makes the task's ToolMessage the card's final word, as
// agent.Card.applyResult does: its metadata (or, without usable metadata,
// its text) sets the status, stop reason, model, usage and result or error.
export function applyToolMessage(card, m) {
	const content = str(m.content);
	card.activity = "";
	card.steps = 0;
	let md = readMetadata(m.additional_kwargs);
	if (!md) {
		const status = statusFromContent(content);
		if (status === "") {
			// A legacy result with no recognisable shape: it did return.
			card.status = "completed";
			card.result = content;
			card.resultHTML = null;
			return;
		}
		md = { status, stopReason: "", error: "", resultBrief: "", modelName: "", usage: null };
	}
	card.status = md.status;
	card.stopReason = md.stopReason;
	if (md.modelName !== "") card.modelName = md.modelName;
	if (md.usage) card.total = md.usage.total_tokens;
	if (md.status === "completed") {
		const result = afterMarker(content, "Task Succeeded", ". Result: ");
		card.result = result || md.resultBrief;
		card.resultHTML = result !== "" && str(m.html) !== "" ? m.html : null;
		card.error = "";
	} else if (md.status === "polling_timed_out") {
		card.error = content.trim();
	} else {
		card.result = "";
		card.resultHTML = null;
		card.error = afterMarker(content, "Task ", ". Error: ") || md.error;
	}
}

// stepOf is one timeline entry from a task_running frame's step or a
// subagent.step event's content.
function stepOf(seq, s) {
	const calls = Array.isArray(s.tool_calls) ? s.tool_calls : [];
	return {
		seq,
		kind: s.kind === "tool" ? "tool" : "ai",
		text: str(s.text),
		truncated: s.truncated === true,
		toolName: str(s.tool_name),
		calls: calls.map((c) => ({ name: str(c?.name), args: str(c?.args), truncated: c?.args_truncated === true })),
	};
}

// ---- the page ----

function el(tag, className, text) {
	const node = document.createElement(tag);
	if (className) node.className = className;
	if (text !== undefined) node.textContent = text;
	return node;
}

function intAttr(v) {
	const n = Number.parseInt(v ?? "", 10);
	return Number.isNaN(n) ? 0 : n;
}

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

function taskArgs(args) {
	if (typeof args === "string") {
		try {
			return JSON.parse(args) ?? {};
		} catch {
			return {};
		}
	}
	return args && typeof args === "object" ? args : {};
}

// createCards runs the cards of one thread page; app.js feeds it frames
// and messages and lends it its request helpers.
export function createCards({ threadID, isAdmin, tokenUsage, post, errorMessage, showError }) {
	const cards = new Map(); // cardKey → card state, with its DOM node once placed
	const labels = new Map(); // model name → display name
	let tokensOn = tokenUsage;
	// Bumped on every token-gate change, so an answer fetched before a
	// change is never applied after it.
	let gateEpoch = 0;
	let usageTimer = 0;
	// Tests shrink the events page with ?steps_page=N to exercise paging.
	const stepsPage = Math.min(Math.max(intAttr(new URLSearchParams(location.search).get("steps_page")) || STEPS_PAGE, 1), 1000);

	const showTokens = () => isAdmin || tokensOn;

	function card(runID, taskID) {
		const key = cardKey(runID, taskID);
		let c = cards.get(key);
		if (!c) {
			c = newCard(runID, taskID);
			c.timeline = new Map(); // seq → step
			c.complete = false; // whether the timeline holds every step so far
			cards.set(key, c);
		}
		return c;
	}

	function part(c, selector) {
		return c.node.querySelector(selector);
	}

	// ---- rendering ----

	function render(c) {
		if (!c.node) return;
		const node = c.node;
		const terminal = isTerminal(c.status);
		node.className = `card card-${c.status}`;
		node.dataset.status = c.status;
		node.dataset.executionId = c.executionID;
		node.dataset.version = String(c.version);
		node.dataset.lastSeq = String(c.lastSeq);
		node.dataset.steps = String(c.steps);
		node.dataset.totalTokens = showTokens() && c.total !== null ? String(c.total) : "";
		part(c, ".card-title").textContent = c.description.trim() === "" ? "Subagent task" : c.description;
		part(c, ".card-status").textContent = statusText(c.status, c.activity);
		const model = part(c, ".card-model");
		model.textContent = labels.get(c.modelName) ?? c.modelName;
		model.title = c.modelName;
		model.hidden = c.modelName === "";
		let tokens = part(c, ".card-tokens");
		if (showTokens()) {
			if (!tokens) {
				tokens = el("span", "card-tokens");
				part(c, ".card-badge").before(tokens);
			}
			tokens.textContent = tokenLabel(c.total, terminal);
		} else {
			tokens?.remove();
		}
		const badge = part(c, ".card-badge");
		badge.textContent = stopLabel(c.stopReason);
		badge.hidden = c.stopReason === "";
		part(c, ".card-cancel").hidden = terminal;
		part(c, ".card-meta").textContent = c.subagentType;
		part(c, ".card-prompt").textContent = c.prompt;
		const error = part(c, ".card-error");
		error.textContent = c.error;
		error.hidden = c.error === "";
		if (c.resultChanged) {
			c.resultChanged = false;
			const result = part(c, ".card-result");
			// The one innerHTML of the cards: the server rendered and
			// sanitized the ToolMessage's result.
			if (c.resultHTML !== null) result.innerHTML = c.resultHTML;
			else result.textContent = c.result;
		}
	}

	// update applies change to a card's state and renders it, unless
	// change reports (false) that it changed nothing.
	function update(c, change) {
		const [result, html] = [c.result, c.resultHTML];
		if (change() === false) return;
		if (c.result !== result || c.resultHTML !== html) c.resultChanged = true;
		render(c);
	}

	function place(c, slot) {
		if (c.node?.isConnected) return;
		const node = document.getElementById("card-template").content.firstElementChild.cloneNode(true);
		const id = `card-${c.runID}-${c.taskID}`;
		node.id = id;
		node.dataset.runId = c.runID;
		node.dataset.taskId = c.taskID;
		node.querySelector(".card-toggle").setAttribute("aria-controls", `${id}-body`);
		node.querySelector(".card-body").id = `${id}-body`;
		slot.replaceChildren(node);
		c.node = node;
		c.resultChanged = true;
		render(c);
		if (remembered(c)) setExpanded(c, true);
	}

	// adopt reads a server-rendered card's state back from the attributes
	// and texts views.Card wrote.
	function adopt(node) {
		const c = card(node.dataset.runId ?? "", node.dataset.taskId ?? "");
		const text = (selector) => node.querySelector(selector)?.textContent ?? "";
		c.node = node;
		c.status = node.dataset.status ?? "queued";
		c.executionID = node.dataset.executionId ?? "";
		c.version = intAttr(node.dataset.version);
		c.lastSeq = intAttr(node.dataset.lastSeq);
		c.steps = intAttr(node.dataset.steps);
		c.total = (node.dataset.totalTokens ?? "") === "" ? null : intAttr(node.dataset.totalTokens);
		c.description = text(".card-title");
		const shown = text(".card-status");
		c.activity = c.status === "running" && shown !== "Running" ? shown : "";
		const model = node.querySelector(".card-model");
		c.modelName = model?.title ?? "";
		if (c.modelName !== "") labels.set(c.modelName, model.textContent);
		c.stopReason = Object.keys(STOP_LABELS).find((r) => STOP_LABELS[r] === text(".card-badge")) ?? "";
		c.subagentType = text(".card-meta");
		c.prompt = text(".card-prompt");
		c.error = text(".card-error");
		if (remembered(c)) setExpanded(c, true);
	}

	// ---- the step timeline ----

	function stepElement(step) {
		const li = el("li", `card-step card-step-${step.kind}`);
		li.dataset.seq = String(step.seq);
		if (step.kind === "tool") {
			li.append(el("span", "step-tool", step.toolName || "tool"));
			if (step.text !== "") li.append(el("pre", "step-output", step.text));
		} else {
			if (step.text !== "") li.append(el("p", "step-text", step.text));
			for (const call of step.calls) {
				const line = el("p", "step-call");
				line.append(el("span", "step-tool", call.name), el("code", "step-args", call.args));
				if (call.truncated) line.append(el("span", "step-cut", "arguments truncated"));
				li.append(line);
			}
		}
		if (step.truncated) li.append(el("span", "step-cut", "text truncated"));
		return li;
	}

	function expanded(c) {
		return c.node?.querySelector(".card-toggle").getAttribute("aria-expanded") === "true";
	}

	function addStep(c, step) {
		if (c.timeline.has(step.seq)) return;
		c.timeline.set(step.seq, step);
		if (!expanded(c)) {
			if (c.timeline.size > MAX_KEPT_STEPS) forgetSteps(c);
			return;
		}
		const list = part(c, ".card-steps");
		const li = stepElement(step);
		const next = [...list.children].find((other) => intAttr(other.dataset.seq) > step.seq);
		if (next) next.before(li);
		else list.append(li);
		note(c);
	}

	function forgetSteps(c) {
		c.timeline.clear();
		c.complete = false;
		if (c.node) part(c, ".card-steps").replaceChildren();
	}

	function renderTimeline(c) {
		const steps = [...c.timeline.values()].sort((a, b) => a.seq - b.seq);
		part(c, ".card-steps").replaceChildren(...steps.map(stepElement));
		note(c);
	}

	function note(c, text) {
		const line = part(c, ".card-steps-note");
		if (text !== undefined) line.textContent = text;
		else if (c.loading) line.textContent = "Loading steps…";
		else line.textContent = c.complete && c.timeline.size === 0 ? "No steps yet." : "";
	}

	// backfill loads the steps this page has not seen (it was loaded or
	// reconnected mid-run) from the events API, page by page, and merges
	// them with those that arrived live: one entry per seq, in seq order.
	async function backfill(c) {
		if (c.complete || c.loading) return;
		c.loading = true;
		note(c);
		const query = (after) =>
			new URLSearchParams({
				task_id: c.taskID,
				run_id: c.runID,
				event_types: "subagent.step",
				after_seq: String(after),
				limit: String(stepsPage),
			});
		let after = 0;
		try {
			for (;;) {
				const page = await getJSON(`/api/threads/${threadID}/events?${query(after)}`);
				for (const e of page.events ?? []) addStep(c, stepOf(e.seq, e.content ?? {}));
				if (!page.has_more || !(page.next_after_seq > after)) break;
				after = page.next_after_seq;
			}
			c.complete = true;
			c.loading = false;
			if (expanded(c)) renderTimeline(c);
		} catch (err) {
			c.loading = false;
			note(c, `Could not load the steps (${err.message}). Collapse and expand to retry.`);
		}
	}

	function setExpanded(c, open) {
		part(c, ".card-toggle").setAttribute("aria-expanded", String(open));
		part(c, ".card-body").hidden = !open;
		if (!open) return;
		renderTimeline(c);
		backfill(c);
	}

	// ---- actions ----

	async function cancel(c, button) {
		button.disabled = true;
		try {
			const res = await post(`/api/threads/${threadID}/tasks/${encodeURIComponent(c.taskID)}/cancel`);
			if (!res.ok) showError(await errorMessage(res));
		} catch {
			showError("Could not reach the server to cancel the subagent.");
		} finally {
			button.disabled = false;
		}
	}

	// One listener serves the server-rendered and the cloned cards.
	document.addEventListener("click", (ev) => {
		const button = ev.target.closest?.("section.card .card-toggle, section.card .card-cancel");
		const node = button?.closest("section.card");
		const c = node && cards.get(cardKey(node.dataset.runId ?? "", node.dataset.taskId ?? ""));
		if (!c) return;
		if (button.matches(".card-cancel")) {
			cancel(c, button);
			return;
		}
		const open = !expanded(c);
		remember(c, open);
		setExpanded(c, open);
	});

	// ---- token figures ----

	async function getJSON(path) {
		const res = await fetch(path);
		if (!res.ok) throw new Error(await errorMessage(res));
		return res.json();
	}

	function fillUsagePanel(u) {
		let panel = document.getElementById("usage-panel");
		if (!panel) {
			panel = document.getElementById("usage-template").content.firstElementChild.cloneNode(true);
			document.getElementById("conn-status").after(panel);
		}
		const count = (n) => groupThousands(n ?? 0);
		panel.querySelector('[data-usage="total"]').textContent = count(u.total?.total_tokens);
		panel.querySelector('[data-usage="lead"]').textContent = count(u.lead?.total_tokens);
		panel.querySelector('[data-usage="subagents"]').textContent = count(u.subagents?.total_tokens);
		const rows = Object.keys(u.by_model ?? {})
			.sort()
			.map((name) => {
				const t = u.by_model[name];
				const label = el("td", "", labels.get(name) ?? name);
				label.title = name;
				const row = el("tr");
				row.append(label, ...[t.calls, t.input_tokens, t.output_tokens, t.total_tokens].map((n) => el("td", "", count(n))));
				return row;
			});
		panel.querySelector('[data-usage="by-model"]').replaceChildren(...rows);
	}

	async function refreshUsage() {
		if (!showTokens()) return;
		const epoch = gateEpoch;
		try {
			const u = await getJSON(`/api/threads/${threadID}/usage`);
			if (epoch !== gateEpoch) return;
			if (u.token_usage_enabled === false) document.getElementById("usage-panel")?.remove();
			else fillUsagePanel(u);
		} catch {
			// The numbers stay as they were; the next refresh corrects them.
		}
	}

	function refreshUsageSoon() {
		clearTimeout(usageTimer);
		usageTimer = setTimeout(refreshUsage, USAGE_REFRESH_MS);
	}

	// refetchTotals brings back the totals the gate kept from this page,
	// then shows every card's token label.
	async function refetchTotals() {
		const epoch = gateEpoch;
		try {
			const thread = await getJSON(`/api/threads/${threadID}`);
			if (epoch !== gateEpoch) return;
			for (const t of thread.tasks ?? []) {
				const c = cards.get(cardKey(t.run_id, t.task_id));
				if (c) raiseTotal(c, normalizeUsage(t.usage));
			}
		} catch (err) {
			showError(`Could not load the token figures: ${err.message}`);
		}
		if (epoch === gateEpoch) for (const c of cards.values()) render(c);
	}

	// ---- what app.js calls ----

	return {
		// load adopts the server-rendered cards under root and learns the
		// models' display names; it resolves when the cards are ready.
		async load(root) {
			for (const node of root.querySelectorAll("section.card")) adopt(node);
			try {
				const body = await getJSON("/api/models");
				for (const m of body.models ?? []) labels.set(m.name, m.display_name || m.name);
				for (const c of cards.values()) render(c);
			} catch {
				// Live cards show raw model names, as for an unknown model.
			}
		},

		// mount places the cards of a live AI message's task calls.
		mount(node, m) {
			for (const call of m.tool_calls ?? []) {
				if (call.name !== "task") continue;
				const c = card(str(m.run_id), str(call.id));
				const args = taskArgs(call.args);
				c.description = str(args.description).trim();
				c.prompt = str(args.prompt);
				const criteria = str(args.acceptance_criteria).trim();
				if (criteria !== "") c.prompt += `\n\nAcceptance criteria:\n${criteria}`;
				c.subagentType = str(args.subagent_type).trim();
				// Frames follow their message: this page will see every step.
				if (c.version === 0) c.complete = true;
				const slot = node.querySelector(`.task-slot[data-task-id="${CSS.escape(c.taskID)}"]`);
				if (slot) place(c, slot);
			}
		},

		taskFrame(type, d, frame) {
			const c = card(str(d.run_id) || str(frame.run_id), str(d.task_id));
			// Under the token gate frames carry no usage; never keep a
			// figure this page may not show.
			const data = showTokens() ? d : { ...d, usage: null };
			let applied = false;
			update(c, () => (applied = applyTaskFrame(c, type, data, frame.seq)));
			if (!applied) return;
			if (type === "task_running" && Number.isInteger(frame.seq) && d.step) addStep(c, stepOf(frame.seq, d.step));
			if (isTerminal(c.status)) refreshUsageSoon();
		},

		toolMessage(m) {
			const c = card(str(m.run_id), str(m.tool_call_id));
			const kwargs = showTokens() ? m.additional_kwargs : { ...m.additional_kwargs, subagent_token_usage: null };
			update(c, () => applyToolMessage(c, { ...m, additional_kwargs: kwargs }));
			refreshUsageSoon();
		},

		// runEnded fails the run's cards that never got a result, as a
		// reload would show them: never spinning.
		runEnded(runID) {
			for (const c of cards.values()) {
				if (c.runID !== runID || isTerminal(c.status)) continue;
				update(c, () => {
					c.status = "failed";
					c.activity = "";
					c.steps = 0;
					c.error = NO_RESULT;
				});
			}
			refreshUsageSoon();
		},

		setTokenUsage(on) {
			if (isAdmin || on === tokensOn) return; // admins always see the figures
			tokensOn = on;
			gateEpoch++;
			if (on) {
				refetchTotals();
				refreshUsage();
				return;
			}
			for (const c of cards.values()) {
				c.total = null;
				render(c);
			}
			document.getElementById("usage-panel")?.remove();
		},
	};
}
