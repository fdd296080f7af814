package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
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
	_, page := send("GET", link, "", nil)
	form := url.Values{"email": {"admin@example.com"}, "password": {"tall ocean lantern"}, "password_confirm": {"tall ocean lantern"}, "_csrf": {formToken(t, page)}}
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

var formTokenField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// formToken is the CSRF token of the form on page.
func formToken(t *testing.T, page string) string {
	t.Helper()
	m := formTokenField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no form token on the page:\n%s", page)
	}
	return m[1]
}

// TestPreSignInCSRFBoundRealBinary: a signed-out form's token fetched in
// one browser (the attacker's cookie jar) is refused in another (the
// victim's) on the set-up, sign-in and sign-up forms, and so is the
// attacker's cookie planted in the victim's browser with its token when
// the attacker's page posts it; the victim's own works.
func TestPreSignInCSRFBoundRealBinary(t *testing.T) {
	p := startHerdEnv(t, t.TempDir(), "HERD_AUTH_ALLOW_SIGNUP=true")
	var m []string
	for deadline := time.Now().Add(10 * time.Second); m == nil; m = setupLink.FindStringSubmatch(p.log.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no set-up link in the output:\n%s", p.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	link := m[1]
	browser := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	tokenOn := func(c *http.Client, page string) string {
		resp, err := c.Get(page)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return formToken(t, string(b))
	}
	const pw = "tall ocean lantern"
	for _, f := range []struct {
		page, action string
		fields       url.Values
	}{
		{link, "/setup", url.Values{"token": {mustParse(link).Query().Get("token")}, "email": {"admin@example.com"}, "password": {pw}, "password_confirm": {pw}}},
		{p.url + "/login", "/login", url.Values{"email": {"admin@example.com"}, "password": {pw}}},
		{p.url + "/signup", "/signup", url.Values{"email": {"new@example.com"}, "password": {pw}, "password_confirm": {pw}}},
	} {
		attacker, victim, planted := browser(), browser(), browser()
		stolen, own := tokenOn(attacker, f.page), tokenOn(victim, f.page)
		// An attacker who can set cookies for the site plants their own
		// and posts from their page.
		planted.Jar.SetCookies(mustParse(p.url), attacker.Jar.Cookies(mustParse(p.url)))
		for _, c := range []struct {
			name   string
			client *http.Client
			token  string
			origin string
			want   int
		}{
			{"the attacker's token", victim, stolen, "", http.StatusForbidden},
			{"a planted cookie and its token, from the attacker's page", planted, stolen, "http://evil.example", http.StatusForbidden},
			{"the victim's own token", victim, own, p.url, http.StatusSeeOther},
		} {
			form := url.Values{"_csrf": {c.token}}
			for k, v := range f.fields {
				form[k] = v
			}
			req, _ := http.NewRequest("POST", p.url+f.action, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if c.origin != "" {
				req.Header.Set("Origin", c.origin)
			}
			resp, err := c.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("%s with %s: %d, want %d", f.action, c.name, resp.StatusCode, c.want)
			}
		}
	}
	stopHerd(t, p)
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

// burstClient is one client of a burst: it sends its request, and sends
// it again for as long as herd answers that another password check is
// under way, as an attacker's script would, until it gets another answer.
func burstClient(t *testing.T, cl *http.Client, req func() *http.Request) (int, string) {
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := cl.Do(req())
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), "under way") || time.Now().After(deadline) {
			return resp.StatusCode, string(b)
		}
	}
}

// burst runs n clients at once and counts their final answers by status.
func burst(t *testing.T, n int, cl func(i int) *http.Client, req func(i int) *http.Request) map[int]int {
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			code, _ := burstClient(t, cl(i), func() *http.Request { return req(i) })
			mu.Lock()
			counts[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return counts
}

// jsonRequest is a JSON request from the client address from (herd trusts
// the loopback proxy that says so).
func jsonRequest(method, url, from, csrf string, body any) *http.Request {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", from)
	if csrf != "" {
		req.Header.Set("X-CSRF-Token", csrf)
	}
	return req
}

// allowance is how many checks a limit of perMin a minute allows in a
// burst that lasted d: the bucket's perMin, and what it refilled.
func allowance(perMin int, d time.Duration) int {
	return perMin + int(d.Minutes()*float64(perMin))
}

// TestPasswordBurstsRealBinary: 30 wrong passwords sent at once, each
// sent again while herd answers that another check is under way, get at
// most the limit's checks (auth.login_attempts_per_minute, 10) — on the
// sign-in and on the password change, whose current password counts
// against the same address — where before every one of the 30 was
// hashed. Counted by herd_password_checks_total.
func TestPasswordBurstsRealBinary(t *testing.T) {
	p := startHerdWith(t, t.TempDir(), "HERD_SERVER_TRUSTED_PROXIES=[127.0.0.1/32]")
	p.signIn().call("POST", "/api/admin/users", map[string]string{"email": "ann@example.com", "password": "tall ocean lantern"}, nil)
	const signIns, changes = `herd_password_checks_total{kind="sign_in"}`, `herd_password_checks_total{kind="password_change"}`
	anon := func(int) *http.Client { return &http.Client{Timeout: 90 * time.Second} }

	before, start := p.metric(signIns), time.Now()
	counts := burst(t, 30, anon, func(i int) *http.Request {
		email := fmt.Sprintf("guess%d@example.com", i)
		if i == 0 {
			email = "ann@example.com"
		}
		return jsonRequest("POST", p.url+"/api/auth/login", "198.51.100.1", "", map[string]string{"email": email, "password": fmt.Sprintf("wrong guess %d", i)})
	})
	checked, most := int(p.metric(signIns)-before), allowance(10, time.Since(start))
	t.Logf("sign-in: 30 wrong passwords at once: %d checked in %v, answers %v", checked, time.Since(start).Round(time.Millisecond), counts)
	if checked > most || counts[http.StatusUnauthorized] != checked || counts[http.StatusUnauthorized]+counts[http.StatusTooManyRequests] != 30 {
		t.Errorf("sign-in burst: %d passwords checked, answers %v; want at most %d checked, each answered 401, the rest 429", checked, counts, most)
	}

	ann := p.signInAs("ann@example.com", "tall ocean lantern")
	annHTTP := &http.Client{Jar: ann.http.Jar, Timeout: 90 * time.Second}
	before, start = p.metric(changes), time.Now()
	counts = burst(t, 30, func(int) *http.Client { return annHTTP }, func(i int) *http.Request {
		return jsonRequest("POST", p.url+"/api/account/password", "198.51.100.2", ann.csrf, map[string]string{"current_password": fmt.Sprintf("wrong guess %d", i), "new_password": "a new long passphrase"})
	})
	checked, most = int(p.metric(changes)-before), allowance(10, time.Since(start))
	t.Logf("password change: 30 wrong current passwords at once: %d checked in %v, answers %v", checked, time.Since(start).Round(time.Millisecond), counts)
	if checked > most || counts[http.StatusForbidden] != checked || counts[http.StatusForbidden]+counts[http.StatusTooManyRequests] != 30 {
		t.Errorf("password-change burst: %d passwords checked, answers %v; want at most %d checked, each answered 403, the rest 429", checked, counts, most)
	}
	stopHerd(t, p)
}

// TestRightPasswordInsideABurstRealBinary: the right password sent inside
// a burst of wrong ones, once the wrong ones have spent the address's
// limit, is not accepted — not as a sign-in, not as the current password
// of a change. Before, every password of the burst was checked before
// any failure was counted, and the right one signed in. The limit is 1 a
// minute here, so that nothing refills while the test runs.
func TestRightPasswordInsideABurstRealBinary(t *testing.T) {
	p := startHerdWith(t, t.TempDir(), "HERD_SERVER_TRUSTED_PROXIES=[127.0.0.1/32]", "HERD_AUTH_LOGIN_ATTEMPTS_PER_MINUTE=1")
	p.signIn().call("POST", "/api/admin/users", map[string]string{"email": "ann@example.com", "password": "tall ocean lantern"}, nil)
	ann := p.signInAs("ann@example.com", "tall ocean lantern")
	cases := []struct {
		name, series, from string
		cl                 *http.Client
		req                func(from, password string) *http.Request
		accepted           int
	}{
		{"sign-in", `herd_password_checks_total{kind="sign_in"}`, "198.51.100.3", &http.Client{Timeout: 90 * time.Second}, func(from, pw string) *http.Request {
			return jsonRequest("POST", p.url+"/api/auth/login", from, "", map[string]string{"email": "ann@example.com", "password": pw})
		}, http.StatusOK},
		{"password change", `herd_password_checks_total{kind="password_change"}`, "198.51.100.4", &http.Client{Jar: ann.http.Jar, Timeout: 90 * time.Second}, func(from, pw string) *http.Request {
			return jsonRequest("POST", p.url+"/api/account/password", from, ann.csrf, map[string]string{"current_password": pw, "new_password": "a new long passphrase"})
		}, http.StatusNoContent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := p.metric(c.series)
			var wg sync.WaitGroup
			for i := range 29 {
				wg.Go(func() {
					if resp, err := c.cl.Do(c.req(c.from, fmt.Sprintf("wrong guess %d", i))); err == nil {
						resp.Body.Close()
					}
				})
			}
			for deadline := time.Now().Add(30 * time.Second); p.metric(c.series) == before; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("no check of the burst started")
				}
			}
			counts := burst(t, 5, func(int) *http.Client { return c.cl }, func(int) *http.Request { return c.req(c.from, "tall ocean lantern") })
			wg.Wait()
			t.Logf("%s: the right password 5 times inside a burst of 29 wrong ones: answers %v, %v checked", c.name, counts, p.metric(c.series)-before)
			if counts[c.accepted] > 0 || counts[http.StatusTooManyRequests] != 5 {
				t.Errorf("%s: the right password inside the burst was answered %v; want 429 every time", c.name, counts)
			}
		})
	}
	// The password is unchanged, and the owner signs in from elsewhere.
	p.signInAs("ann@example.com", "tall ocean lantern")
	stopHerd(t, p)
}
