// An answer while it streams, rendered as it arrives: the server renders
// the text so far with the same renderer and sanitizer as a saved message
// and sends it in ai_html frames (server/hub/live.go, docs/API.md), a whole
// HTML now and then and otherwise a diff of the previous frame. The saved
// message's HTML is the render of the whole text, so it replaces the
// bubble without a jump.

// The HTML each streaming body shows, and its frame's version.
const shown = new WeakMap();
// The HTML each top-level node was parsed from.
const sources = new WeakMap();

// applyLiveHTML shows an ai_html frame in body; false when the frame is a
// diff of a version this page never had (it joined late or missed a
// frame): the next whole frame catches it up.
export function applyLiveHTML(body, d) {
	const last = shown.get(body);
	let html;
	if (d.keep === 0) html = d.html;
	else if (last?.version === d.version - 1) html = last.html.slice(0, d.keep) + d.html;
	else return false;
	shown.set(body, { version: d.version, html });
	patch(body, html);
	return true;
}

// patch makes body show html, keeping the top-level blocks that did not
// change: only the end of an answer changes as it grows, and the blocks
// above keep their nodes (a selection, a code block's Copy button).
function patch(body, html) {
	const parsed = document.createElement("template");
	// The server rendered and sanitized this HTML (server/render).
	parsed.innerHTML = html;
	const next = [...parsed.content.childNodes];
	const current = [...body.childNodes];
	let same = 0;
	while (same < next.length && same < current.length && sources.get(current[same]) === source(next[same])) same++;
	for (const node of current.slice(same)) node.remove();
	for (const node of next.slice(same)) {
		sources.set(node, source(node));
		body.append(node);
	}
}

function source(node) {
	return node.nodeType === Node.ELEMENT_NODE ? node.outerHTML : node.textContent;
}
