// Copy: every message's text (its Copy button) and every code block's
// code (a Copy button in its corner). The buttons work only with this
// script and a clipboard, so they show only then (.can-copy).

const FLASH_MS = 1500;

// listenCopy handles every copy button under root, now and later.
export function listenCopy(root) {
	if (!root || !navigator.clipboard) return;
	root.classList.add("can-copy");
	root.addEventListener("click", (ev) => {
		const button = ev.target.closest(".msg-copy, .code-copy");
		if (button && root.contains(button)) copy(button);
	});
	addCodeButtons(root);
}

// addCodeButtons puts a Copy button on each code block under node that
// has none yet (messages added live, older pages loaded).
export function addCodeButtons(node) {
	for (const pre of node.querySelectorAll(".msg-body pre")) {
		if (pre.querySelector(":scope > .code-copy")) continue;
		const button = document.createElement("button");
		button.type = "button";
		button.className = "code-copy";
		button.textContent = "Copy";
		button.setAttribute("aria-label", "Copy code");
		pre.prepend(button);
	}
}

function copy(button) {
	const text = button.matches(".code-copy")
		? (button.parentElement.querySelector("code") ?? button.parentElement).textContent.replace(/^Copy/, "")
		: button.closest(".msg").querySelector(".msg-body").innerText;
	copyText(button, text);
}

// copyText puts text on the clipboard and says so on button for a moment;
// it reports whether the clipboard took it.
export async function copyText(button, text) {
	const label = button.textContent;
	let ok = true;
	try {
		await navigator.clipboard.writeText(text);
		button.textContent = "Copied";
	} catch {
		ok = false;
		button.textContent = "Copy failed";
	}
	setTimeout(() => (button.textContent = label), FLASH_MS);
	return ok;
}
