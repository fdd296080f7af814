package config

import (
	"strings"
	"testing"
)

const ssoProvider = `
auth:
  local_passwords: admins
  oidc:
    providers:
      - name: company
        display_name: Company SSO
        issuer: https://id.example.com/realms/herd
        client_id: herd
        client_secret: $HERD_TEST_OIDC_SECRET
        admin_claim: {claim: groups, value: herd-admins}
        trust_email: true
        allowed_domains: [example.com]
`

func TestSSOConfig(t *testing.T) {
	secret := "s3cret-from-the-environment"
	c, err := loadYAML(t, ssoProvider, []string{"HERD_TEST_OIDC_SECRET=" + secret}, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	p := c.Auth.OIDC.Providers[0]
	if p.ClientSecret != secret || !p.TrustEmail || p.AdminClaim == nil || p.AdminClaim.Value != "herd-admins" || p.AllowedDomains[0] != "example.com" {
		t.Errorf("provider = %+v", p)
	}
	if c.Auth.LocalPasswords != "admins" {
		t.Errorf("local_passwords = %q, want admins", c.Auth.LocalPasswords)
	}
	if strings.Contains(c.String(), secret) {
		t.Errorf("the client secret shows in the rendered config:\n%s", c)
	}
}

func TestSSOConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"plain http issuer", strings.Replace(ssoProvider, "https://id.example.com", "http://id.example.com", 1), "must be https (http only on a loopback address)"},
		{"issuer not a URL", strings.Replace(ssoProvider, "https://id.example.com/realms/herd", "id.example.com", 1), "must be the provider's issuer URL"},
		{"secret unset", ssoProvider, "environment variable HERD_TEST_OIDC_SECRET is not set"},
		{"bad name", strings.Replace(ssoProvider, "name: company", "name: Company/x", 1), "auth.oidc.providers.0.name"},
		{"twice the name", strings.Replace(ssoProvider, "        allowed_domains: [example.com]\n", "      - {name: company, issuer: https://b.example.com, client_id: x, client_secret: y}\n", 1), `"company" names another provider too`},
		{"admin claim half", strings.Replace(ssoProvider, "{claim: groups, value: herd-admins}", "{claim: groups}", 1), "needs both claim and value"},
		{"bad domain", strings.Replace(ssoProvider, "[example.com]", "[me@example.com]", 1), "must be an email domain"},
		{"trust_email not a bool", strings.Replace(ssoProvider, "trust_email: true", "trust_email: sometimes", 1), "trust_email"},
		{"bad switch", strings.Replace(ssoProvider, "local_passwords: admins", "local_passwords: some", 1), "auth.local_passwords"},
		{"sign-up without passwords", strings.Replace(ssoProvider, "local_passwords: admins", "local_passwords: admins\n  allow_signup: true", 1), "auth.local_passwords: admins refuses"},
		{"off with no provider", "auth:\n  local_passwords: off\n", "off leaves no way to sign in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{"HERD_TEST_OIDC_SECRET=x"}
			if tc.name == "secret unset" {
				env = nil
			}
			_, err := loadYAML(t, tc.file, env, Overrides{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one with %q", err, tc.want)
			}
		})
	}
}

func TestSSOLoopbackIssuerMayBeHTTP(t *testing.T) {
	file := strings.Replace(ssoProvider, "https://id.example.com/realms/herd", "http://127.0.0.1:5556", 1)
	if _, err := loadYAML(t, file, []string{"HERD_TEST_OIDC_SECRET=x"}, Overrides{}); err != nil {
		t.Fatal(err)
	}
}
