package event

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"herd/models"
)

// TestDecodeRoundTrip: every frame of the set comes back from its type
// and JSON as it went; a type outside the set is refused.
func TestDecodeRoundTrip(t *testing.T) {
	frames := []Frame{
		Delta{MessageID: "m", Text: "a <b>"}, Reasoning{MessageID: "m", Text: "r"},
		TaskProgress{TaskID: "k", Text: "1/3"}, ToolProgress{CallID: "c", Text: "2/3"},
		ToolLog{Lines: []LogLine{{Level: "info", Text: "x"}}, TaskID: "k", CallID: "c"},
		Renamed{Title: "t"}, TitleUsage{Call: models.UsageEntry{CallID: "c", InputTokens: 3}},
		Settings{TokenUsage: true},
	}
	if len(frames) != len(decoders) {
		t.Fatalf("%d frames tested, %d in the set", len(frames), len(decoders))
	}
	for _, f := range frames {
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(f.FrameType(), b)
		if err != nil || !reflect.DeepEqual(got, f) {
			t.Errorf("%s: got %#v, %v; want %#v", f.FrameType(), got, err, f)
		}
	}
	for _, typ := range []string{"ai_html", "message", "ping", ""} {
		if _, err := Decode(typ, []byte(`{}`)); !errors.Is(err, ErrUnknown) {
			t.Errorf("Decode(%q): %v, want ErrUnknown", typ, err)
		}
	}
}
