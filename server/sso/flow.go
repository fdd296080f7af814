package sso

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"herd/models"
)

// The flow cookie binds a sign-in to the browser that started it: the
// callback's state must name a flow started with the same cookie, so a
// code and state sent to someone else's browser (login CSRF) sign
// nobody in. It lives FlowTTL, HttpOnly and SameSite=Lax (the callback
// is a top-level GET from the provider, which Lax lets through).
const (
	flowCookie = "herd_sso"
	hostPrefix = "__Host-"
)

// Begin starts a sign-in with the named provider: it keeps the flow (a
// state, a nonce and a PKCE verifier, single use, FlowTTL) with the
// hash of the browser's flow cookie, and returns the provider's
// authorization URL, which the browser is sent to. next is where the
// user goes once signed in.
func (s *Service) Begin(w http.ResponseWriter, r *http.Request, name, redirectURL, next string) (string, error) {
	p, op, err := s.ready(r.Context(), name)
	if err != nil {
		return "", err
	}
	browser := s.browserID(w, r)
	state, nonce, verifier := random(), random(), oauth2.GenerateVerifier()
	f := &models.LoginFlow{
		ID: hash(state), Browser: hash(browser), Provider: name,
		Nonce: nonce, Verifier: verifier, Next: next,
		ExpiresAt: s.now().UTC().Add(FlowTTL),
	}
	if err := s.store.CreateLoginFlow(r.Context(), f); err != nil {
		return "", err
	}
	return p.oauth(op, redirectURL).AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), nil
}

// browserID is the request's flow cookie, set anew (with FlowTTL ahead)
// or made on the first sign-in.
func (s *Service) browserID(w http.ResponseWriter, r *http.Request) string {
	id := ""
	if ck, err := r.Cookie(s.cookieName()); err == nil && len(ck.Value) >= 32 {
		id = ck.Value
	}
	if id == "" {
		id = random()
	}
	http.SetCookie(w, &http.Cookie{
		Name: s.cookieName(), Value: id, Path: "/", Expires: s.now().Add(FlowTTL),
		MaxAge: int(FlowTTL.Seconds()), HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode,
	})
	return id
}

func (s *Service) cookieName() string {
	if s.secure {
		return hostPrefix + flowCookie
	}
	return flowCookie
}

// Finish completes the sign-in the callback request r answers: it takes
// the flow its state names (once: a replay finds none), checks it was
// started by this browser with this provider, exchanges the code with
// the PKCE verifier, verifies the ID token and its nonce, reads the
// claims (the ID token's, then the userinfo endpoint's for what it
// lacks) and admits the identity by the provider's rules. It returns the
// identity and where the user goes next.
func (s *Service) Finish(r *http.Request, name, redirectURL string) (*Identity, string, error) {
	ctx := r.Context()
	if s.byName[name] == nil {
		return nil, "", ErrUnknownProvider
	}
	f, err := s.takeFlow(r, name)
	if err != nil {
		return nil, "", err
	}
	q := r.URL.Query()
	if code := q.Get("error"); code != "" {
		return nil, "", &DeniedError{Code: cut(code), Description: cut(q.Get("error_description"))}
	}
	if q.Get("code") == "" {
		return nil, "", ErrFlow
	}
	p, op, err := s.ready(ctx, name)
	if err != nil {
		return nil, "", err
	}
	// The token, keys and userinfo calls together get what a start's
	// discovery gets: a provider that hangs must not hold the request.
	ctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, s.client), startWait)
	defer cancel()
	id, err := s.exchange(ctx, p, op, redirectURL, q.Get("code"), f)
	if err != nil {
		return nil, "", err
	}
	if err := p.admit(id); err != nil {
		return id, "", err
	}
	return id, f.Next, nil
}

// takeFlow takes the flow r's state names, once, if r's browser started
// it with the provider name within FlowTTL.
func (s *Service) takeFlow(r *http.Request, name string) (*models.LoginFlow, error) {
	state := r.URL.Query().Get("state")
	if state == "" {
		return nil, ErrFlow
	}
	f, err := s.store.TakeLoginFlow(r.Context(), hash(state))
	if errors.Is(err, models.ErrNotFound) {
		return nil, ErrFlow
	}
	if err != nil {
		return nil, err
	}
	ck, err := r.Cookie(s.cookieName())
	if err != nil || subtle.ConstantTimeCompare([]byte(hash(ck.Value)), []byte(f.Browser)) != 1 {
		return nil, ErrFlow
	}
	if f.Provider != name || !s.now().Before(f.ExpiresAt) {
		return nil, ErrFlow
	}
	return f, nil
}

// exchange trades code for tokens and reads the identity they carry.
func (s *Service) exchange(ctx context.Context, p *provider, op *oidc.Provider, redirectURL, code string, f *models.LoginFlow) (*Identity, error) {
	tok, err := p.oauth(op, redirectURL).Exchange(ctx, code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return nil, &ExchangeError{fmt.Errorf("exchange the code: %w", err)}
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, &ExchangeError{errors.New("the token response has no id_token")}
	}
	idt, err := op.Verifier(&oidc.Config{ClientID: p.cfg.ClientID, Now: s.now}).Verify(ctx, raw)
	if err != nil {
		return nil, &ExchangeError{fmt.Errorf("verify the ID token: %w", err)}
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		return nil, &ExchangeError{errors.New("the ID token's nonce is not the one this sign-in sent")}
	}
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		return nil, &ExchangeError{fmt.Errorf("read the ID token's claims: %w", err)}
	}
	if op.UserInfoEndpoint() != "" {
		if err := mergeUserInfo(ctx, op, tok, idt.Subject, claims); err != nil {
			return nil, &ExchangeError{err}
		}
	}
	return p.identity(idt, claims, raw), nil
}

// mergeUserInfo adds the userinfo endpoint's claims that the ID token
// lacks: many providers leave email and groups out of the ID token
// when an access token comes with it. Its subject must be the token's.
func mergeUserInfo(ctx context.Context, op *oidc.Provider, tok *oauth2.Token, subject string, claims map[string]any) error {
	ui, err := op.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	if err != nil {
		return fmt.Errorf("read the userinfo: %w", err)
	}
	if ui.Subject != subject {
		return errors.New("the userinfo's subject is not the ID token's")
	}
	extra := map[string]any{}
	if err := ui.Claims(&extra); err != nil {
		return fmt.Errorf("read the userinfo's claims: %w", err)
	}
	for k, v := range extra {
		if _, ok := claims[k]; !ok {
			claims[k] = v
		}
	}
	return nil
}

// DeniedError is a provider's refusal sent to the callback (the user
// cancelled, the client is not allowed).
type DeniedError struct{ Code, Description string }

func (e *DeniedError) Error() string {
	msg := "the identity provider did not sign you in (" + e.Code
	if e.Description != "" {
		msg += ": " + e.Description
	}
	return msg + "): start again from the sign-in page"
}

// cut keeps a provider's error text to what a page shows.
func cut(s string) string {
	if len(s) > 200 {
		return strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}

// random is 32 random bytes, base64url.
func random() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// hash is what the store keeps of a state or a browser's cookie.
func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
