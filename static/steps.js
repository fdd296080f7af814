// A card's step timeline (docs/DESIGN.md §9 "Expanded"): steps that arrive live
// and steps backfilled from the events API, one entry per seq, in seq
// order. The timeline lives on the card's state: c.timeline (seq → step)
// and c.complete (whether it holds every step so far).

import { getJSON } from "./api.js";
import { el, intAttr, scrollRegion } from "./dom.js";
import { duration, toolLabel } from "./format.js";
import { instant } from "./merge.js";
import { str } from "./metadata.js";
import { toolOutputElement } from "./tool-output.js";

// Steps kept for a collapsed card; past this it forgets them and reloads
// them from the events API when expanded.
const MAX_KEPT_STEPS = 500;

// stepOf is one timeline entry from a task_running frame's step or a
// subagent.step event's content; createdAt is the frame's or event's.
export function stepOf(seq, s, createdAt) {
	const calls = Array.isArray(s.tool_calls) ? s.tool_calls : [];
	return {
		seq,
		at: instant(createdAt), // ms, null when unknown
		kind: s.kind === "tool" || s.kind === "resumed" ? s.kind : "ai",
		text: str(s.text),
		// An AI step's text rendered and sanitized by the server.
		html: str(s.text_html),
		truncated: s.truncated === true,
		toolName: str(s.tool_name),
		toolTitle: str(s.tool_title),
		reasoning: str(s.reasoning),
		reasoningTruncated: s.reasoning_truncated === true,
		calls: calls.map((c) => ({ name: str(c?.name), title: str(c?.title), args: str(c?.args), truncated: c?.args_truncated === true })),
		output: s.output ?? null,
	};
}

function stepElement(step) {
	const li = el("li", `card-step card-step-${step.kind}`);
	li.dataset.seq = String(step.seq);
	li.dataset.at = step.at === null ? "" : String(step.at);
	li.append(el("span", "step-time"));
	if (step.kind === "resumed") {
		// Where the task continued after a restart or on another
		// instance: a quiet line of the server's words, not the model's.
		const icon = el("span", "step-resumed-icon", "↻");
		icon.setAttribute("aria-hidden", "true");
		const line = el("p", "step-resumed");
		line.append(icon, step.text);
		li.append(line);
	} else if (step.kind === "tool") {
		const name = el("span", "step-tool", toolLabel(step.toolName, step.toolTitle) || "tool");
		if (step.toolName !== "" && name.textContent !== step.toolName) name.title = step.toolName;
		li.append(name);
		if (step.text !== "") li.append(scrollRegion(el("pre", "step-output", step.text)));
		const extra = toolOutputElement(step.output);
		if (extra) li.append(extra);
	} else {
		if (step.reasoning !== "") li.append(thinkingElement(step));
		// An answer without calls ends the subagent: it is the card's
		// result, shown once, below the steps.
		if (step.text !== "" && step.calls.length === 0) li.append(el("p", "step-note", "Answered: the result is below."));
		else if (step.html !== "") li.append(markdownElement(step.html));
		else if (step.text !== "") li.append(el("p", "step-text", step.text));
		for (const call of step.calls) {
			const line = el("p", "step-call");
			const name = el("span", "step-tool", toolLabel(call.name, call.title));
			if (name.textContent !== call.name) name.title = call.name;
			line.append(name, el("code", "step-args", call.args));
			if (call.truncated) line.append(el("span", "step-cut", "arguments truncated"));
			li.append(line);
		}
	}
	if (step.truncated) li.append(el("span", "step-cut", "text truncated"));
	return li;
}

function markdownElement(html) {
	const div = el("div", "step-md");
	// The server rendered and sanitized this field (server/render).
	div.innerHTML = html;
	return div;
}

// thinkingElement is an AI step's reasoning, collapsed above its text as
// a message's is (views/thread.templ, thinking).
function thinkingElement(step) {
	const block = el("details", "msg-thinking step-thinking");
	block.append(el("summary", "", "Thinking"), scrollRegion(el("div", "thinking-text", step.reasoning)));
	if (step.reasoningTruncated) block.append(el("span", "step-cut", "reasoning truncated"));
	return block;
}

export function expanded(c) {
	return c.node?.querySelector(".card-toggle").getAttribute("aria-expanded") === "true";
}

export function addStep(c, step) {
	if (c.timeline.has(step.seq)) return;
	c.timeline.set(step.seq, step);
	if (!expanded(c)) {
		if (c.timeline.size > MAX_KEPT_STEPS) forgetSteps(c);
		return;
	}
	const list = c.node.querySelector(".card-steps");
	const li = stepElement(step);
	const next = [...list.children].find((other) => intAttr(other.dataset.seq) > step.seq);
	if (next) next.before(li);
	else list.append(li);
	timeSteps(c);
	note(c);
}

// timeSteps writes each step's time: since the step before it (the first:
// since the card started), what its model call or its tools took.
function timeSteps(c) {
	let prev = c.startedAt;
	for (const li of c.node.querySelector(".card-steps").children) {
		const at = li.dataset.at === "" ? null : Number(li.dataset.at);
		const time = li.querySelector(".step-time");
		const took = at !== null && prev !== null ? duration(at - prev) : "";
		time.textContent = took;
		time.title = at === null ? "" : new Date(at).toLocaleTimeString();
		if (at !== null) prev = at;
	}
}

function forgetSteps(c) {
	c.timeline.clear();
	c.complete = false;
	if (c.node) c.node.querySelector(".card-steps").replaceChildren();
}

function renderTimeline(c) {
	const steps = [...c.timeline.values()].sort((a, b) => a.seq - b.seq);
	c.node.querySelector(".card-steps").replaceChildren(...steps.map(stepElement));
	timeSteps(c);
	note(c);
}

function note(c, text) {
	const line = c.node.querySelector(".card-steps-note");
	if (text !== undefined) line.textContent = text;
	else if (c.loading) line.textContent = "Loading steps…";
	else line.textContent = c.complete && c.timeline.size === 0 ? "No steps yet." : "";
}

// backfill loads the steps this page has not seen (it was loaded or
// reconnected mid-run) from the events API, page by page, and merges
// them with those that arrived live.
async function backfill(c, { threadID, pageSize }) {
	if (c.complete || c.loading) return;
	c.loading = true;
	note(c);
	const query = (after) =>
		new URLSearchParams({
			task_id: c.taskID,
			run_id: c.runID,
			event_types: "subagent.step",
			after_seq: String(after),
			limit: String(pageSize),
		});
	let after = 0;
	try {
		for (;;) {
			const page = await getJSON(`/api/threads/${threadID}/events?${query(after)}`);
			for (const e of page.events ?? []) addStep(c, stepOf(e.seq, e.content ?? {}, e.created_at));
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

// setExpanded opens or closes a card; an opened card shows the steps it
// has and backfills the rest from source ({threadID, pageSize}).
export function setExpanded(c, open, source) {
	c.node.querySelector(".card-toggle").setAttribute("aria-expanded", String(open));
	c.node.querySelector(".card-body").hidden = !open;
	if (!open) return;
	renderTimeline(c);
	backfill(c, source);
}
