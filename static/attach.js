// Files for the composer's next message: picked with Attach, dropped on
// the page or pasted. Each uploads at once, alone, to the thread's files
// route (docs/API.md "Files"), so each has its own progress bar and its
// own refusal (the route takes a request's files all or nothing); it
// shows as a chip in #composer-files until the message is sent or the
// chip removed. Removing the chip of a finished upload deletes its file
// from the workspace (DELETE on the files route): the user took it back.
// An upload never sent because the page was left stays in uploads/.

import { errorMessage } from "./api.js";
import { clone } from "./dom.js";
import { fileSize } from "./format.js";
import { keepPinned } from "./pinned.js";

export class Attachments {
	// threadID() is the thread to upload to (escaped), made on demand:
	// the new-thread page creates its thread on the first attach.
	// onChange is called whenever an upload starts or ends.
	constructor({ threadID, onChange }) {
		this.threadID = threadID;
		this.onChange = onChange;
		this.list = document.getElementById("composer-files");
		this.input = document.getElementById("attach-input");
		this.button = document.getElementById("attach-button");
		this.dropTarget = document.getElementById("drop-target");
		this.chips = new Set();
		this.dragDepth = 0;
	}

	listen(pasteInto) {
		this.button.addEventListener("click", () => this.input.click());
		this.input.addEventListener("change", () => {
			this.add([...this.input.files]);
			this.input.value = ""; // the same file may be picked again
		});
		// Paste: a screenshot or files copied in a file manager.
		pasteInto.addEventListener("paste", (ev) => {
			const files = [...(ev.clipboardData?.files ?? [])];
			if (files.length === 0) return;
			ev.preventDefault();
			this.add(files);
		});
		// Drop anywhere on the page: a target covers it while files are
		// dragged over (dragenter and dragleave come per element, hence
		// the depth).
		const carriesFiles = (ev) => [...(ev.dataTransfer?.types ?? [])].includes("Files");
		document.addEventListener("dragenter", (ev) => {
			if (!carriesFiles(ev) || this.button.disabled) return;
			ev.preventDefault();
			this.dragDepth++;
			this.dropTarget.hidden = false;
		});
		document.addEventListener("dragover", (ev) => {
			if (!carriesFiles(ev) || this.button.disabled) return;
			ev.preventDefault();
			ev.dataTransfer.dropEffect = "copy";
		});
		document.addEventListener("dragleave", (ev) => {
			if (!carriesFiles(ev)) return;
			this.dragDepth = Math.max(0, this.dragDepth - 1);
			if (this.dragDepth === 0) this.dropTarget.hidden = true;
		});
		document.addEventListener("drop", (ev) => {
			this.dragDepth = 0;
			this.dropTarget.hidden = true;
			if (!carriesFiles(ev) || this.button.disabled) return;
			ev.preventDefault();
			this.add([...ev.dataTransfer.files]);
		});
	}

	// setDisabled turns attaching off (offline, or the page is leaving).
	setDisabled(off) {
		this.button.disabled = off;
	}

	// uploading reports whether a file is still on its way.
	uploading() {
		return [...this.chips].some((c) => c.state === "uploading");
	}

	// paths are the workspace paths of the files uploaded, in order.
	paths() {
		return [...this.chips].filter((c) => c.state === "done").map((c) => c.path);
	}

	// clear removes every chip: the message that attached them is sent,
	// so their files stay.
	clear() {
		for (const c of [...this.chips]) this.remove(c);
	}

	// discard removes chip at the user's word, and its file with it once
	// uploaded. A failed delete leaves the file in uploads/, as before
	// there was one: the chip is gone either way.
	discard(chip) {
		this.remove(chip);
		if (chip.state !== "done" || !chip.path) return;
		const path = chip.path.split("/").map(encodeURIComponent).join("/");
		fetch(`/api/threads/${chip.threadID}/files/${path}`, {
			method: "DELETE",
			headers: { "X-CSRF-Token": document.querySelector('meta[name="csrf-token"]')?.content ?? "" },
		}).catch(() => {});
	}

	add(files) {
		for (const file of files) this.upload(file);
	}

	async upload(file) {
		const chip = { state: "uploading", path: "", threadID: "", node: clone("file-chip-template"), xhr: null };
		const node = chip.node;
		node.querySelector(".file-chip-name").textContent = file.name || "pasted file";
		node.querySelector(".file-chip-size").textContent = fileSize(file.size);
		const remove = node.querySelector(".file-chip-remove");
		remove.setAttribute("aria-label", `Remove ${file.name}`);
		remove.addEventListener("click", () => this.discard(chip));
		const bar = node.querySelector(".file-chip-progress");
		bar.setAttribute("aria-label", `Uploading ${file.name}`);
		this.chips.add(chip);
		keepPinned(() => {
			this.list.append(node);
			this.list.hidden = false;
		});
		this.onChange();
		let threadID;
		try {
			threadID = await this.threadID();
		} catch (err) {
			this.settle(chip, "error", err.message);
			return;
		}
		if (!this.chips.has(chip)) return; // removed meanwhile
		chip.threadID = threadID;
		const xhr = new XMLHttpRequest();
		chip.xhr = xhr;
		xhr.open("POST", `/api/threads/${threadID}/files`);
		xhr.setRequestHeader("X-CSRF-Token", document.querySelector('meta[name="csrf-token"]')?.content ?? "");
		xhr.upload.addEventListener("progress", (ev) => {
			if (ev.lengthComputable) bar.value = Math.floor((ev.loaded / ev.total) * 100);
		});
		xhr.addEventListener("load", async () => {
			if (xhr.status === 201) {
				try {
					chip.path = JSON.parse(xhr.responseText).files[0].path;
					bar.value = 100;
					this.settle(chip, "done", "");
				} catch {
					this.settle(chip, "error", "The server's answer was not understood.");
				}
				return;
			}
			this.settle(chip, "error", await errorMessage(new Response(xhr.responseText, { status: xhr.status })));
		});
		xhr.addEventListener("error", () => this.settle(chip, "error", "Could not reach the server. Remove the file and try again."));
		const body = new FormData();
		body.append("file", file, file.name || "pasted");
		xhr.send(body);
	}

	// settle ends chip's upload: done, or an error with the server's
	// message on the chip.
	settle(chip, state, message) {
		chip.state = state;
		chip.xhr = null;
		const node = chip.node;
		node.dataset.state = state;
		node.querySelector(".file-chip-progress").hidden = state !== "uploading";
		node.querySelector(".file-chip-error").textContent = message;
		if (state === "done") node.title = chip.path;
		this.onChange();
	}

	remove(chip) {
		chip.xhr?.abort();
		this.chips.delete(chip);
		// A keyboard user who removed a chip lands on Attach, not on the page's top.
		const focused = chip.node.contains(document.activeElement);
		keepPinned(() => {
			chip.node.remove();
			this.list.hidden = this.chips.size === 0;
		});
		if (focused) this.button.focus();
		this.onChange();
	}
}
