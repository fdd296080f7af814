package server

import (
	"fmt"
	"os"
	"testing"
)

// TestBrowserCardMergeContract runs every case of
// contracts/card_merge_contract.json through static/merge.js in Chromium:
// the frames of a case go to the merge function their type names, in
// order, as cards.js routes them, and each card must end in the state the
// case expects. agent/cardmerge_test.go runs the same cases through
// agent.ProjectCards.
func TestBrowserCardMergeContract(t *testing.T) {
	_, b := openEmptyThread(t, "merge contract")
	contract, err := os.ReadFile("../contracts/card_merge_contract.json")
	if err != nil {
		t.Fatal(err)
	}
	problems := evalAwait[[]string](b, fmt.Sprintf(`(async (contract) => {
		const m = await import("/static/merge.js");
		const problems = [];
		// The fields both sides hold, in one order; usage is kept as its
		// total, result_html by the browser only.
		const state = (c) => JSON.stringify([c.runID, c.taskID, c.executionID, c.description, c.prompt, c.subagentType,
			c.status, c.activity, c.waiting, c.modelName, c.total, c.stopReason, c.result, c.error, c.version, c.lastSeq, c.steps, c.resultHTML,
			c.queuedAt, c.startedAt, c.endedAt, c.files, c.continues, c.refusal]);
		const at = (s) => (s ? Date.parse(s) : null);
		const wanted = (w) => JSON.stringify([w.run_id, w.task_id, w.execution_id, w.description, w.prompt, w.subagent_type,
			w.status, w.activity, w.waiting === true, w.model_name, w.usage?.total_tokens ?? null, w.stop_reason, w.result, w.error, w.version, w.last_seq, w.steps, w.result_html ?? null,
			at(w.queued_at), at(w.started_at), at(w.ended_at), w.files ?? [], w.continues ?? "", w.refusal ?? null]);
		for (const tc of contract.cases) {
			// One card per item, in its first call's place; a call that
			// continues a held one finds its card (cards.js aliases).
			const cards = new Map();
			const aliases = new Map();
			const key = (run, task) => run + "\u0000" + task;
			const card = (run, task) => cards.get(key(run, task)) ?? aliases.get(key(run, task));
			for (const f of tc.frames) {
				const d = f.data ?? {};
				if (f.type === "message" && d.type === "ai") {
					const links = m.taskContinues(d);
					for (const call of d.tool_calls ?? []) {
						if (call.name !== "task") continue;
						const held = card(d.run_id, links.get(call.id) ?? "");
						if (held) {
							m.continueCard(held, call.id, call.args);
							aliases.set(key(d.run_id, call.id), held);
							continue;
						}
						const c = m.newCard(d.run_id, call.id);
						m.applyTaskCall(c, call.args);
						cards.set(key(d.run_id, call.id), c);
					}
				} else if (f.type === "message" && d.type === "tool" && d.name === "task") {
					m.applyTaskResult(card(d.run_id, d.tool_call_id), d);
				} else if (f.type === "workspace") {
					m.applyWorkspaceFrame(d, (task) => card(d.run_id || f.run_id, task));
				} else if (f.type === "run.resumed") {
					// The page hands a run's resumption to no card (thread.js).
				} else if (f.type === "run.end") {
					for (const c of cards.values()) if (c.runID === (d.run_id ?? f.run_id)) m.failUnfinished(c);
				} else if (m.TASK_FRAME_TYPES.includes(f.type)) {
					m.applyTaskFrame(card(d.run_id || f.run_id, d.task_id), f.type, d, f.seq, m.instant(f.created_at));
				} else {
					problems.push(tc.name + ": frame " + f.seq + " has a type the contract does not use: " + f.type);
				}
			}
			const got = [...cards.values()].map(state);
			const want = tc.want.map(wanted);
			if (JSON.stringify(got) !== JSON.stringify(want)) problems.push(tc.name + ":\n  got  " + got.join("\n       ") + "\n  want " + want.join("\n       "));
		}
		return problems;
	})(%s)`, contract))
	for _, p := range problems {
		t.Error(p)
	}
}
