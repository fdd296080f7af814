// How a card writes its figures and states (views/card_format.go;
// contracts/card_format_contract.json holds the examples both are tested
// against).

const TERMINAL_STATUSES = ["completed", "failed", "cancelled", "timed_out", "polling_timed_out"];

export const STOP_LABELS = {
	token_capped: "capped: token budget",
	turn_capped: "capped: turn budget",
	loop_capped: "capped: repeated tool-call loop",
};

export function groupThousands(n) {
	return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

// tenths writes a count of tenths as "12.3".
function tenths(t) {
	return `${Math.floor(t / 10)}.${t % 10}`;
}

// tokenLabel follows views.TokenLabel: tenths rounded half up in integers,
// the unit chosen after rounding.
export function tokenLabel(total, terminal) {
	if (total === null || total === undefined) return terminal ? "usage unavailable" : "collecting…";
	if (total < 10_000) return `${groupThousands(total)} tokens`;
	const k = Math.floor((total + 50) / 100);
	if (k < 10_000) return `${tenths(k)}K tokens`;
	return `${tenths(Math.floor((total + 50_000) / 100_000))}M tokens`;
}

// WAITING_TEXT is a running card's status while its model call waits for
// a slot of its model (views.WaitingText).
export const WAITING_TEXT = "Waiting for the model";

// NOT_STARTED reads the error of a task call a limit refused before it
// started (views.NotStartedText).
const NOT_STARTED = /^Not started: (?:one response may start at most (\d+) subagents|this run already started its limit of (\d+) subagents)/;

// notStartedText is the status of a failed card whose task a limit refused
// before it started; "" for any other error.
export function notStartedText(error) {
	const m = NOT_STARTED.exec(error ?? "");
	if (!m) return "";
	return m[1] ? `Not started · limit of ${m[1]} per response` : `Not started · limit of ${m[2]} per run`;
}

export function statusText(status, activity, waiting) {
	switch (status) {
		case "queued":
			return "Queued";
		case "running":
			if (waiting) return WAITING_TEXT;
			return activity || "Running";
		case "completed":
			return "Completed";
		case "failed":
			return "Failed";
		case "cancelled":
			return "Cancelled";
		case "timed_out":
		case "polling_timed_out":
			return "Timed out";
	}
	return "Running";
}

export function stopLabel(reason) {
	return Object.hasOwn(STOP_LABELS, reason) ? STOP_LABELS[reason] : "";
}

export function isTerminal(status) {
	return TERMINAL_STATUSES.includes(status);
}
