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
	const unreported = panel.querySelector('[data-usage="unreported"]');
	unreported.textContent = notReported(u.total?.unreported_calls);
	unreported.hidden = unreported.textContent === "";
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
			if (t.unreported_calls > 0) row.lastChild.append(" ", el("span", "usage-unreported", notReported(t.unreported_calls)));
			return row;
		});
	panel.querySelector('[data-usage="by-model"]').replaceChildren(...rows);
}

// notReported names the calls whose provider reported no usage, as
// views.notReported does; "" when every call reported.
function notReported(n) {
	if (!(n > 0)) return "";
	return n === 1 ? "not reported for 1 call" : `not reported for ${groupThousands(n)} calls`;
}

export function removeUsagePanel() {
	document.getElementById("usage-panel")?.remove();
}
