// Workspace paths in the lead's answers become links (docs/DESIGN.md §10,
// Rendering). Contract:
// - reads the AI message bodies, `.msg-ai .msg-body`, of the message list
//   it is given; inside them it leaves `a`, `pre` and what it linked alone;
// - wraps each path the thread's workspace holds in
//   `<a class="file-link" data-file-path="P" href="…/files/P">` (format.js
//   fileURL): an inline `code` whose whole text is the path, or a word of
//   plain text that looks like a relative path;
// - handles no click: whoever shows files intercepts `a[data-file-path]`;
//   without it the href opens or downloads the file;
// - learns the thread's files from `GET /api/threads/{id}/files`, once and
//   only when an answer names a candidate path, then from `workspace`
//   frames (agent.WorkspaceChanged), so a file written later links the
//   answers that already named it, and a deleted one unlinks.

import { getJSON } from "./api.js";
import { el } from "./dom.js";
import { fileURL } from "./format.js";

const BODIES = ".msg-ai .msg-body";
const LEADING = /^[("'“‘[{<]+/u;
const TRAILING = /[)"'”’\]}>.,;:!?…]+$/u;
const EXTENSION = /\.[A-Za-z0-9]*[A-Za-z][A-Za-z0-9]*$/;
const ABBREVIATION = /^([A-Za-z]\.)+[A-Za-z]$/; // "e.g." less its last dot

// candidatePath is the workspace path a word or code span may name, or ""
// when it cannot be one: relative, with a slash or a dot-extension, no
// space (a code span's whole text may have some), no "." or ".." segment.
export function candidatePath(text, spaces = false) {
	const p = text.startsWith("./") ? text.slice(2) : text;
	if (p === "" || p.length > 1024 || /[\n\t]/.test(p) || (!spaces && p.includes(" "))) return "";
	if (p.startsWith("/") || p.endsWith("/") || p.includes("://") || p.includes("\\")) return "";
	if (!p.includes("/") && (!EXTENSION.test(p) || ABBREVIATION.test(p))) return "";
	if (p.split("/").some((s) => s === "" || s === "." || s === "..")) return "";
	return p;
}

// FileIndex is the set of the thread's workspace paths: listed once,
// lazily (load), then kept by workspace frames (apply). A frame that
// comes while the list is on its way wins over what the list says.
export class FileIndex {
	// threadID is already escaped; onAdded gets the paths it learns and
	// onRemoved those it forgets.
	constructor(threadID, { onAdded = () => {}, onRemoved = () => {} } = {}) {
		this.threadID = threadID;
		this.paths = new Set();
		this.loaded = false;
		this.loading = null;
		this.since = new Map(); // path → exists, from frames before the list came
		this.onAdded = onAdded;
		this.onRemoved = onRemoved;
	}

	has(path) {
		return this.paths.has(path);
	}

	// load fetches the list, once; a failure leaves the index empty, so
	// nothing links (the paths stay text).
	load() {
		this.loading ??= getJSON(`/api/threads/${this.threadID}/files`)
			.then((res) => {
				for (const f of Array.isArray(res?.files) ? res.files : []) {
					if (typeof f?.path === "string" && this.since.get(f.path) !== false) this.paths.add(f.path);
				}
				this.loaded = true;
				this.since.clear();
				this.onAdded([...this.paths]);
			})
			.catch(() => {});
		return this.loading;
	}

	// apply takes a workspace frame's changes: a file written is added, a
	// deleted one removed.
	apply(d) {
		const added = [];
		const removed = [];
		for (const ch of Array.isArray(d?.changes) ? d.changes : []) {
			if (typeof ch?.path !== "string" || ch.path === "") continue;
			const exists = ch.deleted !== true;
			if (!this.loaded) this.since.set(ch.path, exists);
			if (exists && !this.paths.has(ch.path)) added.push(ch.path);
			if (!exists && this.paths.has(ch.path)) removed.push(ch.path);
			if (exists) this.paths.add(ch.path);
			else this.paths.delete(ch.path);
		}
		if (added.length > 0) this.onAdded(added);
		if (removed.length > 0) this.onRemoved(removed);
	}
}

// linkPaths links, in root, every candidate path the index holds and
// returns the candidates it could not link (yet). A root with candidates
// starts the index's list; one with none fetches nothing.
export function linkPaths(root, index, threadID) {
	const unlinked = new Set();
	const consider = (text, spaces) => {
		const p = candidatePath(text, spaces);
		if (p === "") return "";
		if (index.has(p)) return p;
		unlinked.add(p);
		return "";
	};
	for (const code of root.querySelectorAll("code")) {
		if (code.closest("a, pre")) continue;
		const p = consider(code.textContent.trim(), true);
		if (p === "") continue;
		const a = fileLink(threadID, p);
		code.replaceWith(a);
		a.append(code);
	}
	for (const node of textNodes(root)) linkText(node, consider, threadID);
	if (unlinked.size > 0 && !index.loaded) index.load();
	return unlinked;
}

// textNodes lists root's text outside links, preformatted blocks and code
// (a code span links whole or not at all).
function textNodes(root) {
	const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
		acceptNode: (n) => (n.parentElement.closest("a, pre, code") ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
	});
	const out = [];
	while (walker.nextNode()) out.push(walker.currentNode);
	return out;
}

// linkText splits a text node around the words that name a known path.
function linkText(node, consider, threadID) {
	const text = node.data;
	const parts = [];
	let last = 0;
	for (const m of text.matchAll(/\S+/g)) {
		const lead = m[0].match(LEADING)?.[0].length ?? 0;
		const word = m[0].slice(lead).replace(TRAILING, "");
		const p = consider(word, false);
		if (p === "") continue;
		const start = m.index + lead;
		if (start > last) parts.push(document.createTextNode(text.slice(last, start)));
		const a = fileLink(threadID, p);
		a.append(word);
		parts.push(a);
		last = start + word.length;
	}
	if (parts.length === 0) return;
	if (last < text.length) parts.push(document.createTextNode(text.slice(last)));
	node.replaceWith(...parts);
}

function fileLink(threadID, path) {
	const a = el("a", "file-link");
	a.dataset.filePath = path;
	a.href = fileURL(threadID, path);
	return a;
}

// unlink puts a link's content back in its place.
function unlink(a) {
	a.replaceWith(...a.childNodes);
}

// FileLinks links the answers of one thread page: every answer on the
// page (scan), each new one as it is saved, and again the answers that
// name a path the index learns later.
export class FileLinks {
	constructor({ threadID, list }) {
		this.threadID = threadID;
		this.list = list;
		this.pending = new Map(); // body → its unlinked candidates
		this.index = new FileIndex(threadID, {
			onAdded: (paths) => this.rescan(paths),
			onRemoved: (paths) => this.forget(paths),
		});
	}

	// scan links the answers in node (the list, an older page's node or a
	// saved message).
	scan(node) {
		const bodies = node.matches?.(BODIES) ? [node] : node.querySelectorAll(BODIES);
		for (const body of bodies) {
			const unlinked = linkPaths(body, this.index, this.threadID);
			if (unlinked.size > 0) this.pending.set(body, unlinked);
			else this.pending.delete(body);
		}
	}

	// workspace applies a workspace frame.
	workspace(d) {
		this.index.apply(d);
	}

	// rescan links again only the answers that name one of paths.
	rescan(paths) {
		for (const [body, unlinked] of this.pending) {
			if (!body.isConnected) this.pending.delete(body);
			else if (paths.some((p) => unlinked.has(p))) this.scan(body);
		}
	}

	// forget unlinks a deleted file's links; their answers wait for it.
	forget(paths) {
		for (const p of paths) {
			for (const a of this.list.querySelectorAll(`a.file-link[data-file-path="${CSS.escape(p)}"]`)) {
				const body = a.closest(BODIES);
				unlink(a);
				body?.normalize();
				if (body) this.pending.set(body, new Set([...(this.pending.get(body) ?? []), p]));
			}
		}
	}
}
