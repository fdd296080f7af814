// How a card writes its figures and states (views/card_format.go;
// contracts/card_format_contract.json holds the examples both are tested
// against).

const TERMINAL_STATUSES = ["completed", "failed", "cancelled", "timed_out", "polling_timed_out"];

export const STOP_LABELS = {
	token_capped: "capped: token budget",
	turn_capped: "capped: turn budget",
	loop_capped: "capped: repeated tool-call loop",
	budget: "capped: budget used up",
};

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

// WAITING_TEXT is a running card's status while its model call waits for
// a slot of its model (views.WaitingText).
export const WAITING_TEXT = "Waiting for a slot";

// REFUSAL_PLACES names where each refusal reason's limit holds.
const REFUSAL_PLACES = { max_concurrent_per_response: "per response", max_total_per_run: "per run" };

// REFUSAL_REASONS are the values subagent_refusal.reason may take.
export const REFUSAL_REASONS = Object.keys(REFUSAL_PLACES);

// notStartedText is the status of a card whose task a limit refused before
// it started, from its refusal {reason, limit} (views.NotStartedText); ""
// for no refusal or an unknown reason.
export function notStartedText(refusal) {
	if (!refusal || !Object.hasOwn(REFUSAL_PLACES, refusal.reason)) return "";
	return `Not started · limit of ${refusal.limit} ${REFUSAL_PLACES[refusal.reason]}`;
}

// heldText is the status of a card the per-response limit refused while
// its run may still call it again (views.HeldText); "" for any other
// refusal.
export function heldText(refusal) {
	if (refusal?.reason !== "max_concurrent_per_response") return "";
	return `Waiting: at most ${refusal.limit} start per response`;
}

export function statusText(status, activity, waiting) {
	switch (status) {
		case "queued":
			return "Queued";
		case "running":
			if (waiting) return WAITING_TEXT;
			return activity || "Thinking";
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

// ---- activity words (agent.ActivityText) ----

const ACTIVITY_WIDTH = 60; // runes of a path or command in the status line

// head keeps a command's start, tail a path's end: the part that says
// which.
function head(s) {
	const r = [...s];
	return r.length <= ACTIVITY_WIDTH ? s : `${r.slice(0, ACTIVITY_WIDTH - 1).join("")}…`;
}

function tail(s) {
	const r = [...s];
	return r.length <= ACTIVITY_WIDTH ? s : `…${r.slice(r.length - ACTIVITY_WIDTH + 1).join("")}`;
}

function callArgs(args) {
	try {
		const a = JSON.parse(args);
		return a && typeof a === "object" ? a : {};
	} catch {
		return {};
	}
}

const text = (v) => (typeof v === "string" ? v : "");

// callText is one tool call in words; a call whose arguments cannot be
// read (cut at the step bound) names the kind of work without them.
function callText(call) {
	const a = callArgs(call.args);
	const path = text(a.path).trim();
	const verbs = { read_file: "Reading", write_file: "Writing", str_replace: "Editing" };
	if (Object.hasOwn(verbs, call.name)) return `${verbs[call.name]} ${path === "" ? "a file" : tail(path)}`;
	if (call.name === "ls") return ["", ".", "./"].includes(path) ? "Listing files" : `Listing ${tail(path)}`;
	if (call.name === "bash") {
		const cmd = text(a.command).trim().split("\n")[0];
		return cmd === "" ? "Running a command" : `Running \`${head(cmd)}\``;
	}
	return `Using ${toolLabel(call.name, call.title)}`;
}

// toolLabel is how people read a tool's name (agent.ToolLabel): its
// title when its MCP server gave one, else an MCP tool's
// mcp__files__list_directory as "files › list directory"; any other
// tool keeps its name.
export function toolLabel(name, title) {
	const t = text(title).trim();
	if (t !== "") return t;
	const mcp = /^mcp__(.+?)__(.+)$/.exec(text(name));
	if (mcp) return `${mcp[1]} › ${mcp[2].split("_").filter(Boolean).join(" ")}`;
	return text(name);
}

// activityText is a step (a task_running frame's step) in words: its
// first tool call and how many more, "Thinking" once its tool results are
// in, "Finishing" after an answer without calls, a resumed step's own
// words until the next step.
export function activityText(step) {
	if (step?.kind === "tool") return "Thinking";
	if (step?.kind === "resumed") return head(text(step.text).trim()) || "Resumed";
	const calls = Array.isArray(step?.tool_calls) ? step.tool_calls : [];
	if (calls.length === 0) return "Finishing";
	const first = callText({ name: text(calls[0]?.name), title: text(calls[0]?.title), args: text(calls[0]?.args) });
	return calls.length > 1 ? `${first} and ${calls.length - 1} more` : first;
}

// ---- times (views.Duration) ----

const pad = (n) => String(n).padStart(2, "0");

// duration writes a span of milliseconds: "<1s", "42s", "3m 05s",
// "1h 02m"; "" for no span.
export function duration(ms) {
	if (!Number.isFinite(ms) || ms < 0) return "";
	if (ms < 1000) return "<1s";
	const s = Math.floor(ms / 1000);
	if (s < 60) return `${s}s`;
	if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`;
	return `${Math.floor(s / 3600)}h ${pad(Math.floor(s / 60) % 60)}m`;
}

// ---- a resumed run's gap (agent.LostTime, agent.ResumedNotice) ----

// lostTime writes a gap: "4.2 s" (tenths, rounded half up) under a
// minute, then "1 min 5 s", then "2 h 3 min".
export function lostTime(ms) {
	const n = Number.isFinite(ms) ? Math.max(Math.trunc(ms), 0) : 0;
	const t = Math.floor((n + 50) / 100);
	if (t < 600) return `${Math.floor(t / 10)}.${t % 10} s`;
	const s = Math.floor((n + 500) / 1000);
	if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
	const m = Math.floor((s + 30) / 60);
	return `${Math.floor(m / 60)} h ${m % 60} min`;
}

// resumedNotice is what the thread shows where a run resumed, from its
// run.resumed frame's data.
export function resumedNotice(d) {
	const what = d?.cause === "failover" ? "Continued on another instance" : "Resumed after a restart";
	return `${what} — ${lostTime(d?.lost_ms)} lost`;
}

// fileSize follows views.FileSize: bytes below 1 KiB, else KB or MB in
// tenths rounded half up (1 KB = 1024 bytes), the unit chosen after
// rounding.
export function fileSize(n) {
	const kib = 1024;
	const mib = kib * kib;
	if (n < kib) return `${n} B`;
	const t = Math.floor((n * 10 + kib / 2) / kib);
	if (t < 10 * kib) return `${tenths(t)} KB`;
	return `${tenths(Math.floor((n * 10 + mib / 2) / mib))} MB`;
}

// fileURL is where the thread's files route serves a workspace path
// (views fileURL): each segment escaped, the slashes kept. threadID is
// already escaped.
export function fileURL(threadID, path) {
	return `/api/threads/${threadID}/files/${path.split("/").map(encodeURIComponent).join("/")}`;
}

// IMAGE_TYPES open in the browser rather than download (views isImage).
export const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
