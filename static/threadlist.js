// Thread lists (the sidebar and the thread list page): grouped by day in
// the reader's time zone, filtered as you type, and the sidebar's drawer
// on narrow screens.

const DAY_MS = 24 * 60 * 60 * 1000;

// dayGroup names the group of a thread last active at `when`, seen `now`.
export function dayGroup(when, now = new Date()) {
	const startOf = (d) => new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
	const days = Math.round((startOf(now) - startOf(when)) / DAY_MS);
	if (days <= 0) return "Today";
	if (days === 1) return "Yesterday";
	if (days <= 7) return "Previous 7 days";
	if (days <= 30) return "Previous 30 days";
	return "Older";
}

// groupByDate puts a heading before the first item of each group; items
// come most recent first, so each group is one run.
export function groupByDate(list, now = new Date()) {
	let last = "";
	for (const item of [...list.children]) {
		const at = item.querySelector("time[datetime]");
		if (!at) continue;
		const group = dayGroup(new Date(at.getAttribute("datetime")), now);
		if (group === last) continue;
		last = group;
		const head = document.createElement("li");
		head.className = "group-head";
		head.setAttribute("aria-hidden", "true");
		head.textContent = group;
		item.before(head);
	}
}

// filterList shows the items whose data-title contains the query (any
// case), the headings of groups with an item shown, and `empty` when none.
export function filterList(list, query, empty) {
	const q = query.trim().toLocaleLowerCase();
	let head = null;
	let shown = 0;
	let headShown = false;
	const closeGroup = () => {
		if (head) head.hidden = !headShown;
	};
	for (const item of list.children) {
		if (item.classList.contains("group-head")) {
			closeGroup();
			head = item;
			headShown = false;
			continue;
		}
		const match = (item.dataset.title ?? "").toLocaleLowerCase().includes(q);
		item.hidden = !match;
		if (match) {
			shown++;
			headShown = true;
		}
	}
	closeGroup();
	if (empty) empty.hidden = shown > 0;
}

function drawer() {
	const toggle = document.querySelector(".sidebar-toggle");
	const sidebar = document.getElementById("sidebar");
	if (!toggle || !sidebar) return;
	toggle.hidden = false;
	const set = (open) => {
		document.body.classList.toggle("sidebar-open", open);
		toggle.setAttribute("aria-expanded", String(open));
		if (open) sidebar.querySelector("input, a")?.focus();
	};
	toggle.addEventListener("click", () => set(!document.body.classList.contains("sidebar-open")));
	document.addEventListener("keydown", (ev) => {
		if (ev.key === "Escape" && document.body.classList.contains("sidebar-open")) {
			set(false);
			toggle.focus();
		}
	});
}

export function threadLists() {
	for (const list of document.querySelectorAll("[data-group-by-date]")) groupByDate(list);
	for (const input of document.querySelectorAll("input[data-filter]")) {
		const list = document.getElementById(input.dataset.filter);
		const empty = list?.parentElement.querySelector(".sidebar-empty");
		if (list) input.addEventListener("input", () => filterList(list, input.value, empty));
	}
	drawer();
}
