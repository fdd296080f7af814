// The thread's Files panel (views.filesPanel has its contract): the
// workspace as a tree loaded a folder at a time from the files API
// (docs/API.md "Files", ?depth=1), a file's preview as the server renders
// it (views.FilePreview), downloads, and live updates from workspace
// frames. Any a[data-file-path] on the page — a card's files, a path in an
// answer — opens the panel at that file; with a modifier key held, or
// without this script, the link is the file itself.

import { errorMessage } from "./api.js";
import { el } from "./dom.js";
import { fileSize, fileURL } from "./format.js";

// REFRESH_MS gathers a burst of workspace frames (a subagent writing
// many files) into one reload of each open folder.
const REFRESH_MS = 250;

const when = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

// parent is the folder a workspace path is in ("" for the root).
function parent(path) {
	const i = path.lastIndexOf("/");
	return i < 0 ? "" : path.slice(0, i);
}

// folderKey is a folder's path without a trailing slash, as parent()
// gives it, whatever form the API's folder paths take.
function folderKey(p) {
	return p.replace(/\/+$/, "");
}

function baseName(path) {
	return folderKey(path).split("/").pop();
}

function countLine(files, size) {
	return `${files === 1 ? "1 file" : `${files.toLocaleString()} files`} · ${fileSize(size)}`;
}

export class FilesPanel {
	// threadID is escaped.
	constructor({ threadID }) {
		this.threadID = threadID;
		this.button = document.getElementById("files-button");
		this.badge = document.getElementById("files-badge");
		this.panel = document.getElementById("files-panel");
		this.heading = document.getElementById("files-heading");
		this.summary = document.getElementById("files-summary");
		this.status = document.getElementById("files-status");
		this.empty = document.getElementById("files-empty");
		this.tree = document.getElementById("files-tree");
		this.preview = document.getElementById("file-preview");
		this.previewName = document.getElementById("file-preview-name");
		this.previewMeta = document.getElementById("file-preview-meta");
		this.previewBody = document.getElementById("file-preview-body");
		this.previewDownload = document.getElementById("file-preview-download");
		this.previewDelete = document.getElementById("file-preview-delete");
		// Folders listed so far, by folderKey ("" is the root): a reload of
		// the panel's contents reloads these and keeps them open.
		this.loaded = new Set();
		this.stale = true; // the tree does not hold what the workspace does
		this.previewing = null; // the path shown in the preview
		this.fresh = new Set(); // paths changed since the panel last showed them
		this.pending = new Set(); // folders to reload when the timer fires
		this.timer = 0;
		this.pendingPreview = false; // the file shown changed meanwhile
		this.asked = new Map(); // folder → the number of its latest load: an older answer is dropped
	}

	listen() {
		if (!this.panel) return;
		this.button.addEventListener("click", () => (this.isOpen() ? this.close() : this.open()));
		document.getElementById("files-close").addEventListener("click", () => this.close());
		document.getElementById("file-preview-back").addEventListener("click", () => this.showTree());
		this.previewDelete.addEventListener("click", () => this.deleteShown());
		this.panel.addEventListener("keydown", (ev) => {
			if (ev.key === "Escape") {
				ev.preventDefault();
				this.close();
			}
		});
		this.tree.addEventListener("click", (ev) => this.treeClick(ev));
		document.addEventListener("click", (ev) => {
			const a = ev.target.closest?.("a[data-file-path]");
			if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
			ev.preventDefault();
			this.openFile(a.dataset.filePath);
		});
		// The address keeps the panel's place: a reload opens it there, and
		// so does a link to #files or #files=path.
		this.follow(false);
		window.addEventListener("hashchange", () => this.follow(true));
	}

	follow(focus) {
		const m = /^#files(?:=(.*))?$/.exec(location.hash);
		if (!m) return;
		if (m[1] !== undefined) this.openFile(decodeURIComponent(m[1]), focus);
		else this.open(focus);
	}

	isOpen() {
		return !this.panel.hidden;
	}

	// open shows the panel at its tree, loading what it does not hold.
	open(focus = true) {
		this.show();
		this.showTree(focus);
		if (this.stale) this.reload();
	}

	show() {
		this.panel.hidden = false;
		document.body.classList.add("files-panel-open");
		this.button.setAttribute("aria-expanded", "true");
		this.badge.hidden = true;
	}

	close() {
		this.panel.hidden = true;
		document.body.classList.remove("files-panel-open");
		this.button.setAttribute("aria-expanded", "false");
		this.previewing = null;
		this.setHash("");
		this.button.focus();
	}

	setHash(hash) {
		history.replaceState(history.state, "", hash ? `#${hash}` : location.pathname + location.search);
	}

	showTree(focus = true) {
		this.previewing = null;
		this.preview.hidden = true;
		this.previewBody.replaceChildren();
		for (const node of [this.tree, this.summary]) node.hidden = false;
		this.setHash("files");
		if (focus) this.heading.focus();
	}

	// reload lists every folder the panel has open again, the root first.
	reload() {
		this.stale = false;
		return this.loadAll(this.loaded.size === 0 ? [""] : [...this.loaded]);
	}

	// loadAll lists folders a level at a time, parents first, so a folder
	// its parent no longer lists (its last file deleted) is dropped, not
	// asked for.
	async loadAll(folders) {
		const depth = (f) => (f === "" ? 0 : f.split("/").length);
		const levels = new Map();
		for (const f of folders) levels.set(depth(f), [...(levels.get(depth(f)) ?? []), f]);
		for (const d of [...levels.keys()].sort((a, b) => a - b)) await Promise.all(levels.get(d).map((f) => this.load(f)));
	}

	// load lists one folder (depth 1) into its place in the tree.
	async load(folder) {
		const ul = folder === "" ? this.tree : this.tree.querySelector(`li.files-folder[data-key="${CSS.escape(folder)}"] > ul`);
		if (!ul) {
			this.loaded.delete(folder);
			return;
		}
		const n = (this.asked.get(folder) ?? 0) + 1;
		this.asked.set(folder, n);
		if (folder === "") this.status.textContent = this.loaded.size === 0 ? "Loading files…" : "";
		const q = new URLSearchParams({ depth: "1" });
		if (folder !== "") q.set("prefix", folder);
		let body;
		try {
			const res = await fetch(`/api/threads/${this.threadID}/files?${q}`);
			if (res.status === 404 && folder !== "") {
				// The folder is gone: its parent's reload drops it.
				this.loaded.delete(folder);
				return;
			}
			if (!res.ok) throw new Error(await errorMessage(res));
			body = await res.json();
		} catch (err) {
			if (this.asked.get(folder) !== n) return;
			this.status.textContent = `The files could not be listed: ${err.message}`;
			this.stale = true;
			return;
		}
		if (this.asked.get(folder) !== n || !ul.isConnected) return;
		this.loaded.add(folder);
		if (folder === "") this.status.textContent = "";
		this.fill(ul, body);
		if (folder === "") this.showTotals(body);
	}

	// fill puts a folder's listing in ul, keeping the folders that are
	// open as they are (their own lists reload on their own).
	fill(ul, { files = [], folders = [], truncated = false }) {
		const open = new Map();
		for (const li of ul.querySelectorAll(":scope > li.files-folder")) {
			const sub = li.querySelector(":scope > ul");
			if (sub) open.set(li.dataset.key, li);
		}
		const items = [];
		for (const f of folders) {
			const key = folderKey(f.path);
			const li = open.get(key) ?? this.folderItem(key);
			this.folderMeta(li, f);
			open.delete(key);
			items.push(li);
		}
		for (const f of files) items.push(this.fileItem(f));
		// Each change flashes once: where it now shows, it is no longer new
		// (a closed folder shows its files' changes; an open one, its own).
		for (const li of items) {
			const key = li.dataset.key;
			if (key === undefined) this.fresh.delete(li.dataset.path);
			else if (!this.loaded.has(key)) for (const p of [...this.fresh]) if (p.startsWith(`${key}/`)) this.fresh.delete(p);
		}
		if (truncated) items.push(el("li", "files-more muted", "More files than can be listed here: download the folder to see them all."));
		ul.replaceChildren(...items);
		// Folders no longer listed close with their subfolders.
		for (const key of open.keys()) {
			for (const k of [...this.loaded]) if (k === key || k.startsWith(`${key}/`)) this.loaded.delete(k);
		}
	}

	showTotals({ files = [], folders = [] }) {
		let n = files.length;
		let size = 0;
		for (const f of files) size += f.size;
		for (const f of folders) {
			n += f.files;
			size += f.size;
		}
		this.summary.textContent = n === 0 ? "" : countLine(n, size);
		this.empty.hidden = n !== 0;
	}

	folderItem(key) {
		const li = el("li", "files-folder");
		li.dataset.key = key;
		li.dataset.path = key;
		const toggle = el("button", "files-toggle button-quiet");
		toggle.type = "button";
		toggle.setAttribute("aria-expanded", "false");
		toggle.append(el("span", "files-name", `${baseName(key)}/`));
		const meta = el("span", "files-meta muted");
		const zip = el("a", "files-zip-folder", "zip");
		zip.href = `/api/threads/${this.threadID}/files.zip?${new URLSearchParams({ prefix: key })}`;
		zip.download = "";
		zip.setAttribute("aria-label", `Download ${key} as a zip`);
		li.append(toggle, meta, zip);
		return li;
	}

	folderMeta(li, f) {
		li.querySelector(":scope > .files-meta").textContent = countLine(f.files, f.size);
		if (this.freshUnder(li.dataset.key)) li.classList.add("files-fresh");
	}

	freshUnder(key) {
		for (const p of this.fresh) if (p.startsWith(`${key}/`)) return true;
		return false;
	}

	fileItem(f) {
		const li = el("li", "files-file");
		li.dataset.path = f.path;
		li.dataset.size = String(f.size);
		if (f.task_id) li.dataset.taskId = f.task_id;
		const open = el("button", "files-open button-quiet");
		open.type = "button";
		open.append(el("span", "files-name", baseName(f.path)));
		const meta = el("span", "files-meta muted");
		meta.append(fileSize(f.size));
		if (f.modified) {
			const t = el("time", "", when.format(new Date(f.modified)));
			t.dateTime = f.modified;
			meta.append(" · ", t);
		}
		const by = this.writer(f.task_id);
		if (by) meta.append(" · by ", by);
		const down = el("a", "files-download", "↓");
		down.href = fileURL(this.threadID, f.path);
		down.download = "";
		down.setAttribute("aria-label", `Download ${f.path}`);
		li.append(open, meta, down);
		if (this.fresh.has(f.path)) li.classList.add("files-fresh");
		return li;
	}

	// writer links to the card of the task that last wrote a file, when
	// its card is on the page.
	writer(taskID) {
		if (!taskID) return null;
		const card = document.querySelector(`section.card[data-task-id="${CSS.escape(taskID)}"]`);
		if (!card) return el("span", "", "a subagent");
		const a = el("a", "files-writer", card.querySelector(".card-title")?.textContent ?? "a subagent");
		a.href = `#${card.id}`;
		a.addEventListener("click", (ev) => {
			ev.preventDefault();
			if (window.matchMedia("(max-width: 47.99rem)").matches) this.close();
			card.scrollIntoView({ block: "center" });
			card.querySelector(".card-toggle")?.focus();
		});
		return a;
	}

	treeClick(ev) {
		const toggle = ev.target.closest("button.files-toggle");
		if (toggle) {
			this.toggleFolder(toggle.closest("li.files-folder"));
			return;
		}
		const open = ev.target.closest("button.files-open");
		if (open) this.openFile(open.closest("li.files-file").dataset.path);
	}

	toggleFolder(li) {
		const toggle = li.querySelector(":scope > button");
		const key = li.dataset.key;
		const sub = li.querySelector(":scope > ul");
		if (sub) {
			sub.remove();
			toggle.setAttribute("aria-expanded", "false");
			for (const k of [...this.loaded]) if (k === key || k.startsWith(`${key}/`)) this.loaded.delete(k);
			return;
		}
		const ul = el("ul", "files-sub");
		li.append(ul);
		toggle.setAttribute("aria-expanded", "true");
		this.load(key);
	}

	// openFile shows one file's preview, opening the panel if need be.
	async openFile(path, focus = true) {
		this.show();
		if (this.stale) this.reload();
		this.previewing = path;
		this.setHash(`files=${encodeURIComponent(path)}`);
		this.tree.hidden = true;
		this.empty.hidden = true;
		this.summary.hidden = true;
		this.preview.hidden = false;
		this.previewName.textContent = path;
		this.previewMeta.textContent = "";
		this.previewDownload.href = fileURL(this.threadID, path);
		this.previewDelete.hidden = false;
		this.previewBody.replaceChildren(el("p", "muted", "Loading…"));
		if (focus) this.previewName.focus();
		await this.loadPreview(path);
	}

	async loadPreview(path) {
		let html;
		try {
			const res = await fetch(`/threads/${this.threadID}/preview/${path.split("/").map(encodeURIComponent).join("/")}`);
			if (res.status === 404) {
				if (this.previewing !== path) return;
				this.previewMeta.textContent = "";
				this.previewDelete.hidden = true;
				this.previewDownload.removeAttribute("href");
				this.previewBody.replaceChildren(el("p", "files-gone", "This file is no longer in the workspace."));
				return;
			}
			if (!res.ok) throw new Error(await errorMessage(res));
			html = await res.text();
		} catch (err) {
			if (this.previewing === path) this.previewBody.replaceChildren(el("p", "files-error", `No preview: ${err.message}`));
			return;
		}
		if (this.previewing !== path) return;
		// The server renders the preview (escaped text, sanitized Markdown,
		// highlighted code): it is herd's own markup, as older.js takes it.
		this.previewBody.innerHTML = html;
		const root = this.previewBody.querySelector(".file-preview");
		if (root) {
			const size = Number.parseInt(root.dataset.size ?? "", 10);
			this.previewMeta.textContent = Number.isNaN(size) ? "" : fileSize(size);
		}
		this.fresh.delete(path);
	}

	async deleteShown() {
		const path = this.previewing;
		if (path === null || !window.confirm(`Delete ${path}? This cannot be undone.`)) return;
		this.previewDelete.disabled = true;
		try {
			const res = await fetch(fileURL(this.threadID, path), {
				method: "DELETE",
				headers: { "X-CSRF-Token": document.querySelector('meta[name="csrf-token"]')?.content ?? "" },
			});
			if (!res.ok && res.status !== 404) throw new Error(await errorMessage(res));
		} catch (err) {
			this.previewBody.prepend(el("p", "files-error", `Not deleted: ${err.message}`));
			return;
		} finally {
			this.previewDelete.disabled = false;
		}
		this.stale = true;
		this.open();
	}

	// workspace takes a workspace frame: the folders it touched reload if
	// the panel is open (once for a burst), or the button says there is
	// something new.
	workspace(d) {
		const changes = Array.isArray(d.changes) ? d.changes : [];
		if (changes.length === 0 || !this.panel) return;
		for (const c of changes) {
			if (typeof c.path !== "string") continue;
			if (c.deleted) this.fresh.delete(c.path);
			else this.fresh.add(c.path);
			// Every open folder on the way to it: their counts change too.
			for (let f = parent(c.path); ; f = parent(f)) {
				if (this.loaded.has(f)) this.pending.add(f);
				if (f === "") break;
			}
			if (c.path === this.previewing) this.pendingPreview = true;
		}
		if (!this.isOpen()) {
			this.stale = true;
			this.badge.hidden = false;
			this.pending.clear();
			return;
		}
		if (this.timer === 0) this.timer = setTimeout(() => this.flush(), REFRESH_MS);
	}

	flush() {
		this.timer = 0;
		const folders = [...this.pending];
		this.pending.clear();
		this.loadAll(folders);
		if (this.pendingPreview && this.previewing !== null) this.loadPreview(this.previewing);
		this.pendingPreview = false;
	}
}
