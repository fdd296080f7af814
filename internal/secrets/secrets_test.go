package secrets

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func randomKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

func TestSealOpen(t *testing.T) {
	b, err := New(randomKey(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	const plain = "sk-live-0123456789abcdef"
	sealed := b.Seal(plain)
	if strings.Contains(sealed, plain) || strings.Contains(sealed, "abcdef") {
		t.Fatalf("sealed %q shows the secret", sealed)
	}
	if b.Seal(plain) == sealed {
		t.Fatal("two seals of one secret are equal: the nonce is not fresh")
	}
	got, err := b.Open(sealed)
	if err != nil || got != plain {
		t.Fatalf("Open = %q, %v; want %q", got, err, plain)
	}
	if b.Seal("") != "" {
		t.Fatal("nothing sealed is not nothing")
	}
	tampered := sealed[:len(sealed)-2] + "AA"
	if _, err := b.Open(tampered); err == nil {
		t.Fatal("a damaged value opened")
	}
}

func TestRotation(t *testing.T) {
	oldKey, newKey := randomKey(t), randomKey(t)
	old, _ := New(oldKey, nil)
	sealed := old.Seal("secret-value")
	fresh, _ := New(newKey, nil)
	if _, err := fresh.Open(sealed); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Open under another key = %v, want ErrUnknownKey", err)
	}
	rotated, err := New(newKey, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	if !rotated.Stale(sealed) {
		t.Fatal("a value of the previous key is not stale")
	}
	got, err := rotated.Open(sealed)
	if err != nil || got != "secret-value" {
		t.Fatalf("Open with the previous key = %q, %v", got, err)
	}
	if rotated.Stale(rotated.Seal(got)) {
		t.Fatal("a value re-sealed with the current key is stale")
	}
}

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	a, err := Load(dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm != 0o600 {
		t.Fatalf("key file mode %04o, want 0600", perm)
	}
	b, err := Load(dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Open(a.Seal("x")); err != nil || got != "x" {
		t.Fatalf("the second start has another key: %q, %v", got, err)
	}
	if err := os.Chmod(filepath.Join(dir, KeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, "", ""); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a key file others may read: %v, want a refusal saying chmod 600", err)
	}
}

func TestEnvKey(t *testing.T) {
	k := randomKey(t)
	b, err := Load(t.TempDir(), base64.StdEncoding.EncodeToString(k), "")
	if err != nil {
		t.Fatal(err)
	}
	same, _ := New(k, nil)
	if got, err := same.Open(b.Seal("v")); err != nil || got != "v" {
		t.Fatalf("HERD_SECRET_KEY not used: %q, %v", got, err)
	}
	if _, err := Load(t.TempDir(), "c2hvcnQ=", ""); err == nil || !strings.Contains(err.Error(), "HERD_SECRET_KEY") {
		t.Fatalf("a short key: %v, want an error naming HERD_SECRET_KEY", err)
	}
}

func TestMask(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""}, {"short", "set"}, {"sk-0123456789abcdwxyz", "…wxyz"},
	} {
		if got := Mask(c.in); got != c.want {
			t.Errorf("Mask(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
