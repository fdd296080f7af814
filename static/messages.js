// Live chat messages, cloned from the <template>s of views/thread.templ,
// which the Message component renders: a message built live is the same
// markup as one rendered with the page.

import { clone } from "./dom.js";
import { IMAGE_TYPES, fileSize, fileURL, toolLabel } from "./format.js";

function argsText(args) {
	if (typeof args === "string") return args;
	return JSON.stringify(args ?? {});
}

// messageElement is a human or AI message; its template holds every
// optional part, and the parts m does not have are removed. labels maps
// model names to display names (the meta line shows the display name);
// threadID (escaped) is where attachment chips link.
export function messageElement(m, labels, threadID) {
	const node = clone("message-template");
	node.className = m.type === "human" ? "msg msg-human" : "msg msg-ai";
	node.id = `msg-${m.id}`;
	node.dataset.seq = String(m.seq);
	node.dataset.runId = m.run_id ?? "";
	const body = node.querySelector(".msg-body");
	// The one innerHTML: the server rendered and sanitized this field.
	if (m.html) body.innerHTML = m.html;
	else {
		body.remove();
		node.querySelector(".msg-actions").remove();
	}
	fillAttachments(node.querySelector(".msg-attachments"), m.type === "human" ? m.additional_kwargs?.attachments : null, threadID);
	if (m.additional_kwargs?.stopped !== true) node.querySelector(".msg-note:not(.msg-context, .msg-incomplete)").remove();
	if (m.additional_kwargs?.incomplete !== true) node.querySelector(".msg-incomplete").remove();
	// A human message can be edited and sent again (static/answers.js).
	const edit = node.querySelector(".msg-edit");
	if (m.type === "human" && edit) edit.dataset.source = m.content ?? "";
	else edit?.remove();
	fillContextNote(node.querySelector(".msg-context"), m.additional_kwargs?.context_trimmed);
	// Reasoning is text in its own collapsed block, never part of the body.
	const reasoning = m.additional_kwargs?.reasoning_content;
	if (typeof reasoning === "string" && reasoning !== "") node.querySelector(".thinking-text").textContent = reasoning;
	else node.querySelector(".msg-thinking").remove();
	fillToolCalls(node.querySelector(".msg-tools"), m.tool_calls ?? []);
	const meta = node.querySelector(".msg-meta");
	if (m.model_name && m.html) {
		meta.textContent = labels?.get(m.model_name) ?? m.model_name;
		meta.title = m.model_name;
	} else meta.remove();
	return node;
}

// fillAttachments gives each attached file a copy of the template's chip
// (views attachments), or removes the list.
function fillAttachments(list, atts, threadID) {
	if (!Array.isArray(atts) || atts.length === 0) {
		list.remove();
		return;
	}
	const chip = list.querySelector("li");
	list.replaceChildren(
		...atts.map((a) => {
			const item = chip.cloneNode(true);
			const link = item.querySelector("a");
			link.href = fileURL(threadID, a.path);
			link.dataset.path = a.path;
			link.title = a.path;
			if (IMAGE_TYPES.includes(a.type)) {
				link.target = "_blank";
				link.rel = "noopener";
			} else {
				link.removeAttribute("target");
				link.removeAttribute("rel");
			}
			link.querySelector(".file-chip-name").textContent = a.path.slice(a.path.lastIndexOf("/") + 1);
			link.querySelector(".file-chip-size").textContent = fileSize(a.size);
			return item;
		}),
	);
}

// fillContextNote fills the figures of the note that older turns were
// left out of the answer's requests (context_trimmed), or removes it.
function fillContextNote(note, trimmed) {
	if (!Number.isInteger(trimmed?.sent) || !Number.isInteger(trimmed?.total)) {
		note.remove();
		return;
	}
	note.querySelector(".context-sent").textContent = String(trimmed.sent);
	note.querySelector(".context-total").textContent = String(trimmed.total);
}

// fillToolCalls gives each call a copy of the template's matching part: a
// task slot for the card, or a collapsible call of any other tool.
function fillToolCalls(tools, calls) {
	if (calls.length === 0) {
		tools.remove();
		return;
	}
	const slot = tools.querySelector(".task-slot");
	const details = tools.querySelector(".tool-call");
	tools.replaceChildren(
		...calls.map((call) => {
			if (call.name === "task") {
				const node = slot.cloneNode(true);
				node.dataset.taskId = call.id;
				return node;
			}
			const node = details.cloneNode(true);
			node.dataset.toolCallId = call.id;
			const name = node.querySelector(".tool-name");
			name.textContent = toolLabel(call.name);
			if (name.textContent !== call.name) name.title = call.name;
			node.querySelector(".tool-brief").textContent = argsText(call.args);
			node.querySelector(".tool-args").textContent = argsText(call.args);
			return node;
		}),
	);
}

// toolResultElement is a tool's output, shown inside its call.
export function toolResultElement(m) {
	const node = clone("tool-result-template");
	node.id = `msg-${m.id}`;
	node.dataset.seq = String(m.seq);
	node.querySelector(".tool-output").textContent = m.content ?? "";
	return node;
}

// streamElement is the bubble of an answer still being written; the saved
// message replaces it.
export function streamElement(messageID) {
	const node = clone("stream-template");
	node.id = `stream-${messageID}`;
	return node;
}
