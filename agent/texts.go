package agent

import (
	"fmt"
	"strings"
	"time"
)

// The errors of a task's outcome the public contract spells out, which
// the lead reads in the ToolMessage (Outcome.toolContent);
// contracts/tool_message_contract.json pins each. They are texts, not Go
// error values: "Execution" keeps its capital E.

// executionTimedOut is the error of a subagent its execution deadline
// (timeout_seconds, from admission) ended.
func executionTimedOut(timeout time.Duration) string {
	return fmt.Sprintf("Execution timed out after %d seconds", int(timeout.Seconds()))
}

// pollingTimedOut is the error of a task whose subagent reached no
// terminal state by its timeout plus the safety margin.
func pollingTimedOut(timeout time.Duration, marginSeconds int) string {
	t := int(timeout.Seconds())
	return fmt.Sprintf("Task polling timed out: no terminal state within %d s (execution timeout %d s + %d s safety margin); the subagent was cancelled.",
		t+marginSeconds, t, marginSeconds)
}

// unknownSubagentType is the error of a task call naming a subagent type
// that is not configured; nothing starts.
func unknownSubagentType(name string, available []string) string {
	return fmt.Sprintf("Unknown subagent type '%s'. Available: %s", name, strings.Join(available, ", "))
}
