package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"herd/models"
)

// settingCSRFKey stores the instance's signing key, so forms shown before
// a restart still post after it.
const settingCSRFKey = "csrf_key"

// preCSRFTTL is how long a signed-out form's token is accepted; a page
// reuses its cookie's token until preCSRFRenew before that.
const (
	preCSRFTTL   = 24 * time.Hour
	preCSRFRenew = time.Hour
)

// formSigner signs the tokens of the signed-out forms (sign-in, sign-up,
// set-up) with a per-instance key. A double-submit cookie alone accepts
// any value an attacker manages to plant in the cookie and the form; a
// signed one only what this server issued, and only for a day.
type formSigner struct{ key []byte }

// loadFormSigner reads the key from the settings table, creating it on
// first start.
func loadFormSigner(ctx context.Context, store *models.Store) (*formSigner, error) {
	v, err := store.Setting(ctx, settingCSRFKey)
	if err == nil {
		key, err := base64.RawStdEncoding.DecodeString(v)
		if err == nil && len(key) >= 32 {
			return &formSigner{key: key}, nil
		}
	} else if !errors.Is(err, models.ErrNotFound) {
		return nil, fmt.Errorf("server: csrf key: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("server: csrf key: %w", err)
	}
	if err := store.SetSetting(ctx, settingCSRFKey, base64.RawStdEncoding.EncodeToString(key)); err != nil {
		return nil, err
	}
	return &formSigner{key: key}, nil
}

// Purposes of the signed tokens: a token made for one is no use as the
// other.
const (
	purposeCSRF   = "herd pre-sign-in csrf"
	purposeDevice = "herd known device"
)

// sign returns body.issued.mac for purpose.
func (f *formSigner) sign(purpose, body string, now time.Time) string {
	body += "." + strconv.FormatInt(now.Unix(), 10)
	return body + "." + f.mac(purpose, body)
}

func (f *formSigner) mac(purpose, body string) string {
	m := hmac.New(sha256.New, f.key)
	m.Write([]byte(purpose + "\x00" + body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// open returns the body of tok, if this server signed it for purpose at
// most maxAge ago (a minute ahead is allowed for a clock step).
func (f *formSigner) open(purpose, tok string, now time.Time, maxAge time.Duration) (string, bool) {
	i := strings.LastIndexByte(tok, '.')
	if i < 0 || !hmac.Equal([]byte(tok[i+1:]), []byte(f.mac(purpose, tok[:i]))) {
		return "", false
	}
	j := strings.LastIndexByte(tok[:i], '.')
	sec, err := strconv.ParseInt(tok[j+1:i], 10, 64)
	if j < 0 || err != nil {
		return "", false
	}
	age := now.Sub(time.Unix(sec, 0))
	return tok[:j], age >= -time.Minute && age <= maxAge
}

// issue returns a new signed-out form token: nonce.issued.mac.
func (f *formSigner) issue(now time.Time) string {
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return f.sign(purposeCSRF, base64.RawURLEncoding.EncodeToString(nonce), now)
}

// valid reports whether tok was signed here and has not expired.
func (f *formSigner) valid(tok string, now time.Time) bool {
	_, ok := f.open(purposeCSRF, tok, now, preCSRFTTL)
	return ok
}

// fresh reports whether tok is valid long enough to be shown in a form.
func (f *formSigner) fresh(tok string, now time.Time) bool {
	_, ok := f.open(purposeCSRF, tok, now, preCSRFTTL-preCSRFRenew)
	return ok
}
