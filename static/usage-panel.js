// The thread's usage panel (docs/DESIGN.md §6, §10). The server renders
// the ledger's figure with the page (state.usage); from then on the page
// adds what its frames report, so the panel follows the cards and the
// lead with no request while a run goes on: a card's usage snapshots are
// cumulative, so each one adds what it grew by; each lead answer and each
// subagent model step is one call. A run's end frame carries the run's
// own ledger totals, which replace what the page summed for a run it saw
// start. The figure is fetched again only when the token gate reopens.

import { clone, el } from "./dom.js";
import { groupThousands } from "./format.js";

const FIELDS = ["input_tokens", "output_tokens", "total_tokens", "calls", "unreported_calls"];

function zero() {
	return Object.fromEntries(FIELDS.map((f) => [f, 0]));
}

function emptyReport() {
	return { total: zero(), lead: zero(), subagents: zero(), by_model: {} };
}

function addTotals(into, t) {
	for (const f of FIELDS) into[f] += Number.isInteger(t?.[f]) ? t[f] : 0;
}

// addReport adds report r into sum, as models.UsageReport.Add does.
function addReport(sum, r) {
	for (const part of ["total", "lead", "subagents"]) addTotals(sum[part], r?.[part]);
	for (const [name, t] of Object.entries(r?.by_model ?? {})) {
		sum.by_model[name] ??= zero();
		addTotals(sum.by_model[name], t);
	}
}

// ledgerUsage reads a lead answer's usage as the ledger records its call
// (agent.ledgerEntry): null when the provider reported none worth
// recording, a missing total is input + output.
export function ledgerUsage(u) {
	const n = (v) => (Number.isInteger(v) ? v : 0);
	if (!u || typeof u !== "object") return null;
	const [input, output, total] = [n(u.input_tokens), n(u.output_tokens), n(u.total_tokens)];
	if (input <= 0 && output <= 0 && total <= 0) return null;
	const i = Math.max(input, 0);
	const o = Math.max(output, 0);
	return { input_tokens: i, output_tokens: o, total_tokens: total > 0 ? total : i + o };
}

// UsageTally is the thread's figure: the server's at load, plus every
// run's as the page saw it.
export class UsageTally {
	constructor() {
		this.base = emptyReport();
		this.runs = new Map(); // run id → {report, exact}
	}

	// reset starts again from the server's figure u (the usage API's shape).
	reset(u) {
		this.base = emptyReport();
		addReport(this.base, u);
		this.runs.clear();
	}

	// seeRun notes a run the page saw start: its end frame's totals are
	// all of it, so they replace what the page summed.
	seeRun(runID) {
		this.run(runID).exact = true;
	}

	run(runID) {
		let r = this.runs.get(runID);
		if (!r) {
			r = { report: emptyReport(), exact: false };
			this.runs.set(runID, r);
		}
		return r;
	}

	// add counts tokens (a usage's three counts, or what one grew by) and
	// calls of a run, for the lead or its subagents and a model.
	add(runID, lead, model, usage, calls = 0, unreported = 0) {
		const r = this.run(runID).report;
		const t = { ...zero(), ...usage, calls, unreported_calls: unreported };
		addReport(r, { total: t, [lead ? "lead" : "subagents"]: t, by_model: { [model]: t } });
	}

	// endRun takes the run's own totals from its end frame (null under the
	// token gate): a run seen from its start is exactly those; one that was
	// under way at load keeps what the page added, the rest being in the
	// server's figure already.
	endRun(runID, totals) {
		const r = this.runs.get(runID);
		if (!r) return; // nothing of it was seen live: the server's figure has it
		addReport(this.base, r.exact && totals ? totals : r.report);
		this.runs.delete(runID);
	}

	report() {
		const sum = emptyReport();
		addReport(sum, this.base);
		for (const r of this.runs.values()) addReport(sum, r.report);
		return sum;
	}
}

// figure is a line's tokens in words: "not reported" when it has calls
// and none reported usage, never a 0 that reads as free.
export function figure(t) {
	if (t.calls > 0 && t.unreported_calls === t.calls) return "not reported";
	return groupThousands(t.total_tokens);
}

// fillUsagePanel shows report u; labels maps model names to display
// names. The panel is cloned from <template id="usage-template"> when the
// page was rendered without it (token usage was off).
export function fillUsagePanel(u, labels) {
	let panel = document.getElementById("usage-panel");
	if (!panel) {
		panel = clone("usage-template");
		document.getElementById("conn-status").after(panel);
	}
	const set = (key, text) => {
		const node = panel.querySelector(`[data-usage="${key}"]`);
		if (node.textContent !== text) node.textContent = text;
	};
	set("total", figure(u.total));
	const unreported = panel.querySelector('[data-usage="unreported"]');
	unreported.textContent = u.total.unreported_calls < u.total.calls ? notReported(u.total.unreported_calls) : "";
	unreported.hidden = unreported.textContent === "";
	set("lead", figure(u.lead));
	set("subagents", figure(u.subagents));
	panel.querySelector('[data-usage="by-model"]').replaceChildren(...modelRows(u, labels));
}

function modelRows(u, labels) {
	const count = (n) => groupThousands(n ?? 0);
	return Object.keys(u.by_model)
		.sort()
		.map((name) => {
			const t = u.by_model[name];
			const label = el("td", "", labels.get(name) ?? name);
			label.title = name;
			const row = el("tr");
			const none = t.calls > 0 && t.unreported_calls === t.calls;
			const figures = none ? ["not reported", "not reported", "not reported"] : [t.input_tokens, t.output_tokens, t.total_tokens].map(count);
			row.append(label, el("td", "", count(t.calls)), ...figures.map((f) => el("td", "", f)));
			if (!none && t.unreported_calls > 0) row.lastChild.append(" ", el("span", "usage-unreported", notReported(t.unreported_calls)));
			return row;
		});
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
