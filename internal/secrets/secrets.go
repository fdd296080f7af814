// Package secrets seals the secrets herd stores (a model's API key, an
// MCP server's headers and environment) with AES-256-GCM, so the
// database, its backups and its exports never hold them in the clear
// (docs/DESIGN.md §10). A sealed value names the key that sealed it, so
// a rotated key still opens what the previous one sealed.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeyFile is the key's file in the data directory when HERD_SECRET_KEY
// is not set: created on first start, readable by herd's user only.
const KeyFile = "secret.key"

// prefix versions the sealed format: "herd1:<key id>:<nonce|ciphertext>".
const prefix = "herd1:"

// ErrUnknownKey is opening a value sealed with a key this herd lacks: an
// instance with another HERD_SECRET_KEY, or a rotation without
// HERD_SECRET_KEY_PREVIOUS.
var ErrUnknownKey = errors.New("secrets: sealed with a key this herd does not have")

// Box seals with the current key and opens with it or the previous one.
type Box struct {
	cur  key
	prev *key
}

type key struct {
	id   string
	aead cipher.AEAD
}

// New is a Box of current, a 32-byte key, opening also what previous
// (nil: none) sealed.
func New(current, previous []byte) (*Box, error) {
	cur, err := newKey(current)
	if err != nil {
		return nil, err
	}
	b := &Box{cur: cur}
	if previous != nil {
		p, err := newKey(previous)
		if err != nil {
			return nil, fmt.Errorf("previous key: %w", err)
		}
		b.prev = &p
	}
	return b, nil
}

func newKey(raw []byte) (key, error) {
	if len(raw) != 32 {
		return key{}, fmt.Errorf("secrets: a key is 32 bytes (base64 of them), got %d", len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return key{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return key{}, err
	}
	sum := sha256.Sum256(raw)
	return key{id: hex.EncodeToString(sum[:4]), aead: aead}, nil
}

// Load is the Box herd runs with: the key of HERD_SECRET_KEY (envKey,
// base64) or else of the data directory's key file, created on first
// start with mode 0600; a file others may read is refused, with what to
// do. envPrevious (HERD_SECRET_KEY_PREVIOUS, "" = none) opens what the
// key before a rotation sealed.
func Load(dataDir, envKey, envPrevious string) (*Box, error) {
	var prev []byte
	if envPrevious != "" {
		p, err := decodeKey("HERD_SECRET_KEY_PREVIOUS", envPrevious)
		if err != nil {
			return nil, err
		}
		prev = p
	}
	if envKey != "" {
		cur, err := decodeKey("HERD_SECRET_KEY", envKey)
		if err != nil {
			return nil, err
		}
		return New(cur, prev)
	}
	cur, err := keyFile(filepath.Join(dataDir, KeyFile))
	if err != nil {
		return nil, err
	}
	return New(cur, prev)
}

func decodeKey(name, v string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	if err != nil || len(raw) != 32 {
		return nil, fmt.Errorf("%s must be 32 random bytes in base64 (e.g. the output of `openssl rand -base64 32`)", name)
	}
	return raw, nil
}

// keyFile reads the key file at path, or creates it. Creating it with
// O_EXCL makes a second herd starting at once read the first's key.
func keyFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		raw := make([]byte, 32)
		_, _ = rand.Read(raw)
		_, werr := f.WriteString(base64.StdEncoding.EncodeToString(raw) + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			_ = os.Remove(path)
			return nil, fmt.Errorf("secrets: write %s: %w", path, werr)
		}
		return raw, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("secrets: create %s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("secrets: %s holds the key to the stored API keys but others may read it (mode %04o): run chmod 600 %s", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	return decodeKey(path, string(b))
}

// Seal is plain sealed with the current key; "" stays "" (nothing set).
func (b *Box) Seal(plain string) string {
	if plain == "" {
		return ""
	}
	nonce := make([]byte, b.cur.aead.NonceSize())
	_, _ = rand.Read(nonce)
	ct := b.cur.aead.Seal(nonce, nonce, []byte(plain), []byte(b.cur.id))
	return prefix + b.cur.id + ":" + base64.RawStdEncoding.EncodeToString(ct)
}

// Open is what sealed holds; "" is "".
func (b *Box) Open(sealed string) (string, error) {
	if sealed == "" {
		return "", nil
	}
	id, body, ok := strings.Cut(strings.TrimPrefix(sealed, prefix), ":")
	if !ok || !strings.HasPrefix(sealed, prefix) {
		return "", errors.New("secrets: not a sealed value")
	}
	k := b.keyOf(id)
	if k == nil {
		return "", fmt.Errorf("%w (key %s; this herd's is %s): give every instance the same HERD_SECRET_KEY, and HERD_SECRET_KEY_PREVIOUS while rotating", ErrUnknownKey, id, b.cur.id)
	}
	ct, err := base64.RawStdEncoding.DecodeString(body)
	if err != nil || len(ct) < k.aead.NonceSize() {
		return "", errors.New("secrets: a sealed value is damaged")
	}
	plain, err := k.aead.Open(nil, ct[:k.aead.NonceSize()], ct[k.aead.NonceSize():], []byte(id))
	if err != nil {
		return "", errors.New("secrets: a sealed value is damaged or was sealed with another key")
	}
	return string(plain), nil
}

func (b *Box) keyOf(id string) *key {
	switch {
	case id == b.cur.id:
		return &b.cur
	case b.prev != nil && id == b.prev.id:
		return b.prev
	}
	return nil
}

// Stale reports whether sealed was sealed with another key than the
// current one: a rotation re-seals it.
func (b *Box) Stale(sealed string) bool {
	return sealed != "" && !strings.HasPrefix(sealed, prefix+b.cur.id+":")
}

// Mask is how a secret is shown: its last four characters after "…"
// when it is long enough that they give nothing away, else "set"; ""
// when there is none. It never shows more.
func Mask(plain string) string {
	switch {
	case plain == "":
		return ""
	case len(plain) >= 16:
		return "…" + plain[len(plain)-4:]
	}
	return "set"
}
