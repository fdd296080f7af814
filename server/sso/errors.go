package sso

import "errors"

// Sentinel errors; their texts are safe to show on the sign-in page.
var (
	// ErrUnknownProvider: no provider has that name.
	ErrUnknownProvider = errors.New("no such sign-in provider")
	// ErrFlow: a callback that no sign-in of this browser started, one
	// already used or expired, or one the provider answered with an
	// error. The sign-in starts again from the sign-in page.
	ErrFlow = errors.New("this sign-in link is not valid (expired, already used, or started in another browser): start again from the sign-in page")
	// ErrUnverifiedEmail: the provider does not vouch for the email: its
	// email_verified is false or absent (some providers never send it)
	// and the provider has no trust_email.
	ErrUnverifiedEmail = errors.New("your identity provider did not confirm that your email address is verified, so herd cannot trust it: " +
		"verify it there and sign in again; if the provider never confirms emails (Microsoft Entra ID does not) and owns your email domain, your admin can set trust_email for it")
	// ErrNoEmail: the provider sent no email claim (the email scope).
	ErrNoEmail = errors.New("your identity provider sent no email address: ask your admin to allow the email scope for herd")
)

// NotAllowedError is an identity the provider's allowed domains or
// groups leave out.
type NotAllowedError struct{ Why string }

func (e *NotAllowedError) Error() string { return e.Why }

// UnreachableError is a provider herd could not discover (down, or
// answering something else than an OpenID configuration).
type UnreachableError struct {
	Provider string // its display name
	Err      error
}

func (e *UnreachableError) Error() string {
	return e.Provider + " cannot be reached right now; try again in a minute, or ask your admin"
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// ExchangeError is a callback whose code or tokens the provider or herd
// refused (a code for another client, a wrong PKCE verifier, a nonce
// that does not match, a bad signature).
type ExchangeError struct{ Err error }

func (e *ExchangeError) Error() string {
	return "the identity provider's answer could not be checked, so you are not signed in: start again from the sign-in page"
}

func (e *ExchangeError) Unwrap() error { return e.Err }
