// Following the conversation: a reader at the bottom follows it as it
// grows; one who scrolled up to read stays where they are, and a "Jump to
// latest" button appears when new output arrives below their view.

// How close to the bottom counts as "following along".
const NEAR_BOTTOM_PX = 120;

// below is how far the end of the page is under the bottom of the view.
function below() {
	const doc = document.documentElement;
	return doc.scrollHeight - doc.scrollTop - doc.clientHeight;
}

function nearBottom() {
	return below() < NEAR_BOTTOM_PX;
}

export function scrollToBottom() {
	window.scrollTo(0, document.documentElement.scrollHeight);
}

// keepPinned makes a change outside the message list (the composer's
// error line), then keeps the view pinned to the bottom if the reader was
// already there.
export function keepPinned(change) {
	const follow = nearBottom();
	change();
	if (follow) scrollToBottom();
}

// Follower watches the message list. Anything that changes its size —
// a message, a streamed word, a card's new step — is followed while the
// reader is at the bottom. Only output (a frame from the server) that
// grows the page below the view shows the jump button: older messages
// loaded above keep the distance to the bottom, and a card the reader
// expands is not news.
export class Follower {
	constructor(list, button) {
		this.button = button;
		this.following = true;
		this.output = false;
		this.lastTop = document.documentElement.scrollTop;
		this.lastBelow = below();
		window.addEventListener("scroll", () => this.onScroll(), { passive: true });
		// A ResizeObserver runs after layout and before paint: the view
		// moves with the new content in the same frame, without a flicker.
		new ResizeObserver(() => this.onResize()).observe(list);
		button?.addEventListener("click", () => this.jump());
	}

	// onScroll stops following only when the reader scrolls up: the event
	// of our own scroll to the bottom may come after more output has
	// grown the page, and must not be read as the reader leaving.
	onScroll() {
		const top = document.documentElement.scrollTop;
		if (nearBottom()) {
			this.following = true;
			this.showButton(false);
		} else if (top < this.lastTop) {
			this.following = false;
		}
		this.lastTop = top;
		this.lastBelow = below();
	}

	// noteOutput is told of every frame before it changes the page.
	noteOutput() {
		this.output = true;
	}

	onResize() {
		if (this.following) {
			scrollToBottom();
		} else if (this.output && below() > this.lastBelow + 1) {
			this.showButton(true);
		}
		this.output = false;
		this.lastBelow = below();
	}

	// jump goes to the latest output and follows it again: the button, and
	// sending a message (your message is what you want to see next).
	jump() {
		this.following = true;
		this.showButton(false);
		scrollToBottom();
	}

	showButton(show) {
		if (this.button) this.button.hidden = !show;
	}
}
