package hub

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestWireFrame writes frames of every length encoding (7, 16 and
// 64 bits, on each boundary) in one Write, as the hub's writer does, and
// reads them back with gorilla's client.
func TestWireFrame(t *testing.T) {
	sizes := []int{0, 1, 125, 126, 127, 0xffff, 0x10000, 0x10001, 300_000}
	payload := func(i int) []byte { return []byte(strings.Repeat(string(rune('a'+i)), sizes[i])) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		var out []byte
		for i, n := range sizes {
			// RFC 6455 §5.2: the length in the fewest bytes, which
			// browsers insist on.
			header := 2
			switch {
			case n > 0xffff:
				header = 10
			case n > 125:
				header = 4
			}
			f := wireFrame(0, func(b []byte) []byte { return append(b, payload(i)...) })
			if got := len(f) - n; got != header {
				t.Errorf("%d bytes: header of %d bytes, want %d", n, got, header)
			}
			out = append(out, f...)
		}
		if _, err := conn.NetConn().Write(out); err != nil {
			t.Error(err)
		}
		_, _, _ = conn.ReadMessage() // until the client hangs up
	}))
	defer srv.Close()
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := range sizes {
		typ, got, err := readFrameErr(conn, 5*time.Second)
		if err != nil {
			t.Fatalf("frame %d (%d bytes): %v", i, sizes[i], err)
		}
		if typ != websocket.TextMessage || string(got) != string(payload(i)) {
			t.Fatalf("frame %d: type %d, %d bytes; want text, %d bytes", i, typ, len(got), sizes[i])
		}
	}
}

func readFrameErr(conn *websocket.Conn, d time.Duration) (int, []byte, error) {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	return conn.ReadMessage()
}
