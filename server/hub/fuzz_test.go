package hub

import (
	"encoding/json"
	"testing"

	"github.com/gorilla/websocket"
)

// FuzzClientFrame: the decoder accepts exactly text frames holding a JSON
// object with a non-empty string type, and never panics.
func FuzzClientFrame(f *testing.F) {
	for _, s := range []string{`{"type":"ping"}`, `{"type":""}`, `{"type":1}`, `not json`, `[]`, `{"type":"ping","x":{"y":[1,2]}}`, "\xff\xfe", `{"type":"ping"}{"type":"ping"}`} {
		f.Add(websocket.TextMessage, []byte(s))
	}
	f.Add(websocket.BinaryMessage, []byte(`{"type":"ping"}`))
	f.Fuzz(func(t *testing.T, mt int, data []byte) {
		err := decodeClientFrame(mt, data)
		var probe struct {
			Type any `json:"type"`
		}
		valid := mt == websocket.TextMessage && json.Unmarshal(data, &probe) == nil
		s, isString := probe.Type.(string)
		valid = valid && isString && s != ""
		if (err == nil) != valid {
			t.Fatalf("decodeClientFrame(%d, %q) = %v; want valid=%v", mt, data, err, valid)
		}
	})
}
