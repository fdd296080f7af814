// Reading what the server sent, tolerantly (agent/contract.go): usage
// snapshots, a task ToolMessage's metadata and its text.

import { REFUSAL_REASONS, STOP_LABELS, isTerminal, stopLabel } from "./format.js";

export function str(v) {
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
		refusal: readRefusal(kwargs.subagent_refusal),
	};
	if (md.status === "max_turns_reached") {
		md.stopReason = "turn_capped";
		md.status = md.resultBrief.trim() !== "" ? "completed" : "failed";
	} else if (!isTerminal(md.status)) {
		return null;
	}
	if (stopLabel(md.stopReason) === "") md.stopReason = "";
	if (md.status !== "failed") md.refusal = null;
	return md;
}

// readRefusal reads subagent_refusal as agent.readRefusal: a known reason
// and a whole limit >= 0, else null.
export function readRefusal(r) {
	if (!r || typeof r !== "object" || !REFUSAL_REASONS.includes(r.reason) || !isCount(r.limit)) return null;
	return { reason: r.reason, limit: r.limit };
}

// LEGACY_REFUSAL matches the refusals older versions wrote without
// subagent_refusal (agent.legacyRefusal): the only place their wording is
// read back.
const LEGACY_REFUSAL = /^Not started: (?:one response may start at most (\d+) subagents|this run already started its limit of (\d+) subagents)/;

// legacyRefusal recovers the refusal of a failed task's error written
// before refusals were metadata; null for any other error.
export function legacyRefusal(error) {
	const m = LEGACY_REFUSAL.exec(str(error));
	if (!m) return null;
	return m[1] ? { reason: "max_concurrent_per_response", limit: Number(m[1]) } : { reason: "max_total_per_run", limit: Number(m[2]) };
}

// legacyStatus reads a terminal status from a ToolMessage's text, for rows
// without usable metadata (agent.legacyStatus): the one place the status
// is read from wording ("" when the text says nothing).
export function legacyStatus(content) {
	const c = str(content).trim();
	if (c.startsWith("Task Succeeded")) return "completed";
	if (c.startsWith("Task failed")) return "failed";
	if (c.startsWith("Task cancelled")) return "cancelled";
	if (c.startsWith("Task timed out")) return "timed_out";
	return "";
}

// PHRASES are how a ToolMessage's content starts per status, before its
// cap (agent.statusPhrase).
const PHRASES = {
	completed: "Task Succeeded",
	failed: "Task failed",
	cancelled: "Task cancelled by user",
	timed_out: "Task timed out",
	polling_timed_out: "Task polling timed out",
};

// statusPhrase is the head of a ToolMessage's content for a status and
// stop reason: "Task Succeeded (capped: token budget)".
export function statusPhrase(status, stopReason) {
	const capped = stopLabel(stopReason) !== "" && (status === "completed" || status === "failed") ? ` (${stopLabel(stopReason)})` : "";
	return (PHRASES[status] ?? PHRASES.polling_timed_out) + capped;
}

// textAfterPhrase is the full result (completed) or error in content:
// what follows the head the server writes for status, with or without a
// cap (agent.textAfterPhrase); "" when content has no such head.
export function textAfterPhrase(content, status) {
	const mark = status === "completed" ? ". Result: " : ". Error: ";
	for (const reason of ["", ...Object.keys(STOP_LABELS)]) {
		const head = statusPhrase(status, reason) + mark;
		if (content.startsWith(head)) return content.slice(head.length);
	}
	return "";
}
