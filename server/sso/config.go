package sso

import "strings"

// ProviderConfig is one identity provider, an entry of
// auth.oidc.providers (docs/OPERATIONS.md "Single sign-on").
type ProviderConfig struct {
	// Name is the provider's key in URLs: /auth/oidc/{name}/callback.
	Name string `yaml:"name"`
	// DisplayName labels its button on the sign-in page.
	DisplayName  string `yaml:"display_name"`
	Issuer       string `yaml:"issuer"`
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
	// Scopes are asked for beside openid; empty: email and profile.
	Scopes []string `yaml:"scopes"`
	// AdminClaim, when set, decides the admin role at every sign-in:
	// granted when the claim holds the value, removed when it does not.
	AdminClaim *ClaimMatch `yaml:"admin_claim"`
	// AllowedDomains, when set, are the only email domains let in.
	AllowedDomains []string `yaml:"allowed_domains"`
	// AllowedGroups, when set: only members of one of them are let in.
	AllowedGroups []string `yaml:"allowed_groups"`
	// GroupsClaim names the claim AllowedGroups reads; "" = groups.
	GroupsClaim string `yaml:"groups_claim"`
	// TrustEmail takes the provider's email as verified without an
	// email_verified claim (Microsoft Entra ID sends none): only for a
	// provider that owns its users' email domains, since the email links
	// an existing account (docs/OPERATIONS.md "Single sign-on").
	TrustEmail bool `yaml:"trust_email"`
}

// ClaimMatch is a claim that holds a value: a string equal to it, or a
// list of strings with it (a groups claim).
type ClaimMatch struct {
	Claim string `yaml:"claim"`
	Value string `yaml:"value"`
}

// DefaultScopes are asked for when a provider names none.
var DefaultScopes = []string{"email", "profile"}

func (p ProviderConfig) scopes() []string {
	s := []string{"openid"}
	from := p.Scopes
	if len(from) == 0 {
		from = DefaultScopes
	}
	for _, sc := range from {
		if sc != "openid" {
			s = append(s, sc)
		}
	}
	return s
}

func (p ProviderConfig) groupsClaim() string {
	if p.GroupsClaim == "" {
		return "groups"
	}
	return p.GroupsClaim
}

func (p ProviderConfig) label() string {
	if strings.TrimSpace(p.DisplayName) == "" {
		return p.Name
	}
	return p.DisplayName
}

// Who may sign in with a local password (auth.local_passwords): beside
// the providers, everyone, only admins (the way in when a provider is
// down), or nobody.
const (
	PasswordsAll    = "all"
	PasswordsAdmins = "admins"
	PasswordsOff    = "off"
)

// PasswordAllowed reports whether a user of role may sign in with a
// password under the local_passwords setting mode.
func PasswordAllowed(mode string, admin bool) bool {
	return mode == PasswordsAll || mode == "" || mode == PasswordsAdmins && admin
}
