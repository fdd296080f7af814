// Math typeset in the page: server/render marks TeX ($…$, \(…\): a
// span.math-inline; $$…$$, \[…\]: a .math-display) as escaped text, and
// this module typesets what appears in the conversation — at load, in
// answers as they stream (static/markdown-live.js appends the blocks that
// changed), in messages and cards added later — with the vendored KaTeX
// (static/katex/, loaded on the first math only).
//
// KaTeX writes MathML (output: "mathml"): its HTML output positions
// glyphs with inline styles, which the page's CSP (style-src 'self',
// server/middleware.go) must not be loosened for; browsers lay MathML
// out natively. trust: false refuses \href, \url, \includegraphics and
// raw HTML; maxSize and maxExpand bound what a hostile text can make it
// draw or expand. A formula KaTeX cannot read stays its TeX, marked
// .math-error with the reason in its title: KaTeX's own error element
// carries a style attribute the CSP would refuse.

const katexURL = new URL("./katex/katex.min.js", import.meta.url).href;
const cssURL = new URL("./katex/katex.min.css", import.meta.url).href;
const selector = ".math-inline:not([data-tex]), .math-display:not([data-tex])";
const options = { output: "mathml", trust: false, throwOnError: true, maxSize: 20, maxExpand: 500, strict: "ignore" };

let loading = null;

// katex loads KaTeX's script and stylesheet once.
function katex() {
	loading ??= new Promise((resolve, reject) => {
		const css = document.createElement("link");
		css.rel = "stylesheet";
		css.href = cssURL;
		const script = document.createElement("script");
		script.src = katexURL;
		script.onload = () => resolve(globalThis.katex);
		script.onerror = () => reject(new Error("KaTeX did not load"));
		document.head.append(css, script);
	});
	return loading;
}

// renderMath typesets the marked math in root (root included) not yet
// typeset; the TeX is kept in data-tex.
export async function renderMath(root) {
	const found = [...root.querySelectorAll(selector)];
	if (root.matches?.(selector)) found.unshift(root);
	if (found.length === 0) return;
	const k = await katex();
	for (const el of found) {
		if (el.dataset.tex !== undefined || !el.isConnected) continue;
		const tex = el.textContent;
		el.dataset.tex = tex;
		try {
			k.render(tex, el, { ...options, displayMode: el.classList.contains("math-display") });
		} catch (err) {
			el.textContent = tex;
			el.classList.add("math-error");
			el.title = err?.message ?? String(err);
		}
	}
}

// watchMath typesets root's math now and whatever is added to it later.
export function watchMath(root) {
	const seen = new MutationObserver((records) => {
		for (const r of records) {
			for (const node of r.addedNodes) {
				if (node.nodeType === Node.ELEMENT_NODE) renderMath(node).catch(report);
			}
		}
	});
	seen.observe(root, { childList: true, subtree: true });
	renderMath(root).catch(report);
}

function report(err) {
	console.warn("math:", err);
}
