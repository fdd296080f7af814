package auth

import (
	"crypto/sha256"
	"encoding/base64"
	"time"

	"github.com/labstack/echo/v4"
)

// A device cookie marks a browser that has signed in to an account
// before. The account's back-off (limits.go) does not apply to it, so
// however many failures others cause, from however many addresses, the
// owner signs in at once from a browser they used before; only new
// browsers wait out the back-off. The cookie is signed, names the account
// by a hash of its email, and is no credential: the password is still
// checked, under the address's limit.
const (
	deviceCookie = "herd_device"
	deviceTTL    = 180 * 24 * time.Hour
)

func deviceKey(email string) string {
	sum := sha256.Sum256([]byte("herd device\x00" + email))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// knownDevice reports whether the request carries this server's device
// cookie for email.
func (s *Service) knownDevice(c echo.Context, email string) bool {
	ck, err := c.Request().Cookie(s.cookieName(deviceCookie))
	if err != nil {
		return false
	}
	body, ok := s.signer.open(purposeDevice, ck.Value, s.now(), deviceTTL)
	return ok && body == deviceKey(email)
}

// rememberDevice marks this browser as one that signed in to email.
func (s *Service) rememberDevice(c echo.Context, email string) {
	now := s.now()
	c.SetCookie(s.cookie(deviceCookie, s.signer.sign(purposeDevice, deviceKey(email), now), now.Add(deviceTTL)))
}
