// The composer's line about the user's token budget (views.BudgetText
// writes it on the page; this writes it again after each run, from
// GET /api/auth/me). Under the token gate it gives the share left, not
// tokens (docs/DESIGN.md §9).

import { groupThousands } from "./format.js";

const DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

// resetTime writes an RFC 3339 instant as agent.ResetTime does.
function resetTime(iso) {
	const d = new Date(iso);
	const two = (n) => String(n).padStart(2, "0");
	return `${DAYS[d.getUTCDay()]} ${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}, ${two(d.getUTCHours())}:${two(d.getUTCMinutes())} UTC`;
}

// budgetText is views.BudgetText for b, /api/auth/me's budget.
export function budgetText(b, showTokens) {
	const left = Math.max(b.limit - b.used, 0);
	const resets = resetTime(b.resets_at);
	const when = b.period === "day" ? "today" : `this ${b.period}`; // views.PeriodPhrase
	if (left === 0) return `Your token budget for ${when} is used up; it resets ${resets}.`;
	if (showTokens) return `${groupThousands(left)} of ${groupThousands(b.limit)} tokens left ${when}, resets ${resets}.`;
	return `${Math.floor((left * 100) / b.limit)}% of your token budget left ${when}, resets ${resets}.`;
}

// refreshBudget writes the line again; it stays as it was when the server
// cannot be asked.
export async function refreshBudget(showTokens) {
	const note = document.getElementById("budget-note");
	if (!note) return;
	try {
		const res = await fetch("/api/auth/me");
		if (!res.ok) return;
		const { budget } = await res.json();
		note.textContent = budget ? budgetText(budget, showTokens) : "";
		note.hidden = !budget;
	} catch {
		// Offline: the next run's end tries again.
	}
}
