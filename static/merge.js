// A subagent card's state and how frames and messages merge into it
// (docs/DESIGN.md §9), as agent/cards.go projects it from history, so a
// reload shows what was shown live. contracts/card_merge_contract.json
// holds the rules as cases that both run. Pure functions: no DOM.

import { activityText, isTerminal, stopLabel } from "./format.js";
import { legacyRefusal, legacyStatus, normalizeUsage, readMetadata, str, textAfterPhrase } from "./metadata.js";

const TERMINAL_FRAMES = {
	task_completed: "completed",
	task_failed: "failed",
	task_cancelled: "cancelled",
	task_timed_out: "timed_out",
};

export const TASK_FRAME_TYPES = ["task_queued", "task_started", "task_waiting", "task_running", ...Object.keys(TERMINAL_FRAMES)];

// The error of a card whose run ended without its ToolMessage: the text of
// agent.NoResult, so a live card reads as it will after a reload.
const NO_RESULT = "the run ended before this subagent reported a result";

export function newCard(runID, taskID) {
	return {
		runID,
		taskID,
		executionID: "",
		description: "",
		prompt: "",
		subagentType: "",
		status: "queued",
		activity: "", // what it is doing, in words (activityText)
		waiting: false, // running, its model call waiting for a slot of its model
		modelName: "",
		total: null, // the latest cumulative total_tokens; null without usage
		stopReason: "",
		result: "",
		resultHTML: null, // the ToolMessage's sanitized HTML; null: show result as text
		error: "",
		refusal: null, // {reason, limit}: the limit that refused it before it started
		continues: "", // its item's first call, when later calls continued it (agent.Card.Continues)
		version: 0,
		lastSeq: 0,
		steps: 0,
		// When it was queued, started and ended (ms since the epoch, the
		// commit times of its frames), as agent.Card: null until then.
		queuedAt: null,
		startedAt: null,
		endedAt: null,
		files: [], // [{path, size}]: what its subagent wrote, as agent.Card.Files
	};
}

// instant reads a frame's created_at; null for none.
export function instant(s) {
	const t = typeof s === "string" ? Date.parse(s) : NaN;
	return Number.isFinite(t) ? t : null;
}

const STAMPS = { task_queued: "queuedAt", task_started: "startedAt" };

// stamp keeps the first time a card was queued, started and ended.
function stamp(card, type, at) {
	const field = STAMPS[type] ?? (Object.hasOwn(TERMINAL_FRAMES, type) ? "endedAt" : "");
	if (field !== "" && at !== null && card[field] === null) card[field] = at;
}

export function raiseTotal(card, usage) {
	if (usage && (card.total === null || usage.total_tokens >= card.total)) card.total = usage.total_tokens;
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

// applyTaskCall takes the card's title, prompt and type from its task
// call's arguments (a JSON string or object), as agent.ProjectCards does.
export function applyTaskCall(card, args) {
	const a = taskArgs(args);
	card.description = str(a.description).trim();
	card.prompt = str(a.prompt);
	const criteria = str(a.acceptance_criteria).trim();
	if (criteria !== "") card.prompt += `\n\nAcceptance criteria:\n${criteria}`;
	card.subagentType = str(a.subagent_type).trim();
}

// applyTaskFrame merges one task frame into card and reports whether it
// changed anything. A frame no newer than the card's version is dropped,
// so replays and duplicates change nothing; usage only ever rises; a
// terminal card never goes back to queued or running. at is the frame's
// created_at (instant).
export function applyTaskFrame(card, type, d, seq, at = null) {
	if (!TASK_FRAME_TYPES.includes(type) || !d || typeof d !== "object") return false;
	if (!Number.isInteger(d.version) || d.version <= card.version) return false;
	card.version = d.version;
	if (Number.isInteger(seq) && seq > card.lastSeq) card.lastSeq = seq;
	if (str(d.execution_id) !== "") card.executionID = d.execution_id;
	if (str(d.model_name).trim() !== "") card.modelName = d.model_name.trim();
	raiseTotal(card, normalizeUsage(d.usage));
	stamp(card, type, at);
	if (type === "task_queued" || type === "task_started") {
		// The task call's arguments came first when the card has them.
		card.description ||= str(d.description).trim();
		card.prompt ||= str(d.prompt);
		card.subagentType ||= str(d.subagent_type).trim();
	}
	if (isTerminal(card.status)) return true;
	// Only a wait frame says the task waits; every newer frame means its
	// call got a slot (or it has not made one yet, or it ended).
	card.waiting = false;
	if (type === "task_queued") card.status = "queued";
	else if (type === "task_started") card.status = "running";
	else if (type === "task_waiting") {
		card.status = "running";
		card.waiting = d.waiting === true;
	} else if (type === "task_running") applyStep(card, d);
	else applyEnd(card, type, d);
	return true;
}

function applyStep(card, d) {
	card.status = "running";
	if (Number.isInteger(d.message_index) && d.message_index > card.steps) card.steps = d.message_index;
	card.activity = activityText(d.step);
}

function applyEnd(card, type, d) {
	card.status = type === "task_timed_out" && d.status === "polling_timed_out" ? d.status : TERMINAL_FRAMES[type];
	card.activity = "";
	card.steps = 0; // counted only while live, as the server does
	card.result = str(d.result);
	// The server renders the result as it renders the page, so the card
	// reads the same before its ToolMessage arrives.
	card.resultHTML = str(d.result_html) !== "" ? d.result_html : null;
	card.error = str(d.error);
	if (stopLabel(d.stop_reason) !== "") card.stopReason = d.stop_reason;
}

// applyWorkspaceFrame gives each card the files a workspace frame says
// its subagent wrote, as agent.Card.applyChanges does: in the order first
// written, at the latest size; a file it deleted leaves the card. cardOf
// finds a task's card (undefined: none on this page). A change is not a
// step: version, status and lastSeq stay. It reports the cards changed.
export function applyWorkspaceFrame(d, cardOf) {
	const changed = new Set();
	for (const ch of Array.isArray(d?.changes) ? d.changes : []) {
		const card = str(ch?.task_id) !== "" ? cardOf(ch.task_id) : undefined;
		if (!card || str(ch.path) === "") continue;
		const i = card.files.findIndex((f) => f.path === ch.path);
		if (ch.deleted === true) {
			if (i >= 0) card.files.splice(i, 1);
		} else if (i >= 0) card.files[i].size = ch.size;
		else card.files.push({ path: ch.path, size: ch.size });
		changed.add(card);
	}
	return [...changed];
}

// applyToolMessage makes the task's ToolMessage the card's final word, as
// agent.Card.applyResult does: its metadata (or, without usable metadata,
// its text) sets the status, stop reason, model, usage and result or error.
export function applyToolMessage(card, m) {
	const content = str(m.content);
	card.endedAt ??= instant(m.created_at);
	card.activity = "";
	card.waiting = false;
	card.steps = 0;
	card.refusal = null;
	let md = readMetadata(m.additional_kwargs);
	if (!md) {
		const status = legacyStatus(content);
		if (status === "") {
			// A legacy result with no recognisable shape: it did return.
			card.status = "completed";
			card.result = content;
			card.resultHTML = null;
			return;
		}
		md = { status, stopReason: "", error: "", resultBrief: "", modelName: "", usage: null, refusal: null };
	}
	card.status = md.status;
	card.stopReason = md.stopReason;
	if (md.modelName !== "") card.modelName = md.modelName;
	if (md.usage) card.total = md.usage.total_tokens;
	applyOutcome(card, md, content, str(m.html));
}

// applyTaskResult is applyToolMessage as a thread applies it: a card the
// per-response limit refused then waits for a later call (hold), as
// agent.ProjectCards does.
export function applyTaskResult(card, m) {
	applyToolMessage(card, m);
	hold(card);
}

const HELD_REASON = "max_concurrent_per_response";

// isHeld reports whether a card waits for a later call of its task: the
// per-response limit refused it and its run may call it again
// (agent.Card.Held).
export function isHeld(card) {
	return card.status === "queued" && card.refusal?.reason === HELD_REASON;
}

// hold makes a card the per-response limit refused wait for a later call,
// queued from its refusal on (agent.Card.hold).
function hold(card) {
	if (card.status !== "failed" || card.refusal?.reason !== HELD_REASON) return;
	card.status = "queued";
	card.queuedAt ??= card.endedAt;
	card.endedAt = null;
}

// taskContinues is an AI message's links (its additional_kwargs'
// task_continues): each task call that continues a held one, to its
// item's first call.
export function taskContinues(m) {
	const links = m?.additional_kwargs?.task_continues;
	const out = new Map();
	if (!links || typeof links !== "object") return out;
	for (const [call, first] of Object.entries(links)) if (str(first) !== "") out.set(call, first);
	return out;
}

// continueCard makes a held card the card of taskID, the call that
// continues it (agent.Card.continueWith): its task from now on, still
// waiting since its first refusal.
export function continueCard(card, taskID, args) {
	card.continues ||= card.taskID;
	card.taskID = taskID;
	Object.assign(card, { executionID: "", status: "queued", refusal: null, error: "", result: "", resultHTML: null, stopReason: "" });
	Object.assign(card, { activity: "", waiting: false, version: 0, steps: 0, startedAt: null, endedAt: null });
	applyTaskCall(card, args);
}

function applyOutcome(card, md, content, html) {
	if (md.status === "completed") {
		const result = textAfterPhrase(content, "completed");
		card.result = result || md.resultBrief;
		card.resultHTML = result !== "" && html !== "" ? html : null;
		card.error = "";
	} else if (md.status === "polling_timed_out") {
		card.error = content.trim();
	} else {
		card.result = "";
		card.resultHTML = null;
		card.error = textAfterPhrase(content, md.status) || md.error;
		if (md.status === "failed") card.refusal = md.refusal ?? legacyRefusal(card.error);
	}
}

// failUnfinished fails a card whose run ended without its result, as a
// reload would show it: never spinning. It reports whether it changed it.
// A held card was never started: refused when it was first held.
export function failUnfinished(card) {
	if (isTerminal(card.status)) return false;
	const held = isHeld(card);
	card.status = "failed";
	card.activity = "";
	card.waiting = false;
	card.steps = 0;
	if (held) {
		card.endedAt = card.queuedAt;
		card.queuedAt = null;
	} else card.error = NO_RESULT;
	return true;
}
