package config

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"

	"herd/agent/mcp"
)

// mcpRef is a ${NAME} reference inside an MCP server's env or header
// value ("Bearer ${SEARCH_TOKEN}").
var mcpRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandMCPSecrets replaces every ${NAME} in the MCP servers' env and
// header values with that variable's value and returns the names
// referenced. A missing variable is an error naming it, never the value.
func (l *loader) expandMCPSecrets(c *Config, env map[string]string) map[string]bool {
	refs := map[string]bool{}
	expand := func(key string, values map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(values)) {
			values[k] = mcpRef.ReplaceAllStringFunc(values[k], func(ref string) string {
				name := mcpRef.FindStringSubmatch(ref)[1]
				refs[name] = true
				v, ok := env[name]
				if !ok {
					l.invalid(key+"."+k, "environment variable %s is not set", name)
				}
				return v
			})
		}
	}
	for i := range c.MCP.Servers {
		s := &c.MCP.Servers[i]
		expand(fmt.Sprintf("mcp.servers.%d.env", i), s.Env)
		expand(fmt.Sprintf("mcp.servers.%d.headers", i), s.Headers)
	}
	return refs
}

// fillMCPDefaults gives each server its timeout and use.
func fillMCPDefaults(c *Config) {
	for i := range c.MCP.Servers {
		c.MCP.Servers[i] = c.MCP.Servers[i].WithDefaults()
	}
}

func (l *loader) validateMCP(servers []mcp.ServerConfig) {
	seen := map[string]bool{}
	for i, s := range servers {
		key := fmt.Sprintf("mcp.servers.%d", i)
		switch {
		case !mcp.ServerName.MatchString(s.Name):
			l.invalid(key+".name", "must match %s (lower-case letters, digits and -, at most 24), got %q", mcp.ServerName, s.Name)
		case seen[s.Name]:
			l.invalid(key+".name", "%q names two servers", s.Name)
		}
		seen[s.Name] = true
		switch {
		case s.Command != "" && s.URL != "":
			l.invalid(key, "set command (stdio) or url (streamable HTTP), not both")
		case s.Command == "" && s.URL == "":
			l.invalid(key, "needs a command (stdio) or a url (streamable HTTP)")
		case s.Stdio():
			l.validateStdio(key, s)
		default:
			l.validateHTTP(key, s)
		}
		l.atLeast(key+".timeout_seconds", s.TimeoutSeconds, 1)
		l.oneOf(key+".use", s.Use, mcp.UseAll, mcp.UseAdmins)
		if s.Tools != nil {
			l.nonEmptyNames(key+".tools", *s.Tools)
		}
		l.nonEmptyNames(key+".disallowed_tools", s.DisallowedTools)
	}
}

func (l *loader) validateStdio(key string, s mcp.ServerConfig) {
	if len(s.Headers) > 0 {
		l.invalid(key+".headers", "only an HTTP server (url) has headers; a stdio server takes env")
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			l.invalid(key+".env", "invalid variable name %q", k)
		}
	}
}

func (l *loader) validateHTTP(key string, s mcp.ServerConfig) {
	if len(s.Args) > 0 || len(s.Env) > 0 {
		l.invalid(key, "args and env are for a stdio server (command); an HTTP server takes headers")
	}
	u, err := url.Parse(s.URL)
	if err != nil || !isHTTPURL(u) || u.Host == "" || u.User != nil {
		l.invalid(key+".url", "must be an http:// or https:// URL with a host and no user info")
	}
	for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
		if !httpguts.ValidHeaderFieldName(k) {
			l.invalid(key+".headers", "invalid header name %q", k)
		} else if !httpguts.ValidHeaderFieldValue(s.Headers[k]) {
			// The value may be a token: never show it.
			l.invalid(key+".headers."+k, "the value holds characters a header cannot")
		}
		switch http.CanonicalHeaderKey(k) {
		case "Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version", "Host", "Content-Length":
			l.invalid(key+".headers", "%s is set by the MCP client itself", k)
		}
	}
}

func (l *loader) nonEmptyNames(key string, names []string) {
	for i, n := range names {
		if strings.TrimSpace(n) == "" {
			l.invalid(fmt.Sprintf("%s.%d", key, i), "a tool name cannot be empty")
		}
	}
}

// mcpSelector checks a tools-list entry of the form mcp:<server>/<tool>
// against the servers configured; ok is false when t is not such an entry.
func (c *fieldChecks) mcpSelector(key, t string, servers []mcp.ServerConfig) (ok bool) {
	if !strings.HasPrefix(t, mcp.SelectorPrefix) {
		return false
	}
	server, _, valid := mcp.ParseSelector(t)
	if !valid {
		c.invalid(key, "%q must be mcp:<server>/<tool> or mcp:<server>/*", t)
		return true
	}
	names := make([]string, len(servers))
	for i, s := range servers {
		names[i] = s.Name
		if s.Name == server {
			return true
		}
	}
	if len(names) == 0 {
		c.invalid(key, "%q names an MCP server, but mcp.servers is empty", t)
	} else {
		c.invalid(key, "%q names no MCP server (configured: %s)", t, strings.Join(names, ", "))
	}
	return true
}

// redactMCP masks every env and header value of the MCP servers, and
// their URLs past the host (a path or query may hold a token).
func redactMCP(servers []mcp.ServerConfig) []mcp.ServerConfig {
	out := slices.Clone(servers)
	mask := func(m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		r := make(map[string]string, len(m))
		for k := range m {
			r[k] = redactedKey
		}
		return r
	}
	for i := range out {
		out[i].Env = mask(out[i].Env)
		out[i].Headers = mask(out[i].Headers)
		out[i].URL = redactURL(out[i].URL)
	}
	return out
}

// redactURL keeps a URL's scheme and host, the rest masked.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return ""
	case err != nil || u.Host == "":
		return redactedKey
	case (u.Path == "" || u.Path == "/") && u.RawQuery == "" && u.Fragment == "" && u.User == nil:
		return u.Scheme + "://" + u.Host + u.Path
	}
	return u.Scheme + "://" + u.Host + "/" + redactedKey
}
