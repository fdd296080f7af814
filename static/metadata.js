// Reading what the server sent, tolerantly (agent/contract.go): usage
// snapshots, a task ToolMessage's metadata and its text.

import { isTerminal, stopLabel } from "./format.js";

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
export function afterMarker(content, prefix, marker) {
	const i = content.indexOf(marker);
	return content.startsWith(prefix) && i >= 0 ? content.slice(i + marker.length) : "";
}
