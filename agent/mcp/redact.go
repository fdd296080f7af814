package mcp

import (
	"net/url"
	"slices"
	"strings"
)

// minSecret is the shortest value redact removes: shorter ones hold no
// credential worth the name, and removing them would break up ordinary
// words.
const minSecret = 4

// secretsOf lists what of a server's configuration may be a credential
// (docs/DESIGN.md §4): every header and env value and each word of it
// after the first,
// and of the URL its user info, its whole path and query, and each path
// segment, query key and value, as written and escaped. None of them is
// ever shown; redact removes them from the text a server or its process
// gives back, should it echo one (a JSON-RPC error, stderr).
func secretsOf(c ServerConfig) []string {
	var out []string
	add := func(vs ...string) {
		for _, v := range vs {
			for _, s := range []string{v, url.PathEscape(v), url.QueryEscape(v)} {
				if len(s) >= minSecret && !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
		}
	}
	values := func(m map[string]string) {
		for _, v := range m {
			add(v)
			if f := strings.Fields(v); len(f) > 1 {
				add(f[1:]...) // after a scheme, as in "Bearer <token>"
			}
		}
	}
	values(c.Headers)
	values(c.Env)
	if u, err := url.Parse(c.URL); err == nil && c.URL != "" {
		if u.User != nil {
			add(u.User.String(), u.User.Username())
			if p, ok := u.User.Password(); ok {
				add(p)
			}
		}
		add(u.Path, u.EscapedPath(), u.RawQuery, u.Fragment)
		add(strings.Split(u.Path, "/")...)
		add(strings.Split(u.EscapedPath(), "/")...)
		for k, vs := range u.Query() {
			add(k)
			add(vs...)
		}
	}
	// The longest first, so a value is removed whole before a part of it.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// redact removes every secret of the server from s.
func (srv *server) redact(s string) string {
	if srv.scrub == nil {
		return s
	}
	return srv.scrub.Replace(s)
}

// newScrubber replaces each of secrets by [redacted]; nil when there are
// none.
func newScrubber(secrets []string) *strings.Replacer {
	if len(secrets) == 0 {
		return nil
	}
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, "[redacted]")
	}
	return strings.NewReplacer(pairs...)
}
