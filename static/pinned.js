// Auto-scroll: a reader at the bottom of the conversation follows it as it
// grows; one who scrolled up to read stays where they are.

// How close to the bottom counts as "following along".
const NEAR_BOTTOM_PX = 120;

function nearBottom() {
	const doc = document.documentElement;
	return doc.scrollHeight - doc.scrollTop - doc.clientHeight < NEAR_BOTTOM_PX;
}

export function scrollToBottom() {
	window.scrollTo(0, document.documentElement.scrollHeight);
}

// keepPinned makes a change, then keeps the view pinned to the bottom if
// the reader was already there.
export function keepPinned(change) {
	const follow = nearBottom();
	change();
	if (follow) scrollToBottom();
}
