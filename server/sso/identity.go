package sso

import (
	"fmt"
	"slices"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
)

// Identity is who the provider says signed in.
type Identity struct {
	Provider string // the provider's name in herd
	// Issuer and Subject name the person at the provider for good: an
	// email can change, they do not.
	Issuer, Subject string
	Email           string // lower-cased
	// EmailVerified: the provider says the email is verified, or herd
	// trusts its emails (trust_email).
	EmailVerified bool
	Groups        []string
	// Admin is what the provider's admin_claim says of the role; nil
	// when the provider has none (the role is then herd's to manage).
	Admin *bool
	// IDToken is the raw ID token: the id_token_hint of the provider's
	// end-session.
	IDToken string
}

// identity reads an Identity from the verified ID token and the claims.
func (p *provider) identity(idt *oidc.IDToken, claims map[string]any, raw string) *Identity {
	id := &Identity{
		Provider: p.cfg.Name, Issuer: idt.Issuer, Subject: idt.Subject, IDToken: raw,
		Email:         strings.ToLower(strings.TrimSpace(stringClaim(claims["email"]))),
		EmailVerified: p.cfg.TrustEmail || boolClaim(claims["email_verified"]),
		Groups:        listClaim(claims[p.cfg.groupsClaim()]),
	}
	if m := p.cfg.AdminClaim; m != nil {
		admin := slices.Contains(listClaim(claims[m.Claim]), m.Value)
		id.Admin = &admin
	}
	return id
}

// admit applies the provider's rules: an email it vouches for, within
// the allowed domains and groups when it has any.
func (p *provider) admit(id *Identity) error {
	if id.Email == "" {
		return ErrNoEmail
	}
	if !id.EmailVerified {
		return ErrUnverifiedEmail
	}
	if d := p.cfg.AllowedDomains; len(d) > 0 {
		_, domain, _ := strings.Cut(id.Email, "@")
		if !slices.ContainsFunc(d, func(a string) bool { return strings.EqualFold(a, domain) }) {
			return &NotAllowedError{Why: fmt.Sprintf("accounts of %s cannot sign in to herd with %s: ask your admin", domain, p.cfg.label())}
		}
	}
	if g := p.cfg.AllowedGroups; len(g) > 0 && !slices.ContainsFunc(id.Groups, func(x string) bool { return slices.Contains(g, x) }) {
		return &NotAllowedError{Why: fmt.Sprintf("your %s account is in none of the groups allowed to sign in to herd: ask your admin", p.cfg.label())}
	}
	return nil
}

func stringClaim(v any) string {
	s, _ := v.(string)
	return s
}

// boolClaim reads email_verified, which some providers send as a string.
func boolClaim(v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	case string:
		return b == "true"
	}
	return false
}

// listClaim reads a claim that is a string or a list of strings.
func listClaim(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
