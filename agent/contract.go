package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
)

// Subagent statuses. Queued and running are live states; the rest are the
// terminal statuses of contracts/subagent_status_contract.json.
const (
	StatusQueued          = "queued"
	StatusRunning         = "running"
	StatusCompleted       = "completed"
	StatusFailed          = "failed"
	StatusCancelled       = "cancelled"
	StatusTimedOut        = "timed_out"
	StatusPollingTimedOut = "polling_timed_out"
)

// Stop reasons for guardrail caps (docs/DESIGN.md §5).
const (
	stopTokenCapped = "token_capped"
	stopTurnCapped  = "turn_capped"
	stopLoopCapped  = "loop_capped"
)

// TerminalStatuses lists the values valid as subagent_status.
func TerminalStatuses() []string {
	return []string{StatusCompleted, StatusFailed, StatusCancelled, StatusTimedOut, StatusPollingTimedOut}
}

// stopReasons lists the values valid as subagent_stop_reason.
func stopReasons() []string {
	return []string{stopTokenCapped, stopTurnCapped, stopLoopCapped, stopBudget}
}

// isTerminal reports whether status is one of TerminalStatuses.
func isTerminal(status string) bool {
	switch status {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusTimedOut, StatusPollingTimedOut:
		return true
	}
	return false
}

func validStopReason(r string) bool { return slices.Contains(stopReasons(), r) }

// capLabel is how a stop reason reads in the ToolMessage and on the card.
func capLabel(reason string) string {
	switch reason {
	case stopTokenCapped:
		return "token budget"
	case stopTurnCapped:
		return "turn budget"
	case stopLoopCapped:
		return "repeated tool-call loop"
	case stopBudget:
		return "budget used up"
	}
	return ""
}

// Bounds (docs/DESIGN.md §8, §7).
const (
	metadataTextCap = 2000
	eventTextCap    = 8192
)

const boundMarker = "\n...\n"

// bound trims s and, when it is longer than limit characters, keeps the
// first ⌊2·limit/3⌋ characters, the marker "\n...\n" and the last
// characters, exactly limit in all. When limit leaves no room for the
// marker, it keeps the first limit characters.
func bound(s string, limit int) string {
	s = strings.TrimSpace(s)
	if limit <= 0 {
		return ""
	}
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s
	}
	r := []rune(s)
	head := 2 * limit / 3
	tail := limit - head - len(boundMarker)
	if tail < 0 {
		return string(r[:limit])
	}
	return string(r[:head]) + boundMarker + string(r[n-tail:])
}

// cut shortens s to limit characters, reporting whether it did.
func cut(s string, limit int) (string, bool) {
	if len(s) <= limit || utf8.RuneCountInString(s) <= limit {
		return s, false
	}
	return string([]rune(s)[:limit]), true
}

// TokenUsage is a cumulative usage snapshot as it travels on every surface
// (ToolMessage metadata, events, frames).
type TokenUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

// normalizeUsage is the one usage validator for every surface: v must be a
// map whose three keys are all present, integers (not booleans, not
// floats) and ≥ 0; otherwise the usage is absent (nil). Extra keys are
// dropped. JSON must be decoded with UseNumber for integers to survive.
func normalizeUsage(v any) *TokenUsage {
	var m map[string]any
	switch t := v.(type) {
	case map[string]any:
		m = t
	default:
		return nil
	}
	var out [3]int64
	for i, k := range [3]string{"input_tokens", "output_tokens", "total_tokens"} {
		n, ok := wholeNumber(m[k])
		if !ok || n < 0 {
			return nil
		}
		out[i] = n
	}
	return &TokenUsage{InputTokens: out[0], OutputTokens: out[1], TotalTokens: out[2]}
}

// wholeNumber accepts integer values only: Go integers and integer JSON
// literals. Floats (even 3.0) and booleans are refused.
func wholeNumber(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case json.Number:
		if strings.ContainsAny(string(n), ".eE") {
			return 0, false
		}
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

// UnmarshalJSON reads a snapshot as strictly as normalizeUsage: all three
// counts present, integers (not 3.0, not 1e3), ≥ 0; other names are
// ignored. It decodes straight into the counts: it runs for every stored
// step and end an instance reads back (decodeEvent).
func (u *TokenUsage) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimLeft(b, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		return errors.New("usage: want an object")
	}
	var w struct {
		In    *int64 `json:"input_tokens"`
		Out   *int64 `json:"output_tokens"`
		Total *int64 `json:"total_tokens"`
	}
	err := jsonv2.Unmarshal(b, &w, lenient)
	if err != nil || w.In == nil || w.Out == nil || w.Total == nil || *w.In < 0 || *w.Out < 0 || *w.Total < 0 {
		return errors.New("usage: want input_tokens, output_tokens and total_tokens, integers ≥ 0")
	}
	*u = TokenUsage{InputTokens: *w.In, OutputTokens: *w.Out, TotalTokens: *w.Total}
	return nil
}

// valid reports whether u is a snapshot normalizeUsage keeps.
func (u *TokenUsage) valid() bool {
	return u != nil && u.InputTokens >= 0 && u.OutputTokens >= 0 && u.TotalTokens >= 0
}

func (u *TokenUsage) asMap() map[string]any {
	if u == nil {
		return nil
	}
	return map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens, "total_tokens": u.TotalTokens}
}

// Outcome is the terminal state of one subagent execution.
type Outcome struct {
	Status     string
	StopReason string
	Result     string // the full result, for the lead
	Error      string
	ModelName  string
	Usage      *TokenUsage
	Refusal    *Refusal // the limit that refused it before it started (failed)
}

// errContract marks a status or stop reason outside the contract: a
// programming error caught at the producer, never written.
var errContract = errors.New("outside the subagent status contract")

// ToolMessage builds the terminal ToolMessage's content (what the lead LLM
// reads) and additional_kwargs (the single source for reload), docs/DESIGN.md §8.
func (o Outcome) ToolMessage() (content string, kwargs map[string]any, err error) {
	content, k, err := o.toolMessage()
	if err != nil {
		return "", nil, err
	}
	return content, k.asMap(), nil
}

// toolMessage is ToolMessage with typed metadata, which encodes without
// building a map.
func (o Outcome) toolMessage() (string, taskKwargs, error) {
	content, err := o.toolContent()
	if err != nil {
		return "", taskKwargs{}, err
	}
	return content, o.kwargs(), nil
}

// toolContent is the ToolMessage's content, once the outcome is checked
// against the contract.
func (o Outcome) toolContent() (string, error) {
	if !isTerminal(o.Status) {
		return "", fmt.Errorf("%w: status %q", errContract, o.Status)
	}
	if o.StopReason != "" && !validStopReason(o.StopReason) {
		return "", fmt.Errorf("%w: stop reason %q", errContract, o.StopReason)
	}
	if o.Refusal != nil && (o.Status != StatusFailed || !o.Refusal.valid()) {
		return "", fmt.Errorf("%w: refusal %+v of a %s task", errContract, *o.Refusal, o.Status)
	}
	errText := strings.TrimSpace(o.Error)
	phrase := statusPhrase(o.Status, o.StopReason)
	switch {
	case o.Status == StatusCompleted:
		return phrase + resultMark + strings.TrimSpace(o.Result), nil
	case errText == "":
		return phrase + ".", nil
	case o.Status == StatusPollingTimedOut:
		return errText, nil // the safety net's error says it all
	}
	return phrase + errorMark + errText, nil
}

// What separates a ToolMessage's status phrase from its result or error.
const (
	resultMark = ". Result: "
	errorMark  = ". Error: "
)

// statusPhrase is how a ToolMessage's content starts for a status and
// stop reason: "Task Succeeded (capped: token budget)", "Task failed",
// "Task cancelled by user", "Task timed out", "Task polling timed out".
func statusPhrase(status, stopReason string) string {
	capped := ""
	if stopReason != "" {
		capped = " (capped: " + capLabel(stopReason) + ")"
	}
	switch status {
	case StatusCompleted:
		return "Task Succeeded" + capped
	case StatusFailed:
		return "Task failed" + capped
	case StatusCancelled:
		return "Task cancelled by user"
	case StatusTimedOut:
		return "Task timed out"
	}
	return "Task polling timed out"
}

// textAfterPhrase is the full result (completed) or error in content:
// what follows the head toolContent writes for status, with or without a
// cap, since a legacy status's content may lack its cap; ok is false when
// content has no such head.
func textAfterPhrase(content, status string) (text string, ok bool) {
	mark := errorMark
	if status == StatusCompleted {
		mark = resultMark
	}
	for _, reason := range append([]string{""}, stopReasons()...) {
		if text, ok := strings.CutPrefix(content, statusPhrase(status, reason)+mark); ok {
			return text, true
		}
	}
	return "", false
}

// taskKwargs is a task ToolMessage's additional_kwargs. Its fields are in
// the order encoding/json writes a map's keys (sorted), so it encodes to
// the very bytes the map of ToolMessage does; omitempty leaves out what
// the map leaves out.
type taskKwargs struct {
	Error        string      `json:"subagent_error,omitempty"`
	ModelName    string      `json:"subagent_model_name,omitempty"`
	Refusal      *Refusal    `json:"subagent_refusal,omitempty"`
	ResultBrief  string      `json:"subagent_result_brief,omitempty"`
	ResultSHA256 string      `json:"subagent_result_sha256,omitempty"`
	Status       string      `json:"subagent_status"`
	StopReason   string      `json:"subagent_stop_reason,omitempty"`
	Usage        *TokenUsage `json:"subagent_token_usage,omitempty"`
}

// kwargs is the metadata of a checked outcome.
func (o Outcome) kwargs() taskKwargs {
	k := taskKwargs{Status: o.Status, StopReason: o.StopReason, ModelName: strings.TrimSpace(o.ModelName), Refusal: o.Refusal}
	if o.Usage.valid() {
		k.Usage = o.Usage // read, never changed: a snapshot is the collector's copy
	}
	result := strings.TrimSpace(o.Result)
	if errText := strings.TrimSpace(o.Error); o.Status != StatusCompleted && errText != "" {
		k.Error = bound(errText, metadataTextCap)
	}
	if o.Status == StatusCompleted && result != "" {
		k.ResultBrief = bound(result, metadataTextCap)
		sum := sha256.Sum256([]byte(o.Result))
		var buf [2 * sha256.Size]byte
		k.ResultSHA256 = string(hex.AppendEncode(buf[:0], sum[:]))
	}
	return k
}

// asMap is k as ToolMessage returns it.
func (k taskKwargs) asMap() map[string]any {
	m := map[string]any{"subagent_status": k.Status}
	for key, v := range map[string]string{
		"subagent_stop_reason":   k.StopReason,
		"subagent_error":         k.Error,
		"subagent_result_brief":  k.ResultBrief,
		"subagent_result_sha256": k.ResultSHA256,
		"subagent_model_name":    k.ModelName,
	} {
		if v != "" {
			m[key] = v
		}
	}
	if k.Usage != nil {
		m["subagent_token_usage"] = k.Usage.asMap()
	}
	if k.Refusal != nil {
		m["subagent_refusal"] = k.Refusal.asMap()
	}
	return m
}

// taskMetadata is what readMetadata recovers from a ToolMessage.
type taskMetadata struct {
	Status       string
	StopReason   string
	Error        string
	ResultBrief  string
	ResultSHA256 string
	ModelName    string
	Usage        *TokenUsage
	Refusal      *Refusal
}

// readMetadata reads a ToolMessage's additional_kwargs tolerantly: legacy
// status max_turns_reached reads as completed or failed with turn_capped;
// an unknown or missing status means no metadata (ok false); malformed
// usage, unknown stop reasons, bad hashes and a refusal of anything but a
// failed task are dropped.
func readMetadata(kwargs map[string]any) (md taskMetadata, ok bool) {
	str := func(k string) string {
		s, _ := kwargs[k].(string)
		return s
	}
	md = taskMetadata{
		StopReason:   str("subagent_stop_reason"),
		Error:        str("subagent_error"),
		ResultBrief:  str("subagent_result_brief"),
		ResultSHA256: str("subagent_result_sha256"),
		ModelName:    strings.TrimSpace(str("subagent_model_name")),
		Usage:        normalizeUsage(kwargs["subagent_token_usage"]),
		Refusal:      readRefusal(kwargs["subagent_refusal"]),
	}
	status := str("subagent_status")
	switch {
	case status == "max_turns_reached":
		md.StopReason = stopTurnCapped
		md.Status = StatusFailed
		if strings.TrimSpace(md.ResultBrief) != "" {
			md.Status = StatusCompleted
		}
	case isTerminal(status):
		md.Status = status
	default:
		return taskMetadata{}, false
	}
	if !validStopReason(md.StopReason) {
		md.StopReason = ""
	}
	if !isSHA256Hex(md.ResultSHA256) {
		md.ResultSHA256 = ""
	}
	if md.Status != StatusFailed {
		md.Refusal = nil
	}
	return md, true
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// legacyStatus reads a terminal status from a ToolMessage's text, for
// rows without usable metadata (written before it, or with a status
// outside the contract): the one place the status is read from wording
// (static/metadata.js legacyStatus is its twin). ok is false when the
// text says nothing.
func legacyStatus(content string) (status string, ok bool) {
	c := strings.TrimSpace(content)
	switch {
	case strings.HasPrefix(c, "Task Succeeded"):
		return StatusCompleted, true
	case strings.HasPrefix(c, "Task failed"):
		return StatusFailed, true
	case strings.HasPrefix(c, "Task cancelled"):
		return StatusCancelled, true
	case strings.HasPrefix(c, "Task timed out"):
		return StatusTimedOut, true
	}
	return "", false
}
