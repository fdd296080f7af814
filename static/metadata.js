// Reading what the server sent, tolerantly (agent/contract.go): usage
// snapshots, a task ToolMessage's metadata and its text.

import { REFUSAL_REASONS, isTerminal, stopLabel } from "./format.js";

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
export function afterMarker(content, prefix, marker) {
	const i = content.indexOf(marker);
	return content.startsWith(prefix) && i >= 0 ? content.slice(i + marker.length) : "";
}
