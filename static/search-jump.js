// A search result's link, /threads/{id}#msg-{id} or #card-{run}-{task}
// (docs/API.md "Search"), opens its thread at that message: the page
// shows only its newest messages, so earlier pages are loaded (as the
// "Earlier messages" control does) until the message is there, then it
// is scrolled to the middle of the view and marked.

// maxPages bounds the pages loaded for one link.
const maxPages = 100;

export async function jumpToHash(list, older) {
	const id = decodeURIComponent(location.hash.slice(1));
	if (!/^(msg|card)-[\w-]+$/.test(id)) return;
	for (let pages = 0; !document.getElementById(id) && pages < maxPages; pages++) {
		const link = list.querySelector("#load-older a[data-before]");
		if (!link) break;
		await older.load(link);
	}
	const target = document.getElementById(id);
	if (!target) return;
	target.classList.add("search-target");
	target.scrollIntoView({ block: "center" });
	document.documentElement.dataset.searchJumped = id;
}
