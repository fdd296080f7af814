package mcp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The HTTP transport reaches only the configured origin: a request for
// any other scheme or host is refused before it leaves, and the
// configured headers go only to the configured origin.
func TestPinnedRefusesOtherOrigins(t *testing.T) {
	var got http.Header
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	defer hs.Close()
	p := &pinned{scheme: "http", host: strings.TrimPrefix(hs.URL, "http://"), headers: http.Header{"Authorization": {"Bearer secret"}},
		base: http.DefaultTransport.(*http.Transport).Clone(), see: nil}
	defer p.base.CloseIdleConnections()
	for _, u := range []string{"http://169.254.169.254/latest/meta-data", "https://" + p.host + "/mcp", "http://example.com/mcp"} {
		req, _ := http.NewRequest("GET", u, nil)
		if resp, err := p.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "not the configured MCP server address") {
			if resp != nil {
				resp.Body.Close()
			}
			t.Errorf("a request to %s: err %v, want it refused", u, err)
		}
	}
	req, _ := http.NewRequest("GET", hs.URL+"/mcp", nil)
	resp, err := p.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got.Get("Authorization") != "Bearer secret" {
		t.Errorf("the configured origin got headers %v", got)
	}
}
