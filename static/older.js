// Earlier messages, on demand: the thread page shows its newest page of
// messages, and #load-older (views.Thread) loads the page before the
// oldest one shown. The server renders that page with the components and
// cards of the page itself (views.OlderMessages), bringing its own
// #load-older while older pages remain, and it takes the control's place.
// The reader's view stays on what they were reading. Older messages never
// touch the stream's seq cursor: every one of them is below the seq the
// page started from.

import { errorMessage } from "./api.js";

export class OlderMessages {
	// onLoaded gets the nodes of each page put in place.
	constructor({ threadID, list, onLoaded, showError }) {
		this.threadID = threadID;
		this.list = list;
		this.onLoaded = onLoaded;
		this.showError = showError;
		this.loading = false;
	}

	listen() {
		this.list.addEventListener("click", (ev) => {
			const link = ev.target.closest?.("#load-older a[data-before]");
			if (!link) return;
			ev.preventDefault();
			this.load(link);
		});
	}

	async load(link) {
		if (this.loading) return;
		this.loading = true;
		link.setAttribute("aria-disabled", "true");
		try {
			const res = await fetch(`/threads/${this.threadID}/messages?before=${encodeURIComponent(link.dataset.before)}`);
			// A session that ended answers with the sign-in page: never
			// put that among the messages.
			if (res.redirected) throw new Error("you are signed out; reload the page");
			if (!res.ok) throw new Error(await errorMessage(res));
			const page = document.createElement("template");
			// The server rendered this markup and sanitized its Markdown,
			// as for the page itself.
			page.innerHTML = await res.text();
			const nodes = [...page.content.children];
			this.keepView(() => link.closest("#load-older").replaceWith(page.content));
			this.onLoaded(nodes);
		} catch (err) {
			link.removeAttribute("aria-disabled");
			this.showError(`Could not load earlier messages: ${err.message}`);
		} finally {
			this.loading = false;
		}
	}

	// keepView makes a change above the reader's view without moving what
	// they see: the distance to the bottom of the page stays the same.
	keepView(change) {
		const doc = document.documentElement;
		const fromBottom = doc.scrollHeight - doc.scrollTop;
		change();
		window.scrollTo(0, doc.scrollHeight - fromBottom);
	}
}
