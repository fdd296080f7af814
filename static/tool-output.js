// What a tool call shows beside its text (agent.ToolOutput, docs/API.md):
// the images it returned and its last log lines, under the lead's call
// and in a subagent's expanded card; and, while a call runs, its progress
// and new log lines (tool_progress, tool_log, task_progress frames).
//
//	div.tool-extra
//	  div.tool-images        a.tool-image-link > img.tool-image, one per kept image;
//	                         p.tool-image-omitted for one left out, with why
//	  details.tool-log       summary "Log · N lines"
//	    ol.tool-log-lines    li.log-line[data-level] > span.log-level, span.log-text
//	    p.tool-log-dropped   how many earlier lines were not kept
//
// Everything from a tool is text (textContent), never markup; images are
// served by the server from its own route, as the thread's owner.

import { el } from "./dom.js";

// MAX_LIVE_LINES bounds the log lines a running call shows, as the
// server keeps a call's last 50.
const MAX_LIVE_LINES = 50;

let thread = null;

// threadID is the page's thread, for image addresses.
function threadID() {
	if (thread === null) {
		try {
			thread = JSON.parse(document.getElementById("herd-state")?.textContent ?? "{}").thread_id ?? "";
		} catch {
			thread = "";
		}
	}
	return thread;
}

const IMAGE_ID = /^[0-9a-f]{64}\.(png|jpg|gif|webp)$/;

function sizeText(n) {
	if (!Number.isFinite(n) || n < 0) return "";
	if (n < 1024) return `${n} B`;
	if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
	return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

function imageElement(img) {
	const mime = typeof img?.mime_type === "string" ? img.mime_type : "";
	const id = typeof img?.id === "string" ? img.id : "";
	if (!IMAGE_ID.test(id)) {
		const why = typeof img?.omitted === "string" && img.omitted !== "" ? img.omitted : "not kept";
		return el("p", "tool-image-omitted", `Image not shown (${mime || "unknown type"}): ${why}`);
	}
	const url = `/api/threads/${encodeURIComponent(threadID())}/tool-images/${id}`;
	const link = el("a", "tool-image-link");
	link.href = url;
	link.target = "_blank";
	link.rel = "noopener";
	const image = el("img", "tool-image");
	image.src = url;
	image.loading = "lazy";
	image.alt = `Image from the tool (${mime}, ${sizeText(img.bytes)})`;
	link.append(image);
	return link;
}

function lineElement(line) {
	const level = typeof line?.level === "string" && line.level !== "" ? line.level : "info";
	const li = el("li", "log-line");
	li.dataset.level = level;
	li.append(el("span", "log-level", level), el("span", "log-text", typeof line?.text === "string" ? line.text : ""));
	return li;
}

function logElement(lines, dropped) {
	const block = el("details", "tool-log");
	const summary = el("summary", "tool-log-summary");
	block.append(summary, el("ol", "tool-log-lines"));
	addLines(block, lines);
	if (dropped > 0) block.append(el("p", "tool-log-dropped", `${dropped} earlier ${dropped === 1 ? "line" : "lines"} not kept`));
	return block;
}

function addLines(block, lines) {
	const list = block.querySelector(".tool-log-lines");
	list.append(...lines.map(lineElement));
	while (list.children.length > MAX_LIVE_LINES) list.firstElementChild.remove();
	const n = list.children.length;
	block.querySelector(".tool-log-summary").textContent = `Log · ${n} ${n === 1 ? "line" : "lines"}`;
}

// toolOutputElement is a call's kept output, or null when it has none.
export function toolOutputElement(output) {
	const images = Array.isArray(output?.images) ? output.images : [];
	const logs = Array.isArray(output?.logs) ? output.logs : [];
	const dropped = Number.isInteger(output?.logs_dropped) ? output.logs_dropped : 0;
	if (images.length === 0 && logs.length === 0) return null;
	const box = el("div", "tool-extra");
	if (images.length > 0) {
		const row = el("div", "tool-images");
		row.append(...images.map(imageElement));
		box.append(row);
	}
	if (logs.length > 0) box.append(logElement(logs, dropped));
	return box;
}

// showToolOutput adds a tool result's kept output below its text: the
// lead's ToolMessage (additional_kwargs.tool_output), live or rendered
// with the page (its data-tool-output).
export function showToolOutput(result, output) {
	if (!result || result.querySelector(":scope > .tool-extra")) return;
	let out = output;
	if (out === undefined && result.dataset.toolOutput) {
		try {
			out = JSON.parse(result.dataset.toolOutput);
		} catch {
			out = null;
		}
	}
	const box = toolOutputElement(out);
	if (box) result.append(box);
}

// showToolOutputsIn shows the kept output of every tool result in root.
export function showToolOutputsIn(root) {
	const results = root.matches?.(".tool-result[data-tool-output]") ? [root] : [];
	results.push(...root.querySelectorAll(".tool-result[data-tool-output]"));
	for (const r of results) showToolOutput(r);
}

function leadCall(list, callID) {
	const calls = list.querySelectorAll(`.tool-call[data-tool-call-id="${CSS.escape(callID)}"]`);
	const call = calls[calls.length - 1];
	// A call that has its result is done; a late frame changes nothing.
	return call && !call.querySelector(".tool-result") ? call : null;
}

// toolProgress shows the progress of the lead's running call next to its
// name (tool_progress), until its result arrives.
export function toolProgress(list, d) {
	const call = leadCall(list, String(d.tool_call_id ?? ""));
	if (!call) return;
	const summary = call.querySelector("summary");
	let line = summary.querySelector(".tool-progress");
	if (!line) {
		line = el("span", "tool-progress");
		line.setAttribute("role", "status");
		summary.append(line);
	}
	line.textContent = String(d.text ?? "");
}

// liveBox is the block of a running call's log lines: under the lead's
// call, or in the body of the subagent's card.
function liveBox(list, d) {
	const callID = String(d.tool_call_id ?? "");
	const taskID = String(d.task_id ?? "");
	let host;
	if (taskID === "") host = leadCall(list, callID);
	else {
		const cards = list.querySelectorAll(`.card[data-task-id="${CSS.escape(taskID)}"]`);
		const card = cards[cards.length - 1];
		if (!card || card.dataset.status !== "running") return null;
		host = card.querySelector(".card-body");
	}
	if (!host) return null;
	let box = host.querySelector(`:scope > .tool-live[data-call="${CSS.escape(callID)}"]`);
	if (!box) {
		box = el("div", "tool-extra tool-live");
		box.dataset.call = callID;
		const block = logElement([], 0);
		block.open = true;
		box.append(block);
		const note = host.querySelector(":scope > .card-steps-note");
		if (note) note.before(box);
		else host.append(box);
	}
	return box;
}

// toolLog adds a running call's new log lines (tool_log), live.
export function toolLog(list, d) {
	const lines = Array.isArray(d.lines) ? d.lines : [];
	if (lines.length === 0) return;
	const box = liveBox(list, d);
	if (box) addLines(box.querySelector(".tool-log"), lines);
}

// endLive removes what a finished call showed live under node (a lead's
// call with its result, or a card whose tool steps arrived): its kept
// output replaces it.
export function endLive(node) {
	for (const live of node?.querySelectorAll(".tool-live, .tool-progress") ?? []) live.remove();
}

// endCardLive removes the live log lines of task taskID's card: its tool
// steps arrived, and carry their kept output.
export function endCardLive(list, taskID) {
	for (const card of list.querySelectorAll(`.card[data-task-id="${CSS.escape(String(taskID ?? ""))}"]`)) endLive(card);
}
