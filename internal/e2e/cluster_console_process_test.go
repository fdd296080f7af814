package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"herd/agent/openai/openaitest"
	"herd/internal/pgtest"
)

// TestClusterConsoleModelOnOtherInstance: a model an admin adds through
// instance A's API is used by a run on instance B, with its key, without
// a restart (the settings notice has B read the console's entries again:
// docs/DESIGN.md §14); the row holds the key sealed only.
func TestClusterConsoleModelOnOtherInstance(t *testing.T) {
	t.Parallel() // its own data directories, schema and ports
	const apiKey = "sk-cluster-SECRET-42424242"
	fake := openaitest.NewServer(t)
	fake.SetFallback(func(openaitest.ChatRequest) openaitest.Reply { return openaitest.Text("from the console model") })
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	dsn := pgtest.DSN(t)
	env := clusterEnv(dsn, "HERD_SECRET_KEY="+base64.StdEncoding.EncodeToString(key))
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca, cb := a.signIn(), b.signIn()

	ca.call("POST", "/api/admin/models", map[string]any{"name": "console-gpt", "provider": "openai", "model": "gpt-test",
		"base_url": fake.URL(), "api_key": apiKey}, nil)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, models := cb.status("GET", "/api/models", nil)
		if strings.Contains(models, `"console-gpt"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B never listed the model added on A: %s", models)
		}
	}
	code, body := cb.status("POST", "/api/threads", map[string]string{"content": "hello", "model": "console-gpt"})
	if code != http.StatusCreated && code != http.StatusAccepted {
		t.Fatalf("a thread on B with the console's model: %d %s", code, body)
	}
	for deadline := time.Now().Add(10 * time.Second); len(fake.Requests()) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the console's model was never called")
		}
	}
	if got := fake.Requests()[0].Header.Get("Authorization"); got != "Bearer "+apiKey {
		t.Fatalf("B called the provider with %q, want the key stored on A", got)
	}

	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var spec, sealed string
	if err := conn.QueryRow(context.Background(), "SELECT spec, sealed FROM console_entries WHERE name = 'console-gpt'").Scan(&spec, &sealed); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(spec+sealed, "SECRET") || !strings.HasPrefix(sealed, "herd1:") {
		t.Fatalf("the row holds spec %s, sealed %q: want the key sealed only", spec, sealed)
	}
	stopHerd(t, a)
	stopHerd(t, b)
}
