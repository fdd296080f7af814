// One clock for the whole page (docs/DESIGN.md §9): the cards' elapsed
// times and the run timelines tick from it, not from a timer each. It
// runs only while something is live and the tab is visible, and ticks
// less often for a reader who asked for reduced motion.

const TICK_MS = 1000;
const CALM_TICK_MS = 10_000; // prefers-reduced-motion: a figure that changes every 10 s

const listeners = new Set();
let timer = 0;
// The server's clock minus this one's, so times the server stamped read
// right on a machine whose clock is off. Every time the server sent is a
// lower bound of its clock when it arrives (it took time to get here), so
// the largest of them is the best estimate.
let skew = null;

const calm = window.matchMedia?.("(prefers-reduced-motion: reduce)");

// now is the server's time as best this page knows it.
export function now() {
	return Date.now() + (skew ?? 0);
}

// serverTime learns the server's clock from a time it stamped (the page's
// state, a frame's created_at) as that time arrives.
export function serverTime(ms) {
	if (!Number.isFinite(ms)) return;
	const s = ms - Date.now();
	skew = skew === null ? s : Math.max(skew, s);
}

function tick() {
	const t = now();
	for (const fn of listeners) fn(t);
}

function schedule() {
	clearInterval(timer);
	timer = 0;
	if (listeners.size === 0 || document.hidden) return;
	timer = setInterval(tick, calm?.matches ? CALM_TICK_MS : TICK_MS);
}

document.addEventListener("visibilitychange", () => {
	// A tab shown again catches up at once, then ticks on.
	if (!document.hidden && listeners.size > 0) tick();
	schedule();
});
calm?.addEventListener?.("change", schedule);

// every calls fn with the time on every tick while it is subscribed; the
// returned function unsubscribes it. A subscriber that has nothing live
// unsubscribes, so an idle page runs no timer.
export function every(fn) {
	if (!listeners.has(fn)) {
		listeners.add(fn);
		if (listeners.size === 1) schedule();
	}
	return () => {
		if (listeners.delete(fn) && listeners.size === 0) schedule();
	};
}

// ticking reports whether the clock runs (tests read it).
export function ticking() {
	return timer !== 0;
}
