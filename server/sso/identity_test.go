package sso

import (
	"errors"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
)

func TestIdentityFromClaims(t *testing.T) {
	p := &provider{cfg: ProviderConfig{Name: "corp", DisplayName: "Corp", AdminClaim: &ClaimMatch{Claim: "roles", Value: "admin"},
		AllowedDomains: []string{"Example.com"}, AllowedGroups: []string{"staff"}, GroupsClaim: "teams"}}
	idt := &oidc.IDToken{Issuer: "https://id", Subject: "s"}
	for _, tc := range []struct {
		name   string
		claims map[string]any
		admin  bool
		want   error // nil, or the kind of refusal
	}{
		{"admin by a list", map[string]any{"email": "A@example.com", "email_verified": true, "roles": []any{"x", "admin"}, "teams": []any{"staff"}}, true, nil},
		{"admin by a string, verified as a string", map[string]any{"email": "a@example.com", "email_verified": "true", "roles": "admin", "teams": "staff"}, true, nil},
		{"not admin", map[string]any{"email": "a@example.com", "email_verified": true, "roles": []any{"user"}, "teams": []any{"staff"}}, false, nil},
		{"unverified", map[string]any{"email": "a@example.com", "email_verified": false, "teams": []any{"staff"}}, false, ErrUnverifiedEmail},
		{"no email", map[string]any{"email_verified": true, "teams": []any{"staff"}}, false, ErrNoEmail},
		{"another domain", map[string]any{"email": "a@example.org", "email_verified": true, "teams": []any{"staff"}}, false, &NotAllowedError{}},
		{"a look-alike domain", map[string]any{"email": "a@evil-example.com", "email_verified": true, "teams": []any{"staff"}}, false, &NotAllowedError{}},
		{"no allowed group", map[string]any{"email": "a@example.com", "email_verified": true, "teams": []any{"guests"}}, false, &NotAllowedError{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := p.identity(idt, tc.claims, "raw")
			if tc.name == "unverified" {
				trusting := &provider{cfg: p.cfg}
				trusting.cfg.TrustEmail = true
				if err := trusting.admit(trusting.identity(idt, tc.claims, "raw")); err != nil {
					t.Errorf("with trust_email: %v", err)
				}
			}
			if id.Admin == nil || *id.Admin != tc.admin {
				t.Errorf("admin = %v, want %v", id.Admin, tc.admin)
			}
			err := p.admit(id)
			var na *NotAllowedError
			switch want := tc.want.(type) {
			case nil:
				if err != nil {
					t.Errorf("refused: %v", err)
				}
			case *NotAllowedError:
				if !errors.As(err, &na) {
					t.Errorf("err = %v, want a NotAllowedError", err)
				}
			default:
				if !errors.Is(err, want) {
					t.Errorf("err = %v, want %v", err, want)
				}
			}
		})
	}
}
