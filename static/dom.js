// Small DOM helpers shared by the page's modules.

export function el(tag, className, text) {
	const node = document.createElement(tag);
	if (className) node.className = className;
	if (text !== undefined) node.textContent = text;
	return node;
}

export function intAttr(v) {
	const n = Number.parseInt(v ?? "", 10);
	return Number.isNaN(n) ? 0 : n;
}

// clone copies the first element of <template id="…">: markup a templ
// component rendered for the script to fill, so live and server-rendered
// markup cannot drift apart.
export function clone(templateID) {
	return document.getElementById(templateID).content.firstElementChild.cloneNode(true);
}

// scrollRegion makes a box that scrolls (a max-height output) reachable by
// keyboard, so its hidden part can be scrolled without a mouse.
export function scrollRegion(node) {
	node.tabIndex = 0;
	return node;
}

// touchScreen says whether the main pointer is a finger (a phone, a
// tablet: pointer coarse, hover none). A machine with no pointer at all
// (a keyboard alone: pointer none, hover none) is no touch screen.
export function touchScreen() {
	return matchMedia("(pointer: coarse)").matches;
}
