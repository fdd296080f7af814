package cluster

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"herd/server/hub"
)

// What the cluster's tests read of the hub's clients, as server's own
// tests do (server's ws_test.go).

// maxTitle is the longest title, in runes, the server keeps (server's
// maxTitle): a renamed frame's title is at most this long.
const maxTitle = 200

// sessionCredential names a session's sockets as server/hub's sockets.go does.
func sessionCredential(id string) string { return "session:" + id }

type wsFrame struct {
	Seq      *int64          `json:"seq"`
	Type     string          `json:"type"`
	ThreadID string          `json:"thread_id"`
	RunID    string          `json:"run_id"`
	Data     json.RawMessage `json:"data"`
}

func readFrame(conn *websocket.Conn, timeout time.Duration) (wsFrame, error) {
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	var f wsFrame
	_, b, err := conn.ReadMessage()
	if err != nil {
		return f, err
	}
	return f, json.Unmarshal(b, &f)
}

// collect reads persisted frames until it has seen seq want, returning
// every seq in arrival order.
func collect(conn *websocket.Conn, want int64, timeout time.Duration) ([]int64, error) {
	var seqs []int64
	deadline := time.Now().Add(timeout)
	for {
		f, err := readFrame(conn, time.Until(deadline))
		if err != nil {
			return seqs, err
		}
		if f.Seq == nil {
			continue
		}
		seqs = append(seqs, *f.Seq)
		if *f.Seq >= want {
			return seqs, nil
		}
	}
}

func waitClients(t testing.TB, h *hub.Hub, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for h.Clients() != n {
		if time.Now().After(deadline) {
			t.Fatalf("hub has %d clients, want %d", h.Clients(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitFor waits until cond holds, changed on other goroutines with
// nothing to signal a test.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
