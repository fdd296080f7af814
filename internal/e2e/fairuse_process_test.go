package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// TestFairUseThroughTheBinary: the limits' keys reach the server. With one
// socket per account, two new threads and three stream connects a minute,
// the binary refuses the next of each with 429 and its own code.
func TestFairUseThroughTheBinary(t *testing.T) {
	t.Setenv("HERD_SERVER_MAX_SOCKETS_PER_USER", "1")
	t.Setenv("HERD_AUTH_THREADS_PER_MINUTE", "2")
	t.Setenv("HERD_SERVER_WS_CONNECTS_PER_MINUTE", "3")
	p := startHerd(t, t.TempDir())
	c := p.signIn()
	var th struct{ ID string }
	c.call("POST", "/api/threads", map[string]string{"title": "one"}, &th)
	c.call("POST", "/api/threads", map[string]string{"title": "two"}, nil)
	req, _ := http.NewRequest("POST", p.url+"/api/threads", strings.NewReader(`{"title":"three"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", c.csrf)
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if code := errorCode(resp); resp.StatusCode != http.StatusTooManyRequests || code != "rate_limited" {
		t.Errorf("third thread in a minute: %d %s, want 429 rate_limited", resp.StatusCode, code)
	}

	var tok struct{ Token string }
	c.call("POST", "/api/tokens", map[string]string{"name": "cli"}, &tok)
	dial := func() (*websocket.Conn, *http.Response, error) {
		hdr := http.Header{"Authorization": {"Bearer " + tok.Token}}
		return websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(p.url, "http")+"/api/threads/"+th.ID+"/stream", hdr)
	}
	conn, resp, err := dial()
	if err != nil {
		t.Fatalf("first socket: %v", err)
	}
	resp.Body.Close()
	defer conn.Close()
	for _, want := range []string{"too_many_sockets", "too_many_sockets", "rate_limited"} {
		_, resp, err := dial()
		if resp == nil {
			t.Fatalf("dial: %v", err)
		}
		if code := errorCode(resp); resp.StatusCode != http.StatusTooManyRequests || code != want {
			t.Errorf("refused socket: %d %s, want 429 %s", resp.StatusCode, code, want)
		}
	}
}

// errorCode reads the error code of a JSON error answer and closes it.
func errorCode(resp *http.Response) string {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	return e.Error.Code
}
