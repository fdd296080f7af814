package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"herd/internal/loopback"
	"herd/server/sso"
)

// providerName is what a provider's name may be: it is a URL segment
// (/auth/oidc/{name}/callback), registered at the provider.
var providerName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// expandClientSecrets replaces every client_secret of the form $NAME or
// ${NAME} with that variable's value, as api_key (docs/OPERATIONS.md
// "Single sign-on"), and returns the names referenced.
func (l *loader) expandClientSecrets(c *Config, env map[string]string) map[string]bool {
	refs := map[string]bool{}
	for i := range c.Auth.OIDC.Providers {
		p := &c.Auth.OIDC.Providers[i]
		sub := apiKeyRef.FindStringSubmatch(p.ClientSecret)
		if sub == nil {
			continue
		}
		name := sub[1] + sub[2]
		refs[name] = true
		if v := env[name]; v != "" {
			p.ClientSecret = v
		} else {
			l.invalid(fmt.Sprintf("auth.oidc.providers.%d.client_secret", i), "environment variable %s is not set", name)
		}
	}
	return refs
}

// validateSSO checks the providers and the local_passwords switch.
func (l *loader) validateSSO(a AuthConfig) {
	l.oneOf("auth.local_passwords", a.LocalPasswords, sso.PasswordsAll, sso.PasswordsAdmins, sso.PasswordsOff)
	if a.LocalPasswords != sso.PasswordsAll && a.AllowSignup {
		l.invalid("auth.allow_signup", "creates password accounts, which auth.local_passwords: %s refuses; turn one of them off", a.LocalPasswords)
	}
	if a.LocalPasswords == sso.PasswordsOff && len(a.OIDC.Providers) == 0 {
		l.invalid("auth.local_passwords", "off leaves no way to sign in without an auth.oidc.providers entry")
	}
	seen := map[string]bool{}
	for i, p := range a.OIDC.Providers {
		key := fmt.Sprintf("auth.oidc.providers.%d", i)
		switch {
		case !providerName.MatchString(p.Name):
			l.invalid(key+".name", "must match %s (it is part of the redirect URI), got %q", providerName, p.Name)
		case seen[p.Name]:
			l.invalid(key+".name", "%q names another provider too", p.Name)
		}
		seen[p.Name] = true
		l.validateIssuer(key+".issuer", p.Issuer)
		if strings.TrimSpace(p.ClientID) == "" {
			l.invalid(key+".client_id", "must be the client id the provider gave herd")
		}
		if strings.TrimSpace(p.ClientSecret) == "" {
			l.invalid(key+".client_secret", "must be the client's secret (or $NAME to read it from the environment)")
		}
		if m := p.AdminClaim; m != nil && (strings.TrimSpace(m.Claim) == "" || m.Value == "") {
			l.invalid(key+".admin_claim", "needs both claim and value, such as {claim: groups, value: herd-admins}")
		}
		for j, d := range p.AllowedDomains {
			if !validHostName(d) || strings.Contains(d, "@") {
				l.invalid(fmt.Sprintf("%s.allowed_domains.%d", key, j), "must be an email domain such as example.com, got %q", d)
			}
		}
		l.nonEmptyNames(key+".allowed_groups", p.AllowedGroups)
	}
}

// validateIssuer wants an https URL (http only on loopback, for tests
// and a provider on the same machine), as OpenID Connect Discovery does.
func (l *loader) validateIssuer(key, raw string) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || !isHTTPURL(u) || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		l.invalid(key, "must be the provider's issuer URL, such as https://accounts.google.com, got %q", raw)
	case u.Scheme != "https" && !loopback.URL(raw):
		l.invalid(key, "must be https (http only on a loopback address), got %q", raw)
	}
}
