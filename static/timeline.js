// A run's shape at a glance (docs/DESIGN.md §9): above a run's cards, one
// bar per card from queued to running to its end, coloured by status,
// and a row of the lead's own model calls. Built from commit times only —
// the messages' (data-at, or created_at on a live frame) and the cards'
// (queuedAt, startedAt, endedAt) — so a reload rebuilds exactly what was
// shown live. A lead call spans from the run's latest record before its
// answer to the answer: while the lead calls its model, nothing else of
// the run happens. Where the run resumed (run.resumed: its commit time
// and lost_ms before it), a hatched gap crosses every row.

import { now } from "./clock.js";
import { el } from "./dom.js";
import { duration, isTerminal, lostTime, statusText } from "./format.js";

// Facts is what one run's timeline is built from.
function newFacts(runID) {
	return { runID, human: null, answers: [], results: [], gaps: [], active: false };
}

// span is what a run covers: from its message to its latest record, or
// to now while it is active.
function span(f, cards) {
	const times = [...f.answers, ...f.results, ...f.gaps.flatMap((g) => [g.from, g.to])];
	if (f.human !== null) times.push(f.human);
	for (const c of cards) times.push(c.queuedAt, c.startedAt, c.endedAt);
	const known = times.filter((t) => t !== null);
	if (known.length === 0) return null;
	const from = f.human ?? Math.min(...known);
	const to = f.active ? Math.max(now(), ...known) : Math.max(...known);
	return { from, to: Math.max(to, from + 1) };
}

// leadCalls are the lead's model calls: each answer back to the latest
// record before it, plus the call under way while the run is active and
// nothing else of it is.
function leadCalls(f, cards, t) {
	// A call after a resumption was made again from it.
	const before = [...f.results, ...f.gaps.map((g) => g.to)];
	if (f.human !== null) before.push(f.human);
	for (const c of cards) if (c.endedAt !== null) before.push(c.endedAt);
	const answers = [...f.answers].sort((a, b) => a - b);
	const calls = answers.map((end, i) => {
		const earlier = [...before, ...answers.slice(0, i)].filter((x) => x <= end);
		return { from: earlier.length > 0 ? Math.max(...earlier) : end, to: end };
	});
	const latest = Math.max(-Infinity, ...before, ...answers);
	const busy = cards.some((c) => !isTerminal(c.status));
	if (f.active && !busy && latest > -Infinity && !answers.includes(latest)) calls.push({ from: latest, to: t, live: true });
	return calls;
}

// cardBar is a card's two segments: waiting in the queue, then running
// until its end — now while it is live, the run's last record for one
// whose run ended without its result.
function cardBar(c, t, last) {
	const end = c.endedAt ?? (isTerminal(c.status) ? last : t);
	const queued = c.queuedAt !== null ? { from: c.queuedAt, to: c.startedAt ?? end ?? c.queuedAt } : null;
	const ran = c.startedAt !== null ? { from: c.startedAt, to: end ?? c.startedAt } : null;
	return { queued, ran };
}

// mostAtOnce is how many cards ran at the same time, at most.
function mostAtOnce(bars) {
	const edges = [];
	for (const b of bars) if (b.ran && b.ran.to > b.ran.from) edges.push([b.ran.from, 1], [b.ran.to, -1]);
	edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
	let running = 0;
	let most = 0;
	for (const [, d] of edges) {
		running += d;
		most = Math.max(most, running);
	}
	return most;
}

function segment(kind, s, range) {
	const bar = el("span", `timeline-bar bar-${kind}`);
	const width = range.to - range.from;
	// Percentages of the run, so the bars scale with any width; set through
	// the CSSOM, which the CSP allows.
	bar.style.left = `${(((s.from - range.from) / width) * 100).toFixed(2)}%`;
	bar.style.width = `${Math.max(((s.to - s.from) / width) * 100, 0.5).toFixed(2)}%`;
	return bar;
}

function row(label, title, segments, time, words) {
	const li = el("li", "timeline-row");
	const name = el("span", "timeline-label", label);
	name.title = title;
	const track = el("span", "timeline-track");
	track.setAttribute("aria-hidden", "true");
	track.append(...segments);
	li.append(name, track, el("span", "timeline-time", time), el("span", "visually-hidden", words));
	return li;
}

function leadRow(calls, gaps, range) {
	const took = calls.reduce((n, c) => n + (c.to - c.from), 0);
	const n = calls.length;
	const words = `: ${n === 1 ? "1 model call" : `${n} model calls`}, ${duration(took)} in all.`;
	const segments = calls.map((c) => segment(c.live ? "lead bar-live" : "lead", c, range));
	return row("Lead", "The lead's own model calls", [...segments, ...gapSegments(gaps, range)], duration(took), words);
}

// gapSegments mark where the run was gone before it resumed, on a row.
function gapSegments(gaps, range) {
	return gaps.map((g) => segment("gap", g, range));
}

function cardRow(c, bar, gaps, range) {
	const segments = [];
	if (bar.queued) segments.push(segment("queued", bar.queued, range));
	if (bar.ran) segments.push(segment(c.status, bar.ran, range));
	const status = statusText(c.status, "", false);
	const parts = [];
	if (bar.queued) parts.push(`waited ${duration(bar.queued.to - bar.queued.from)}`);
	if (bar.ran) parts.push(`ran ${duration(bar.ran.to - bar.ran.from)}`);
	else parts.push("never started");
	const title = c.description || "Subagent task";
	const li = row(title, title, [...segments, ...gapSegments(gaps, range)], bar.ran ? duration(bar.ran.to - bar.ran.from) : "", `: ${parts.join(", ")}, ${status.toLowerCase()}.`);
	li.dataset.taskId = c.taskID;
	li.dataset.status = c.status;
	return li;
}

// summary says the run's shape in words: the figure's text alternative.
function summary(cards, bars, gaps, range) {
	const n = cards.length;
	const waited = bars.filter((b) => b.queued).length;
	const parts = [n === 1 ? "1 subagent" : `${n} subagents`, `at most ${mostAtOnce(bars)} at once`];
	if (waited > 0) parts.push(`${waited} waited for a slot`);
	if (gaps.length > 0) {
		const lost = lostTime(gaps.reduce((ms, g) => ms + (g.to - g.from), 0));
		parts.push(`${gaps.length === 1 ? "resumed once" : `resumed ${gaps.length} times`}, ${lost} lost`);
	}
	parts.push(duration(range.to - range.from));
	return parts.join(" · ");
}

// Timelines keeps the run timelines of one thread page.
export class Timelines {
	// cardsOf(runID) lists a run's card states, in call order.
	constructor({ list, cardsOf }) {
		this.list = list;
		this.cardsOf = cardsOf;
		this.runs = new Map(); // run id → facts
		this.nodes = new Map(); // run id → the figure
	}

	facts(runID) {
		let f = this.runs.get(runID);
		if (!f) {
			f = newFacts(runID);
			this.runs.set(runID, f);
		}
		return f;
	}

	// note records a message of a run: its kind (human, ai, tool) and
	// commit time (ms).
	note(runID, kind, at) {
		if (!runID || at === null) return;
		const f = this.facts(runID);
		if (kind === "human") f.human ??= at;
		else if (kind === "ai" && !f.answers.includes(at)) f.answers.push(at);
		else if (kind === "tool") f.results.push(at);
	}

	setActive(runID, active) {
		if (runID) this.facts(runID).active = active;
	}

	// prune removes the timelines of runs whose cards left the page (a new
	// run replaced their answer; a Regenerate keeps the question).
	prune() {
		for (const [runID, fig] of this.nodes) {
			if (this.list.querySelector(`article.msg[data-run-id="${CSS.escape(runID)}"] section.card`)) continue;
			fig.remove();
			this.nodes.delete(runID);
		}
	}

	// gap records that the run resumed at (ms, its commit time) after
	// lostMs without it.
	gap(runID, at, lostMs) {
		if (!runID || at === null) return;
		const f = this.facts(runID);
		if (f.gaps.some((g) => g.to === at)) return;
		f.gaps.push({ from: at - Math.max(Number.isFinite(lostMs) ? lostMs : 0, 0), to: at });
		f.gaps.sort((a, b) => a.to - b.to);
	}

	// read learns the facts of the messages and the runs' resumptions
	// under root (server-rendered).
	read(root) {
		const resumed = ".run-resumed[data-run-id][data-at]";
		for (const r of [...(root.matches?.(resumed) ? [root] : []), ...root.querySelectorAll(resumed)]) {
			const at = Date.parse(r.dataset.at);
			if (Number.isFinite(at)) this.gap(r.dataset.runId, at, Number(r.dataset.lostMs));
		}
		for (const m of root.querySelectorAll("article.msg[data-run-id][data-at]")) {
			const at = Date.parse(m.dataset.at);
			if (!Number.isFinite(at)) continue;
			this.note(m.dataset.runId, m.matches(".msg-human") ? "human" : "ai", at);
			for (const r of m.querySelectorAll(".tool-result[data-at]")) {
				const rt = Date.parse(r.dataset.at);
				if (Number.isFinite(rt)) this.note(m.dataset.runId, "tool", rt);
			}
		}
	}

	// place puts a run's timeline above its first card, once the run has
	// cards; node is the message that holds them.
	place(runID, node) {
		const figure = this.nodes.get(runID);
		if (figure?.isConnected) return;
		const first = this.list.querySelector(`article.msg[data-run-id="${CSS.escape(runID)}"] .task-slot`)?.closest("article") ?? node;
		if (!first) return;
		const fig = el("details", "run-timeline");
		fig.open = true;
		fig.dataset.runId = runID;
		// Inside the conversation's log, but redrawn with the clock: read
		// on demand, never announced.
		fig.setAttribute("aria-live", "off");
		fig.append(el("summary", "timeline-summary"), el("ol", "timeline-rows"));
		first.before(fig);
		this.nodes.set(runID, fig);
		this.render(runID);
	}

	// render draws a run's timeline as of now; it reports whether the run
	// is still live (its bars grow with the clock).
	render(runID, t = now()) {
		const fig = this.nodes.get(runID);
		const cards = this.cardsOf(runID);
		if (!fig?.isConnected || cards.length === 0) return false;
		const f = this.facts(runID);
		const range = span(f, cards);
		if (!range) return false;
		const bars = cards.map((c) => cardBar(c, t, range.to));
		const calls = leadCalls(f, cards, t);
		const text = summary(cards, bars, f.gaps, range);
		const head = fig.querySelector(".timeline-summary");
		if (head.textContent !== `Timeline · ${text}`) head.textContent = `Timeline · ${text}`;
		const rows = [leadRow(calls, f.gaps, range), ...cards.map((c, i) => cardRow(c, bars[i], f.gaps, range))];
		fig.querySelector(".timeline-rows").replaceChildren(...rows);
		return f.active || cards.some((c) => !isTerminal(c.status));
	}

	// active reports whether a placed timeline belongs to an active run.
	active() {
		return [...this.nodes.keys()].some((runID) => this.facts(runID).active);
	}

	// renderAll redraws every placed timeline; it reports whether any is
	// live.
	renderAll(t = now()) {
		let live = false;
		for (const runID of this.nodes.keys()) live = this.render(runID, t) || live;
		return live;
	}
}
