package agent

import (
	"encoding/json"
	"slices"
	"testing"
)

// FuzzNormalizeUsage: any JSON value normalizes to absent or to three
// non-negative integers, and normalizing the result changes nothing.
func FuzzNormalizeUsage(f *testing.F) {
	for _, s := range []string{
		`{"input_tokens":1,"output_tokens":2,"total_tokens":3}`,
		`{"input_tokens":1.0,"output_tokens":2,"total_tokens":3}`,
		`{"input_tokens":true,"output_tokens":2,"total_tokens":3}`,
		`{"input_tokens":-1,"output_tokens":2,"total_tokens":3}`,
		`{"input_tokens":1,"output_tokens":2}`,
		`{"input_tokens":1e3,"output_tokens":2,"total_tokens":3,"x":[1]}`,
		`[1,2,3]`, `null`, `"usage"`, `{"input_tokens":99999999999999999999,"output_tokens":0,"total_tokens":0}`,
	} {
		f.Add([]byte(`{"u":` + s + `}`))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeContent(b)
		if err != nil {
			return
		}
		u := normalizeUsage(m["u"])
		if u == nil {
			return
		}
		if u.InputTokens < 0 || u.OutputTokens < 0 || u.TotalTokens < 0 {
			t.Fatalf("negative usage %+v from %s", u, b)
		}
		again := normalizeUsage(u.asMap())
		if again == nil || *again != *u {
			t.Fatalf("not idempotent: %+v → %+v", u, again)
		}
	})
}

// FuzzReadMetadata: whatever a row holds, the reader returns only values
// of the contract, never panics.
func FuzzReadMetadata(f *testing.F) {
	for _, s := range []string{
		`{"subagent_status":"completed","subagent_result_brief":"r","subagent_result_sha256":"` + sha("x") + `"}`,
		`{"subagent_status":"max_turns_reached","subagent_result_brief":"partial"}`,
		`{"subagent_status":"max_turns_reached"}`,
		`{"subagent_status":"exploded"}`,
		`{"subagent_status":"failed","subagent_stop_reason":"loop_capped","subagent_error":"e","subagent_token_usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`,
		`{"subagent_status":"cancelled","subagent_token_usage":"x","subagent_model_name":7}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		kw, err := DecodeContent(b)
		if err != nil {
			return
		}
		md, ok := readMetadata(kw)
		if !ok {
			if md != (taskMetadata{}) {
				t.Fatalf("no metadata but %+v", md)
			}
			return
		}
		if !isTerminal(md.Status) {
			t.Fatalf("status %q outside the contract", md.Status)
		}
		if md.StopReason != "" && !slices.Contains(stopReasons(), md.StopReason) {
			t.Fatalf("stop reason %q outside the contract", md.StopReason)
		}
		if md.ResultSHA256 != "" && !isSHA256Hex(md.ResultSHA256) {
			t.Fatalf("bad sha kept: %q", md.ResultSHA256)
		}
		if md.Usage != nil && (md.Usage.InputTokens < 0 || md.Usage.TotalTokens < 0) {
			t.Fatalf("negative usage kept")
		}
	})
}

// FuzzValidateEvent: an event the strict decoder accepts survives a JSON
// round trip of its payload, is accepted again, and becomes a frame (full
// and redacted) without panicking.
func FuzzValidateEvent(f *testing.F) {
	types := []string{eventRunStart, eventRunEnd, eventSubagentQueued, eventSubagentStart, eventSubagentStep, eventSubagentEnd}
	for typ, samples := range sampleEvents() {
		for _, s := range samples {
			b, _ := json.Marshal(s)
			f.Add(uint8(slices.Index(types, typ)), b)
		}
	}
	f.Add(uint8(4), []byte(`{"task_id":"t","execution_id":"e","run_id":"r","version":1,"message_index":true,"kind":"ai","text":"","truncated":false}`))
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		typ := types[int(which)%len(types)]
		ev, err := decodeEvent(typ, b)
		if err != nil {
			return
		}
		again, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeEvent(typ, again); err != nil {
			t.Fatalf("accepted %s, refused after a round trip (%s): %v", b, again, err)
		}
		for _, redact := range []bool{false, true} {
			if ft, data := ev.Frame(FrameOptions{Redact: redact}); ft == "" || data == nil {
				t.Fatal("no frame for a valid event")
			}
			if _, err := json.Marshal(ev); err != nil {
				t.Fatal(err)
			}
		}
	})
}
