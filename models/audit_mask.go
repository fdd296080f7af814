package models

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"unicode"
)

// Masked is what the audit log shows of a secret; MaskedChanged of one
// an action changed, on its after side.
const (
	Masked        = "********"
	MaskedChanged = "******** (changed)"
)

// secretSuffixes end the names of fields whose value is a secret (api_key,
// client_secret, password_hash, access_token, Authorization…), compared
// lower case without separators. A word inside a name does not count:
// token_usage_enabled is a switch, max_tokens a number.
var secretSuffixes = []string{"key", "secret", "password", "passwd", "token", "hash", "credential", "credentials", "authorization", "cookie"}

// secretMaps are fields every value of which is a secret: an MCP server's
// HTTP headers and environment, whose names stay readable.
var secretMaps = []string{"header", "headers", "env", "environment"}

// secretName reports whether a field named name holds a secret.
func secretName(name string) bool {
	n := strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToLower(r)
		}
		return -1
	}, name)
	for _, m := range secretMaps {
		if n == m {
			return true
		}
	}
	for _, s := range secretSuffixes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

// urlName reports whether a field named name holds a URL (url, base_url,
// endpoint_url…): an MCP server's may carry a token in its path or query,
// so no more than its host is shown, as everywhere else (docs/DESIGN.md
// §4).
func urlName(name string) bool {
	return strings.HasSuffix(strings.ToLower(name), "url")
}

// maskURL keeps a URL's scheme and host and masks what follows, or the
// whole value when it does not read as a URL with a host.
func maskURL(v string, other any, after bool) string {
	u, err := url.Parse(v)
	if v == "" || err == nil && u.Host != "" && u.User == nil && strings.Trim(u.Path, "/") == "" && u.RawQuery == "" && u.Fragment == "" {
		return v // nothing past the host
	}
	mask := Masked
	if after && v != other {
		mask = MaskedChanged
	}
	if err != nil || u.Host == "" {
		return mask
	}
	return u.Scheme + "://" + u.Host + "/" + mask
}

// MaskAudit encodes an action's before and after for the audit log with
// every secret masked (docs/DESIGN.md §10): a field named like a secret
// (secretName) shows Masked, or MaskedChanged on the after side when the
// action changed it, so a rotated key is on record and never its value;
// a URL shows its host alone (maskURL).
// Empty and absent values stay as they are ("no key" is no secret). A nil
// side is SQL NULL: nothing before a create, nothing after a delete.
func MaskAudit(before, after any) (JSON, JSON, error) {
	b, err := decodeAny(before)
	if err != nil {
		return nil, nil, err
	}
	a, err := decodeAny(after)
	if err != nil {
		return nil, nil, err
	}
	mb, ma := maskWalk(b, a, false, false), maskWalk(a, b, false, true)
	jb, err := encodeMasked(before, mb)
	if err != nil {
		return nil, nil, err
	}
	ja, err := encodeMasked(after, ma)
	return jb, ja, err
}

// decodeAny turns v into plain JSON values (maps, slices, strings,
// json.Number…) as its JSON encoding has it.
func decodeAny(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("audit: encode %T: %w", v, err)
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return nil, fmt.Errorf("audit: decode %T: %w", v, err)
	}
	return out, nil
}

// encodeMasked encodes the masked value m of the side orig (nil: NULL).
func encodeMasked(orig, m any) (JSON, error) {
	if orig == nil || m == nil {
		return nil, nil
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("audit: encode: %w", err)
	}
	return JSON(raw), nil
}

// maskWalk masks v, whose counterpart on the other side is other; secret
// says a field above named a secret, after that v is the after side.
func maskWalk(v, other any, secret, after bool) any {
	switch x := v.(type) {
	case map[string]any:
		om, _ := other.(map[string]any)
		out := make(map[string]any, len(x))
		for k, e := range x {
			if u, ok := e.(string); ok && !secret && urlName(k) {
				out[k] = maskURL(u, om[k], after)
				continue
			}
			out[k] = maskWalk(e, om[k], secret || secretName(k), after)
		}
		return out
	case []any:
		ol, _ := other.([]any)
		out := make([]any, len(x))
		for i, e := range x {
			var o any
			if i < len(ol) {
				o = ol[i]
			}
			out[i] = maskWalk(e, o, secret, after)
		}
		return out
	case nil:
		return nil
	case string:
		if x == "" {
			return x
		}
	}
	if !secret {
		return v
	}
	if after && !reflect.DeepEqual(v, other) {
		return MaskedChanged
	}
	return Masked
}
