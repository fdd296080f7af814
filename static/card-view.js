// A card's state written into the markup of views.Card (views/card.templ
// documents that DOM contract) and read back from it: server-rendered
// cards are adopted from the page, live ones are cloned from
// <template id="card-template">.

import { now } from "./clock.js";
import { clone, el, intAttr } from "./dom.js";
import { STOP_LABELS, duration, fileSize, fileURL, heldText, isTerminal, notStartedText, statusText, stopLabel, tokenLabel } from "./format.js";
import { isHeld } from "./merge.js";

// renderCard shows c in its node; view is {showTokens, labels, threadID},
// labels mapping model names to display names.
export function renderCard(c, view) {
	if (!c.node) return;
	const node = c.node;
	node.className = `card card-${c.status}`;
	// A continued card is its latest call's (agent.Card.TaskID): what
	// finds a card by its task (tool output, the Files panel) finds it.
	node.dataset.taskId = c.taskID;
	node.dataset.status = c.status;
	node.dataset.executionId = c.executionID;
	node.dataset.version = String(c.version);
	node.dataset.lastSeq = String(c.lastSeq);
	node.dataset.steps = String(c.steps);
	node.dataset.waiting = c.waiting ? "1" : "";
	node.dataset.totalTokens = view.showTokens && c.total !== null ? String(c.total) : "";
	node.dataset.queuedAt = instantAttr(c.queuedAt);
	node.dataset.startedAt = instantAttr(c.startedAt);
	node.dataset.endedAt = instantAttr(c.endedAt);
	renderHead(c, view);
	renderBody(c);
	renderFiles(c, view.threadID);
}

function renderHead(c, view) {
	const part = (selector) => c.node.querySelector(selector);
	part(".card-title").textContent = c.description.trim() === "" ? "Subagent task" : c.description;
	const notStarted = c.status === "failed" ? notStartedText(c.refusal) : "";
	c.node.dataset.notStarted = notStarted ? "1" : "";
	// The refusal as the page writes it (views/card.templ), so a card built
	// live reads back the same after a merge as after a reload.
	c.node.dataset.refusalReason = c.refusal?.reason ?? "";
	c.node.dataset.refusalLimit = c.refusal ? String(c.refusal.limit) : "";
	const held = isHeld(c) ? heldText(c.refusal) : "";
	part(".card-status").textContent = notStarted || held || statusText(c.status, c.activity, c.waiting);
	renderTime(c, now());
	const count = part(".card-files-count");
	count.textContent = filesCount(c.files.length);
	count.hidden = c.files.length === 0;
	const model = part(".card-model");
	model.textContent = view.labels.get(c.modelName) ?? c.modelName;
	model.title = c.modelName;
	model.hidden = c.modelName === "";
	let tokens = part(".card-tokens");
	if (view.showTokens) {
		if (!tokens) {
			tokens = el("span", "card-tokens");
			part(".card-badge").before(tokens);
		}
		tokens.textContent = tokenLabel(c.total, isTerminal(c.status));
	} else {
		tokens?.remove();
	}
	const badge = part(".card-badge");
	badge.textContent = stopLabel(c.stopReason);
	badge.hidden = c.stopReason === "";
	// A held card has nothing running to cancel: a later call runs it.
	part(".card-cancel").hidden = isTerminal(c.status) || held !== "";
}

// cardTime is a card's time (views.cardTime): its total once ended, the
// time so far at t while queued or running, "" before it was queued or
// started.
export function cardTime(c, t) {
	const from = c.startedAt ?? c.queuedAt;
	if (from === null) return "";
	if (c.endedAt !== null) return duration(c.endedAt - from);
	if (isTerminal(c.status)) return "";
	return duration(Math.max(t - from, 0));
}

// renderTime writes a card's time as of t (the page's clock ticks it).
export function renderTime(c, t) {
	const time = c.node?.querySelector(".card-time");
	if (time) time.textContent = cardTime(c, t);
}

function instantAttr(ms) {
	return ms === null ? "" : new Date(ms).toISOString();
}

function readInstant(s) {
	const t = s ? Date.parse(s) : NaN;
	return Number.isFinite(t) ? t : null;
}

function renderBody(c) {
	const part = (selector) => c.node.querySelector(selector);
	part(".card-meta").textContent = c.subagentType;
	part(".card-prompt").textContent = c.prompt;
	const error = part(".card-error");
	error.textContent = c.error;
	error.hidden = c.error === "";
	if (c.resultChanged) {
		c.resultChanged = false;
		const result = part(".card-result");
		// The one innerHTML of the cards: the server rendered and
		// sanitized the ToolMessage's result.
		if (c.resultHTML !== null) result.innerHTML = c.resultHTML;
		else result.textContent = c.result;
	}
}

// filesCount is views.FilesCount: "2 files", "" for none.
export function filesCount(n) {
	if (n === 0) return "";
	return n === 1 ? "1 file" : `${n} files`;
}

// renderFiles lists the files c's subagent wrote as views.Card does, each
// a link to the thread's files route, which the Files panel opens in
// place (static/files-panel.js; without it an image opens, anything else
// downloads: the route's Content-Disposition says which). The list is
// rebuilt only when it changed, so a focused link keeps its focus while
// the card's other parts move.
function renderFiles(c, threadID) {
	const list = c.node.querySelector(".card-files");
	const shown = [...list.querySelectorAll(".card-file")].map((li) => [li.dataset.path, intAttr(li.dataset.size)]);
	list.hidden = c.files.length === 0;
	if (JSON.stringify(shown) === JSON.stringify(c.files.map((f) => [f.path, f.size]))) return;
	list.replaceChildren(
		...c.files.map((f) => {
			const li = el("li", "card-file");
			li.dataset.path = f.path;
			li.dataset.size = String(f.size);
			const link = el("a", "", f.path);
			link.href = fileURL(threadID, f.path);
			link.dataset.filePath = f.path;
			link.target = "_blank";
			link.rel = "noopener";
			li.append("Wrote ", link, " · ", el("span", "card-file-size", fileSize(f.size)));
			return li;
		}),
	);
}

// cardNode clones a fresh card for c from the page's template.
export function cardNode(c) {
	const node = clone("card-template");
	const id = `card-${c.runID}-${c.taskID}`;
	node.id = id;
	node.dataset.runId = c.runID;
	node.dataset.taskId = c.taskID;
	node.querySelector(".card-toggle").setAttribute("aria-controls", `${id}-body`);
	node.querySelector(".card-body").id = `${id}-body`;
	return node;
}

// readCard reads a server-rendered card's state back from the attributes
// and texts views.Card wrote, and learns its model's display name.
export function readCard(c, node, labels) {
	const text = (selector) => node.querySelector(selector)?.textContent ?? "";
	c.node = node;
	c.status = node.dataset.status ?? "queued";
	c.executionID = node.dataset.executionId ?? "";
	c.version = intAttr(node.dataset.version);
	c.lastSeq = intAttr(node.dataset.lastSeq);
	c.steps = intAttr(node.dataset.steps);
	c.total = (node.dataset.totalTokens ?? "") === "" ? null : intAttr(node.dataset.totalTokens);
	c.description = text(".card-title");
	c.waiting = c.status === "running" && node.dataset.waiting === "1";
	c.activity = c.status === "running" ? (node.dataset.activity ?? "") : "";
	c.queuedAt = readInstant(node.dataset.queuedAt);
	c.startedAt = readInstant(node.dataset.startedAt);
	c.endedAt = readInstant(node.dataset.endedAt);
	const model = node.querySelector(".card-model");
	c.modelName = model?.title ?? "";
	if (c.modelName !== "") labels.set(c.modelName, model.textContent);
	c.stopReason = Object.keys(STOP_LABELS).find((r) => STOP_LABELS[r] === text(".card-badge")) ?? "";
	c.subagentType = text(".card-meta");
	c.prompt = text(".card-prompt");
	c.error = text(".card-error");
	c.files = [...node.querySelectorAll(".card-file")].map((li) => ({ path: li.dataset.path ?? "", size: intAttr(li.dataset.size) }));
	const reason = node.dataset.refusalReason ?? "";
	c.refusal = reason === "" ? null : { reason, limit: intAttr(node.dataset.refusalLimit) };
}
