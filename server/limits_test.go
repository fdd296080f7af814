package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"herd/server/render"
)

// chunked sends body with no declared length, so the client streams it
// in chunks and the server learns its size only by reading.
func (u *user) chunked(method, path, contentType string, body io.Reader) response {
	u.a.t.Helper()
	// A reader of unknown length: the client sends Transfer-Encoding: chunked.
	req, err := http.NewRequest(method, u.a.http.URL+path, io.MultiReader(body))
	if err != nil {
		u.a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-CSRF-Token", u.csrf)
	return u.send(req)
}

func TestChunkedBodyOverTheLimitIs413(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	over := strings.Repeat("y", 1<<20)
	cases := []struct {
		name, path, contentType, body string
		want                          int
		wantCode                      string
	}{
		{"JSON over 1 MB", "/api/threads/" + th + "/runs", "application/json", `{"content":"` + over + `"}`, 413, "payload_too_large"},
		{"form over 1 MB", "/threads/" + th + "/rename", "application/x-www-form-urlencoded", url.Values{"title": {over}}.Encode(), 413, ""},
		{"JSON under the limit", "/api/threads/" + th, "application/json", `{"title":"renamed"}`, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := "POST"
			if strings.HasPrefix(c.path, "/api/threads/") && !strings.HasSuffix(c.path, "/runs") {
				method = "PATCH"
			}
			r := u.chunked(method, c.path, c.contentType, strings.NewReader(c.body))
			if c.want == 0 {
				if r.status >= 300 {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
				return
			}
			if r.status != c.want {
				t.Fatalf("status %d, want %d: %.200s", r.status, c.want, r.body)
			}
			if c.wantCode != "" && r.errorCode() != c.wantCode {
				t.Errorf("error code %q, want %q (body %.200s)", r.errorCode(), c.wantCode, r.body)
			}
		})
	}
	var st struct {
		Messages []json.RawMessage `json:"messages"`
	}
	u.mustJSON("GET", "/api/threads/"+th, nil, http.StatusOK, &st)
	if len(st.Messages) != 0 {
		t.Errorf("the refused body left %d messages", len(st.Messages))
	}
}

func TestPrivateResponsesAreNotStored(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	anon := a.anonymous()
	cases := []struct {
		name string
		who  *user
		path string
		want string
	}{
		{"thread list JSON", u, "/api/threads", "no-store"},
		{"thread JSON", u, "/api/threads/" + th, "no-store"},
		{"me", u, "/api/auth/me", "no-store"},
		{"API error", u, "/api/threads/00000000-0000-4000-8000-000000000001", "no-store"},
		{"unknown API route", u, "/api/nothing", "no-store"},
		{"signed out", anon, "/api/threads", "no-store"},
		{"thread page", u, "/threads/" + th, "no-store"},
		{"thread list page", u, "/", "no-store"},
		{"login page", anon, "/login", "no-store"},
		{"a hashed static file stays cacheable", anon, a.srv.assets["app.css"], "public, max-age=31536000, immutable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.who.do("GET", c.path, nil)
			if got := r.header.Get("Cache-Control"); got != c.want {
				t.Errorf("GET %s: Cache-Control %q, want %q (status %d)", c.path, got, c.want, r.status)
			}
		})
	}
	r := anon.do("POST", "/api/auth/login", map[string]string{"email": "ann@example.com", "password": "password123"})
	if got := r.header.Get("Cache-Control"); r.status != http.StatusOK || got != "no-store" {
		t.Errorf("login: status %d, Cache-Control %q, want 200 and no-store", r.status, got)
	}
}

func TestMetricsNeedTheTokenOnTheMainAddress(t *testing.T) {
	a := newApp(t)
	if r := a.anonymous().do("GET", "/metrics", nil); r.status != http.StatusNotFound {
		t.Errorf("/metrics on the main handler without a token configured: %d, want 404", r.status)
	}
	const token = "0123456789abcdef-metrics"
	srv, err := New(Options{Store: a.store, Runtime: a.rt, Hub: a.hub, Settings: a.settings, Console: a.console, Markdown: render.NewMarkdown(), Metrics: a.metrics, MetricsToken: token, PublicURL: "https://herd.example.com", Files: a.opts.Files})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []struct {
		name string
		h    http.Handler
	}{{"main handler", srv}, {"metrics address", a.metrics.Handler(token)}} {
		for _, c := range []struct {
			auth string
			want int
		}{
			{"", http.StatusUnauthorized},
			{"Bearer wrong-token-wrong-token", http.StatusUnauthorized},
			{"Basic " + token, http.StatusUnauthorized},
			{"Bearer " + token, http.StatusOK},
		} {
			// A name other than loopback: the token is what protects.
			req := httptest.NewRequest("GET", "http://herd.example.com/metrics", nil)
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			rec := httptest.NewRecorder()
			h.h.ServeHTTP(rec, req)
			if rec.Code != c.want {
				t.Errorf("%s, Authorization %q: %d, want %d", h.name, c.auth, rec.Code, c.want)
			}
			if got := strings.Contains(rec.Body.String(), "herd_active_runs"); got != (c.want == http.StatusOK) {
				t.Errorf("%s, Authorization %q: figures shown = %v", h.name, c.auth, got)
			}
		}
	}
}

func TestMetricsWithoutATokenAnswerLoopbackHostsOnly(t *testing.T) {
	a := newApp(t)
	for _, c := range []struct {
		host string
		want int
	}{
		{"127.0.0.1:9180", http.StatusOK},
		{"localhost:9180", http.StatusOK},
		{"[::1]:9180", http.StatusOK},
		{"127.0.0.2", http.StatusOK},
		{"rebound.example:9180", http.StatusMisdirectedRequest},
		{"192.168.1.20:9180", http.StatusMisdirectedRequest},
		{"", http.StatusMisdirectedRequest},
	} {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Host = c.host
		rec := httptest.NewRecorder()
		a.metrics.Handler("").ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("Host %q: %d, want %d", c.host, rec.Code, c.want)
		}
	}
}
