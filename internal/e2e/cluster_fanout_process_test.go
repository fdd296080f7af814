package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"herd/agent/openai/openaitest"
	"herd/internal/pgtest"
)

// titlingModel is the environment of a cluster whose first model is an
// OpenAI-compatible fake: it names threads title once release is called
// (or the test ends), for a call of 76 tokens, and answers the lead at
// once (520).
func titlingModel(t *testing.T, title string) (release func(), env []string) {
	fake := openaitest.NewServer(t)
	gate := make(chan struct{})
	release = sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release)
	fake.SetFallback(func(req openaitest.ChatRequest) openaitest.Reply {
		if len(req.Messages) > 0 && strings.HasPrefix(req.Messages[0].Text(), "You name chat threads.") {
			<-gate
			return openaitest.Reply{Chunks: []string{title}, Usage: &openaitest.Usage{PromptTokens: 70, CompletionTokens: 6, TotalTokens: 76}}
		}
		return openaitest.Reply{Chunks: []string{"Here is a plan."}, Usage: &openaitest.Usage{PromptTokens: 500, CompletionTokens: 20, TotalTokens: 520}}
	})
	return release, clusterEnv(pgtest.DSN(t), "HERD_MODELS_0_PROVIDER=openai", "HERD_MODELS_0_MODEL=gpt-test", "HERD_MODELS_0_BASE_URL="+fake.URL(),
		"HERD_MODELS_0_API_KEY=sk-test", "HERD_MODELS_0_MAX_RETRIES=0")
}

// TestClusterTitleReachesOtherInstance: a thread's first message is sent
// on A, whose model names the thread in a call of its own. A page of the
// thread rendered on B while that call is in flight knows it is (so it
// asks for the title once its stream is open, as on one process, should
// the title come before the stream); B's stream then gets the new title
// and the call's usage live, as A's would; and B's page shows the title
// once the call is over.
func TestClusterTitleReachesOtherInstance(t *testing.T) {
	const title = "Kyoto trip in March"
	release, env := titlingModel(t, title)
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca, cb := a.signIn(), b.signIn()

	var created struct {
		Thread struct{ ID, Title string } `json:"thread"`
	}
	ca.call("POST", "/api/threads", map[string]string{"content": "can you plan my trip to kyoto in march? we have 5 days"}, &created)
	id := created.Thread.ID
	// B hears of the call a moment after A's answer.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, page := cb.status("GET", "/threads/"+id, nil)
		if code == http.StatusOK && strings.Contains(page, `"title_pending":true`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B's page of the thread while A names it: %d, title_pending not true", code)
		}
	}
	conn := dialStream(t, b, cb, id)
	// A first frame (the replay of the thread so far) says B's client is
	// subscribed: ephemeral frames reach only subscribed clients.
	readFrame(t, conn, b)
	release()
	var renamed, usage bool
	for !renamed || !usage {
		f := readFrame(t, conn, b)
		switch f.Type {
		case "thread.renamed":
			var d struct{ Title string }
			_ = json.Unmarshal(f.Data, &d)
			if d.Title != title || f.Seq != nil {
				t.Errorf("thread.renamed on B: %s (seq %v), want the model's title, unpersisted", f.Data, f.Seq)
			}
			renamed = true
		case "usage.title":
			var d struct {
				Usage struct {
					Lead struct {
						TotalTokens int64 `json:"total_tokens"`
						Calls       int64
					}
				}
			}
			_ = json.Unmarshal(f.Data, &d)
			if d.Usage.Lead.TotalTokens != 76 || d.Usage.Lead.Calls != 1 {
				t.Errorf("usage.title on B: %s, want the title call's 76 tokens under the lead", f.Data)
			}
			usage = true
		}
	}
	// The call's end reaches B just after its frames.
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, page := cb.status("GET", "/threads/"+id, nil)
		if code == http.StatusOK && strings.Contains(page, title) && strings.Contains(page, `"title_pending":false`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B's page after the title call: %d, title shown %v, pending %v", code, strings.Contains(page, title), strings.Contains(page, `"title_pending":true`))
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopHerd(t, a)
	stopHerd(t, b)
}

// purgeLines counts, in an instance's log, the lines where it removed
// thread id for good and where its purge found nothing to remove (the
// thread was removed by another instance).
func purgeLines(p *proc, id string) (removed, nothing int) {
	for _, line := range strings.Split(p.log.String(), "\n") {
		if !strings.Contains(line, "thread="+id) {
			continue
		}
		switch {
		case strings.Contains(line, `msg="a deleted thread was removed for good"`):
			removed++
		case strings.Contains(line, `msg="a deleted thread's purge found nothing to remove here"`):
			nothing++
		}
	}
	return removed, nothing
}

// TestClusterPurgeClaimedOnce: threads deleted on one instance are
// purged once their undo window is over by whichever instance claims them
// first. Of three instances, A deletes one thread and C another, and C is
// killed at once: A and B both try each purge (every instance schedules
// every delete), and for each exactly one removes the thread, with its
// workspace in the shared directory, while the other finds nothing to
// remove; C's delete is purged on time without C.
func TestClusterPurgeClaimedOnce(t *testing.T) {
	dsn := pgtest.DSN(t)
	shared := t.TempDir()
	env := clusterEnv(dsn, "HERD_WORKSPACES_DIR="+shared, "HERD_LOG_LEVEL=debug")
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	c := startHerdWith(t, t.TempDir(), env...)
	ca, cb, cc := a.signIn(), b.signIn(), c.signIn()
	deleted := func(on *client) string {
		var th struct{ ID string }
		on.call("POST", "/api/threads", map[string]string{"title": "to delete"}, &th)
		// What a tool left in the thread's workspace.
		if err := os.MkdirAll(filepath.Join(shared, th.ID, "notes"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shared, th.ID, "notes", "a.txt"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, body := on.status("DELETE", "/api/threads/"+th.ID, nil); code != http.StatusNoContent {
			t.Fatalf("delete: %d %s", code, body)
		}
		return th.ID
	}
	start := time.Now()
	both, orphan := deleted(ca), deleted(cc)
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.wait(10 * time.Second)

	outcomes := func(id string) (removed, nothing int) {
		ra, na := purgeLines(a, id)
		rb, nb := purgeLines(b, id)
		return ra + rb, na + nb
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r1, n1 := outcomes(both)
		r2, n2 := outcomes(orphan)
		if r1+n1 >= 2 && r2+n2 >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deletes were not purged within 30 s:\nA:\n%s\nB:\n%s", a.log.String(), b.log.String())
		}
	}
	t.Logf("purged %v after the deletes (undo window 10 s)", time.Since(start))
	for name, id := range map[string]string{"deleted on A": both, "deleted on C, then C killed": orphan} {
		if removed, nothing := outcomes(id); removed != 1 || nothing != 1 {
			t.Errorf("the thread %s: removed %d times, found gone %d times by A and B; want one of each", name, removed, nothing)
		}
		if _, err := os.Stat(filepath.Join(shared, id)); !os.IsNotExist(err) {
			t.Errorf("the thread %s: its workspace after its purge: %v, want it gone", name, err)
		}
		if code, _ := cb.status("POST", "/api/threads/"+id+"/restore", nil); code != http.StatusNotFound {
			t.Errorf("the thread %s: restore via B after its purge: %d, want 404", name, code)
		}
	}
	stopHerd(t, a)
	stopHerd(t, b)
}

// TestClusterToolProgressOnEveryInstance: the lead's own call of a real
// MCP server's trigger-long-running-operation on A streams its progress
// as tool_progress frames to pages of the thread on A and on B alike, in
// order up to the last step, before the call's result.
func TestClusterToolProgressOnEveryInstance(t *testing.T) {
	mcpEnv := everythingEnv(t)
	dsn := pgtest.DSN(t)
	env := clusterEnv(dsn, "HERD_WORKSPACES_DIR="+t.TempDir(),
		mcpEnv,
		"HERD_LEAD_TOOLS=['mcp:everything/trigger-long-running-operation']")
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca, cb := a.signIn(), b.signIn()
	var th struct{ ID string }
	ca.call("POST", "/api/threads", map[string]string{"title": "progress"}, &th)
	onA, onB := dialStream(t, a, ca, th.ID), dialStream(t, b, cb, th.ID)
	ca.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": `use everything/trigger-long-running-operation with {"duration": 1, "steps": 4}`}, nil)
	for _, on := range []struct {
		name string
		p    *proc
		ws   *websocket.Conn
	}{{"A", a, onA}, {"B", b, onB}} {
		var progress []string
		for done := false; !done; {
			f := readFrame(t, on.ws, on.p)
			var d struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			_ = json.Unmarshal(f.Data, &d)
			switch {
			case f.Type == "tool_progress":
				progress = append(progress, d.Text)
			case f.Type == "message" && d.Type == "tool":
				done = true
			}
		}
		if n := len(progress); n < 2 || progress[n-1] != "trigger-long-running-operation: 4 of 4" {
			t.Errorf("tool_progress frames on %s = %q, want the steps up to 4 of 4", on.name, progress)
		}
	}
	stopHerd(t, a)
	stopHerd(t, b)
}
