package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestEnterKeyPreference: what Enter does is a preference like the
// theme: automatic until chosen, refused when unknown, saved by the API
// and by the settings form, and carried to every page as data-enter-key
// (static/composer.js reads it); a form without the field leaves it.
func TestEnterKeyPreference(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	var p preferencesJSON
	u.mustJSON("GET", "/api/account/preferences", nil, http.StatusOK, &p)
	if p.EnterKey != "auto" {
		t.Fatalf("fresh enter_key = %q, want auto", p.EnterKey)
	}
	if page := string(u.do("GET", "/threads/new", nil).body); strings.Contains(page, "data-enter-key") {
		t.Error("the automatic setting pins what Enter does")
	}
	if r := u.do("PUT", "/api/account/preferences", `{"enter_key": "shout"}`); r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "enter_key must be one of auto, send, newline") {
		t.Errorf("unknown enter_key: %d %s, want 422 with the choices", r.status, r.body)
	}
	u.mustJSON("PUT", "/api/account/preferences", map[string]string{"enter_key": "newline"}, http.StatusOK, &p)
	if p != (preferencesJSON{Theme: "system", EnterKey: "newline"}) {
		t.Fatalf("saved preferences = %+v", p)
	}
	for _, path := range []string{"/threads/new", "/settings"} {
		if page := string(u.do("GET", path, nil).body); !strings.Contains(page, `<html lang="en" data-enter-key="newline"`) {
			t.Errorf("%s does not carry the Enter setting", path)
		}
	}
	if page := string(u.do("GET", "/settings", nil).body); !strings.Contains(page, `value="newline" checked`) {
		t.Error("the settings page does not check the saved Enter setting")
	}

	r := u.do("POST", "/settings/preferences", url.Values{"theme": {"system"}, "default_model": {""}, "enter_key": {"send"}, "_csrf": {u.csrf}})
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `data-enter-key="send"`) {
		t.Errorf("form save: %d, want 200 and the page already sending on Enter", r.status)
	}
	u.do("POST", "/settings/preferences", url.Values{"theme": {"dark"}, "default_model": {""}, "_csrf": {u.csrf}})
	u.mustJSON("GET", "/api/account/preferences", nil, http.StatusOK, &p)
	if p.EnterKey != "send" || p.Theme != "dark" {
		t.Errorf("a form without enter_key: preferences %+v, want the theme changed and Enter still send", p)
	}
	r = u.do("POST", "/settings/preferences", url.Values{"theme": {"dark"}, "default_model": {""}, "enter_key": {"maybe"}, "_csrf": {u.csrf}})
	if r.status != http.StatusUnprocessableEntity {
		t.Errorf("form with enter_key=maybe: %d, want 422", r.status)
	}
}

// TestManifest: the pages link a web app manifest, served as
// application/manifest+json without a session, valid JSON with what a
// phone needs to install herd (a name, start_url, standalone display,
// colours) and icons that load at the sizes they claim.
func TestManifest(t *testing.T) {
	a := newApp(t)
	a.newUser("ann@example.com", false) // else /login sends to /setup
	anon := a.anonymous()
	login := string(anon.do("GET", "/login", nil).body)
	const link = `<link rel="manifest" href="`
	i := strings.Index(login, link)
	if i < 0 {
		t.Fatal("the sign-in page links no manifest")
	}
	href := login[i+len(link):]
	href = href[:strings.IndexByte(href, '"')]
	r := anon.do("GET", strings.ReplaceAll(href, "&amp;", "&"), nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/manifest+json" {
		t.Fatalf("GET %s: %d %q, want 200 application/manifest+json", href, r.status, r.header.Get("Content-Type"))
	}
	var m struct {
		Name            string `json:"name"`
		ShortName       string `json:"short_name"`
		StartURL        string `json:"start_url"`
		Display         string `json:"display"`
		ThemeColor      string `json:"theme_color"`
		BackgroundColor string `json:"background_color"`
		Icons           []struct{ Src, Sizes, Type string }
	}
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("the manifest is not JSON: %v", err)
	}
	if m.Name != "herd" || m.ShortName == "" || m.StartURL != "/" || m.Display != "standalone" || m.ThemeColor == "" || m.BackgroundColor == "" {
		t.Errorf("manifest %+v: want a name, short_name, start_url /, standalone display and colours", m)
	}
	sizes := map[string]bool{}
	for _, ic := range m.Icons {
		res := anon.do("GET", ic.Src, nil)
		if res.status != http.StatusOK || res.header.Get("Content-Type") != ic.Type {
			t.Errorf("icon %s: %d %q, want 200 %s", ic.Src, res.status, res.header.Get("Content-Type"), ic.Type)
			continue
		}
		if ic.Type != "image/png" {
			continue
		}
		img, err := png.Decode(bytes.NewReader(res.body))
		if err != nil {
			t.Errorf("icon %s: %v", ic.Src, err)
			continue
		}
		if got := fmt.Sprintf("%dx%d", img.Bounds().Dx(), img.Bounds().Dy()); got != ic.Sizes {
			t.Errorf("icon %s is %v, the manifest says %s", ic.Src, img.Bounds().Size(), ic.Sizes)
		}
		sizes[ic.Sizes] = true
	}
	if !sizes["192x192"] || !sizes["512x512"] {
		t.Errorf("PNG icons %v, want 192x192 and 512x512 (what Android asks for)", sizes)
	}
}
