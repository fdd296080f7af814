package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

var setupLink = regexp.MustCompile(`open (http://\S+/setup\?token=\S+) to create the admin`)

// TestFirstStartAsAnAttacker runs the real binary on an empty data
// directory, as a DNS-rebinding page and a guesser would try it: the
// set-up link is printed at start, a foreign Host and a missing token are
// refused, the link works once, and a forged X-Forwarded-For does not
// reset the sign-in limit.
func TestFirstStartAsAnAttacker(t *testing.T) {
	p := startHerdEnv(t, t.TempDir())
	var m []string
	for deadline := time.Now().Add(10 * time.Second); m == nil; m = setupLink.FindStringSubmatch(p.log.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no set-up link in the output:\n%s", p.log.String())
		}
		time.Sleep(20 * time.Millisecond) // the line follows "listening" on the same pipe
	}
	link := m[1]
	if !strings.HasPrefix(link, p.url+"/setup?token=") {
		t.Fatalf("set-up link %q is not on %s", link, p.url)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, target, host string, form url.Values, hdr ...string) (int, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, target, body)
		if host != "" {
			req.Host = host
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// A rebinding page: the victim's browser sends the attacker's name.
	if code, _ := send("GET", link, "rebind.evil.example", nil); code != http.StatusMisdirectedRequest {
		t.Errorf("set-up page under a foreign Host: %d, want 421", code)
	}
	if code, _ := send("GET", p.url+"/setup", "", nil); code != http.StatusOK {
		t.Errorf("set-up page without the token: %d", code)
	}
	csrf := ""
	for _, ck := range jar.Cookies(mustParse(p.url)) {
		if ck.Name == "herd_csrf" {
			csrf = ck.Value
		}
	}
	form := url.Values{"email": {"admin@example.com"}, "password": {"tall ocean lantern"}, "password_confirm": {"tall ocean lantern"}, "_csrf": {csrf}}
	if code, _ := send("POST", p.url+"/setup", "", form); code != http.StatusForbidden {
		t.Errorf("set-up without the token: %d, want 403", code)
	}
	form.Set("token", mustParse(link).Query().Get("token"))
	if code, _ := send("POST", p.url+"/setup", "", form); code != http.StatusSeeOther {
		t.Fatalf("set-up with the link's token: %d", code)
	}

	// A guesser from this address: forging X-Forwarded-For on every try
	// does not reset its limit (10 failures a minute by default).
	anon := &http.Client{}
	statuses := map[int]int{}
	for i := range 15 {
		req, _ := http.NewRequest("POST", p.url+"/api/auth/login", strings.NewReader(`{"email":"admin@example.com","password":"wrong guess"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i))
		resp, err := anon.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		statuses[resp.StatusCode]++
	}
	if statuses[http.StatusUnauthorized] > 10 || statuses[http.StatusTooManyRequests] < 5 {
		t.Errorf("15 guesses with forged X-Forwarded-For: %v", statuses)
	}
}

// TestSessionsFollowTheAccountRealBinary: through the real binary, a
// user's open socket closes with 4401 the moment an admin disables them,
// and their cookie is refused after.
func TestSessionsFollowTheAccountRealBinary(t *testing.T) {
	p := startHerd(t, t.TempDir())
	admin := p.signIn()
	admin.call("POST", "/api/admin/users", map[string]string{"email": "bob@example.com", "password": "tall ocean lantern"}, nil)
	var bob struct {
		ID string `json:"id"`
	}
	jar, _ := cookiejar.New(nil)
	b := &client{t: t, base: p.url, http: &http.Client{Jar: jar, Timeout: 10 * time.Second}}
	var login struct {
		CSRF string `json:"csrf_token"`
		User struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	b.call("POST", "/api/auth/login", map[string]string{"email": "bob@example.com", "password": "tall ocean lantern"}, &login)
	b.csrf, bob.ID = login.CSRF, login.User.ID
	var th struct{ ID string }
	b.call("POST", "/api/threads", map[string]string{"title": "watched"}, &th)

	hdr := http.Header{"Origin": {p.url}}
	for _, ck := range jar.Cookies(mustParse(p.url)) {
		hdr.Add("Cookie", ck.Name+"="+ck.Value)
	}
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(p.url, "http")+"/api/threads/"+th.ID+"/stream", hdr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	admin.call("PATCH", "/api/admin/users/"+bob.ID, map[string]bool{"disabled": true}, nil)
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	for {
		_, _, err := conn.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != 4401 {
			t.Fatalf("bob's socket ended with %v, want close 4401", err)
		}
		break
	}
	resp, err := b.http.Get(p.url + "/api/auth/me")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("bob's cookie after being disabled: %d", resp.StatusCode)
	}
}
