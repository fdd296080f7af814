// The thread's usage panel (docs/DESIGN.md §10): filled from the usage API, cloned
// from <template id="usage-template"> when the page was rendered without
// it (token usage was off).

import { clone, el } from "./dom.js";
import { groupThousands } from "./format.js";

// fillUsagePanel shows u (the thread usage API's answer); labels maps
// model names to display names.
export function fillUsagePanel(u, labels) {
	let panel = document.getElementById("usage-panel");
	if (!panel) {
		panel = clone("usage-template");
		document.getElementById("conn-status").after(panel);
	}
	const count = (n) => groupThousands(n ?? 0);
	panel.querySelector('[data-usage="total"]').textContent = count(u.total?.total_tokens);
	panel.querySelector('[data-usage="lead"]').textContent = count(u.lead?.total_tokens);
	panel.querySelector('[data-usage="subagents"]').textContent = count(u.subagents?.total_tokens);
	const rows = Object.keys(u.by_model ?? {})
		.sort()
		.map((name) => {
			const t = u.by_model[name];
			const label = el("td", "", labels.get(name) ?? name);
			label.title = name;
			const row = el("tr");
			row.append(label, ...[t.calls, t.input_tokens, t.output_tokens, t.total_tokens].map((n) => el("td", "", count(n))));
			return row;
		});
	panel.querySelector('[data-usage="by-model"]').replaceChildren(...rows);
}

export function removeUsagePanel() {
	document.getElementById("usage-panel")?.remove();
}
