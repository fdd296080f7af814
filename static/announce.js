// What a screen reader hears of the live page beyond whole messages (the
// #messages log): one line per change worth hearing, through the polite
// live region #announcer (views/thread.templ). Parts that change token by
// token or tick by tick are aria-live="off" and never speak themselves.

import { el } from "./dom.js";
import { isTerminal, notStartedText, statusText } from "./format.js";

// Lines kept in the region; older ones are dropped (removals are not
// announced), so a long run does not grow the page.
const KEPT = 20;

// announce says text once. Each line is a new element, so the same words
// twice (two cards completing alike) are said twice.
export function announce(text) {
	const region = document.getElementById("announcer");
	if (!region || text === "") return;
	region.append(el("p", "", text));
	while (region.childElementCount > KEPT) region.firstElementChild.remove();
}

// cardAnnouncement is what a card's change of status says: its title and
// its new state in words; "" for a change not worth a line.
export function cardAnnouncement(c) {
	const title = c.description.trim() === "" ? "Subagent task" : c.description;
	if (c.status === "running") return `${title}: started`;
	if (!isTerminal(c.status)) return "";
	return `${title}: ${notStartedText(c.refusal) || statusText(c.status, "", false)}`;
}
