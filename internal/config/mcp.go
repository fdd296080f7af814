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
		if seen[s.Name] && mcp.ServerName.MatchString(s.Name) {
			l.invalid(key+".name", "%q names two servers", s.Name)
		}
		seen[s.Name] = true
		for _, f := range CheckMCPServer(s) {
			field := key
			if f.Field != "" {
				field += "." + f.Field
			}
			l.invalid(field, "%s", f.Message)
		}
	}
}

// CheckMCPServer checks one MCP server, its defaults filled in
// (ServerConfig.WithDefaults), by the config file's rules: the file's
// servers and the admin console's are held to the same ones
// (docs/DESIGN.md §12). A problem of the whole entry has no Field.
// Unique names are the caller's to check.
func CheckMCPServer(s mcp.ServerConfig) []FieldError {
	var c fieldChecks
	if !mcp.ServerName.MatchString(s.Name) {
		c.invalid("name", "must match %s (lower-case letters, digits and -, at most 24), got %q", mcp.ServerName, s.Name)
	}
	switch {
	case s.Command != "" && s.URL != "":
		c.invalid("", "set command (stdio) or url (streamable HTTP), not both")
	case s.Command == "" && s.URL == "":
		c.invalid("", "needs a command (stdio) or a url (streamable HTTP)")
	case s.Stdio():
		c.checkStdio(s)
	default:
		c.checkHTTP(s)
	}
	c.atLeast("timeout_seconds", s.TimeoutSeconds, 1)
	c.oneOf("use", s.Use, mcp.UseAll, mcp.UseAdmins)
	if s.Tools != nil {
		c.nonEmptyNames("tools", *s.Tools)
	}
	c.nonEmptyNames("disallowed_tools", s.DisallowedTools)
	return c
}

func (c *fieldChecks) checkStdio(s mcp.ServerConfig) {
	if len(s.Headers) > 0 {
		c.invalid("headers", "only an HTTP server (url) has headers; a stdio server takes env")
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			c.invalid("env", "invalid variable name %q", k)
		}
	}
}

func (c *fieldChecks) checkHTTP(s mcp.ServerConfig) {
	if len(s.Args) > 0 || len(s.Env) > 0 {
		c.invalid("", "args and env are for a stdio server (command); an HTTP server takes headers")
	}
	u, err := url.Parse(s.URL)
	if err != nil || !isHTTPURL(u) || u.Host == "" || u.User != nil {
		c.invalid("url", "must be an http:// or https:// URL with a host and no user info")
	}
	for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
		if !httpguts.ValidHeaderFieldName(k) {
			c.invalid("headers", "invalid header name %q", k)
		} else if !httpguts.ValidHeaderFieldValue(s.Headers[k]) {
			// The value may be a token: never show it.
			c.invalid("headers."+k, "the value holds characters a header cannot")
		}
		switch http.CanonicalHeaderKey(k) {
		case "Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version", "Host", "Content-Length":
			c.invalid("headers", "%s is set by the MCP client itself", k)
		}
	}
}

func (c *fieldChecks) nonEmptyNames(field string, names []string) {
	for i, n := range names {
		if strings.TrimSpace(n) == "" {
			c.invalid(fmt.Sprintf("%s.%d", field, i), "a tool name cannot be empty")
		}
	}
}

func (l *loader) nonEmptyNames(key string, names []string) {
	var c fieldChecks
	c.nonEmptyNames(key, names)
	for _, f := range c {
		l.invalid(f.Field, "%s", f.Message)
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
