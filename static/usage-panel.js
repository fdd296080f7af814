// The thread's usage panel (docs/DESIGN.md §6, §10). The server renders
// the ledger's figures with the page (state.usage), per run; from then on
// the page adds what its frames report, so the panel follows the cards
// and the lead with no request while a run goes on: a card's usage
// snapshots are cumulative, so each one adds what it grew by; each lead
// answer and each subagent model step is one call. A run's end frame
// carries the run's own ledger totals, which replace what the page summed
// for it. A run that a later run replaces (a Regenerate of a completed
// answer, an Edit: agent.Replaced, as the run.start frame says) leaves the
// total for the "replaced answers" line, as its answer leaves the page.
// The title call's usage comes in its own frame (usage.title). The
// figures are fetched again only when the token gate reopens.

import { clone, el } from "./dom.js";
import { groupThousands } from "./format.js";

const FIELDS = ["input_tokens", "output_tokens", "total_tokens", "calls", "unreported_calls", "lost_calls"];

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

function copyReport(r) {
	const sum = emptyReport();
	addReport(sum, r);
	return sum;
}

// UsageTally is the thread's figures, per run as the server split them
// (server threadUsage) plus what the page saw since.
export class UsageTally {
	constructor() {
		this.runs = new Map(); // run id → {report, status, replaced}, oldest first
		this.title = emptyReport(); // the thread's calls of no run: its title
	}

	// reset starts again from the server's figures u (the usage API's shape).
	reset(u) {
		this.runs.clear();
		for (const r of u?.runs ?? []) {
			this.runs.set(r.run_id, { report: copyReport(r.usage), status: r.status ?? "", replaced: r.replaced === true });
		}
		this.title = copyReport(u?.title);
	}

	run(runID) {
		let r = this.runs.get(runID);
		if (!r) {
			r = { report: emptyReport(), status: "running", replaced: false };
			this.runs.set(runID, r);
		}
		return r;
	}

	// startRun notes a new run and what it replaces, as agent.Replaced
	// reads it: a Regenerate (retry_of) replaces a completed answer, not a
	// failed or stopped one, which stays in the thread; an Edit (edit_of)
	// replaces that run and every later one.
	startRun(runID, { retry_of: retryOf, edit_of: editOf } = {}) {
		const retried = this.runs.get(retryOf);
		if (retried?.status === "completed") retried.replaced = true;
		if (editOf && this.runs.has(editOf)) {
			let from = false;
			for (const [id, r] of this.runs) {
				from ||= id === editOf;
				if (from && id !== runID) r.replaced = true;
			}
		}
		this.run(runID);
	}

	// add counts tokens (a usage's three counts, or what one grew by) and
	// calls of a run, for the lead or its subagents and a model.
	add(runID, lead, model, usage, calls = 0, unreported = 0) {
		const t = { ...zero(), ...usage, calls, unreported_calls: unreported };
		addReport(this.run(runID).report, { total: t, [lead ? "lead" : "subagents"]: t, by_model: { [model]: t } });
	}

	// endRun takes the run's status, and its own totals from its end frame
	// (null under the token gate): they are all of the run's calls.
	endRun(runID, status, totals) {
		const r = this.run(runID);
		r.status = status ?? r.status;
		if (totals) r.report = copyReport(totals);
	}

	// setTitle takes the title call's figures (a usage.title frame, or the
	// server's on catching up): set, not added, so either may come first.
	setTitle(report) {
		if ((report?.total?.calls ?? 0) > 0) this.title = copyReport(report);
	}

	// report is what the thread shows, with the replaced answers apart.
	report() {
		const sum = copyReport(this.title);
		sum.replaced = zero();
		for (const r of this.runs.values()) {
			if (r.replaced) addTotals(sum.replaced, r.report.total);
			else addReport(sum, r.report);
		}
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
	unreported.textContent = usageNote(u.total);
	unreported.hidden = unreported.textContent === "";
	set("lead", figure(u.lead));
	set("subagents", figure(u.subagents));
	const note = replacedNote(u.replaced);
	set("replaced-note", note);
	set("replaced", figure(u.replaced));
	for (const node of panel.querySelectorAll('[data-usage="replaced-note"], [data-usage-row="replaced"]')) node.hidden = note === "";
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
			const figures = none ? ["not reported", "not reported"] : [t.input_tokens, t.output_tokens].map(count);
			row.append(label, el("td", "", count(t.calls)), ...[...figures, figure(t)].map((f) => el("td", "", f)));
			const note = usageNote(t);
			if (note) row.lastChild.append(" ", el("span", "usage-unreported", note));
			return row;
		});
}

// replacedNote names the replaced answers' tokens beside the total, as
// views.replacedNote does; "" when there are none.
function replacedNote(t) {
	if (!(t?.calls > 0)) return "";
	if (t.unreported_calls === t.calls) return "+ replaced answers, not reported";
	return `+${groupThousands(t.total_tokens)} in replaced answers`;
}

// notReported names the calls whose provider reported no usage, as
// views.notReported does; "" when every call reported.
function notReported(n) {
	if (!(n > 0)) return "";
	return n === 1 ? "not reported for 1 call" : `not reported for ${groupThousands(n)} calls`;
}

// cutByRestart names the calls a restart cut, as views.cutByRestart does.
function cutByRestart(n) {
	if (!(n > 0)) return "";
	return `${n === 1 ? "1 call" : `${groupThousands(n)} calls`} cut by a restart: usage not reported`;
}

// usageNote is what the panel says beside a line's figure about its calls
// without usage, as views.usageNote does (contracts/card_format_contract.json,
// usage_notes): those a restart cut apart from the others; when no call
// reported, the figure already says "not reported" and only the cut ones
// are named.
export function usageNote(t) {
	const lost = t.lost_calls ?? 0;
	const restart = cutByRestart(lost);
	if (t.calls > 0 && t.unreported_calls === t.calls) return restart;
	return [notReported(t.unreported_calls - lost), restart].filter((s) => s !== "").join("; ");
}

export function removeUsagePanel() {
	document.getElementById("usage-panel")?.remove();
}
