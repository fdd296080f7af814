package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"herd/agent/openai/openaitest"
	"herd/internal/pgtest"
)

// titlingModel is the environment of a cluster whose first model is an
// OpenAI-compatible fake: it names threads title, once release is
// closed, for a call of 76 tokens, and answers the lead at once (520).
func titlingModel(t *testing.T, title string) (release chan struct{}, env []string) {
	fake := openaitest.NewServer(t)
	release = make(chan struct{})
	fake.SetFallback(func(req openaitest.ChatRequest) openaitest.Reply {
		if len(req.Messages) > 0 && strings.HasPrefix(req.Messages[0].Text(), "You name chat threads.") {
			select {
			case <-release:
			case <-time.After(60 * time.Second):
			}
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
// the title come before the stream); B's
// stream then gets the new title and the call's usage live, as A's would;
// and B's page shows the title once the call is over.
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
	close(release)
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

// TestClusterPurgeClaimedOnce: a thread deleted on A is purged once its
// undo window is over by whichever instance claims it first: both try
// (each schedules every delete), exactly one removes it, with its
// workspace in the shared directory, and the other finds nothing to
// remove. A thread deleted on A just before A is killed is purged by B
// on time.
func TestClusterPurgeClaimedOnce(t *testing.T) {
	dsn := pgtest.DSN(t)
	shared := t.TempDir()
	env := clusterEnv(dsn, "HERD_WORKSPACES_DIR="+shared, "HERD_LOG_LEVEL=debug")
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca, cb := a.signIn(), b.signIn()
	thread := func() string {
		var th struct{ ID string }
		ca.call("POST", "/api/threads", map[string]string{"title": "to delete"}, &th)
		// What a tool left in the thread's workspace.
		if err := os.MkdirAll(filepath.Join(shared, th.ID, "notes"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shared, th.ID, "notes", "a.txt"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		return th.ID
	}
	gone := func(id string, timeout time.Duration, done func() bool) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("thread %s not purged within %v:\nA:\n%s\nB:\n%s", id, timeout, a.log.String(), b.log.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, err := os.Stat(filepath.Join(shared, id)); !os.IsNotExist(err) {
			t.Errorf("thread %s's workspace after its purge: %v, want it gone", id, err)
		}
		if code, _ := cb.status("POST", "/api/threads/"+id+"/restore", nil); code != http.StatusNotFound {
			t.Errorf("restore of the purged thread %s via B: %d, want 404", id, code)
		}
	}

	both := thread()
	start := time.Now()
	if code, body := ca.status("DELETE", "/api/threads/"+both, nil); code != http.StatusNoContent {
		t.Fatalf("delete via A: %d %s", code, body)
	}
	gone(both, 30*time.Second, func() bool {
		ra, na := purgeLines(a, both)
		rb, nb := purgeLines(b, both)
		return ra+rb+na+nb >= 2
	})
	ra, na := purgeLines(a, both)
	rb, nb := purgeLines(b, both)
	if ra+rb != 1 || na+nb != 1 {
		t.Errorf("purges of %s: removed on A %d, on B %d; found nothing on A %d, on B %d; want one removal and one instance finding nothing", both, ra, rb, na, nb)
	}
	t.Logf("the thread deleted on A was purged %v after its delete (undo window 10 s)", time.Since(start))

	orphan := thread()
	if code, body := ca.status("DELETE", "/api/threads/"+orphan, nil); code != http.StatusNoContent {
		t.Fatalf("delete via A: %d %s", code, body)
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.wait(10 * time.Second)
	gone(orphan, 20*time.Second, func() bool {
		removed, _ := purgeLines(b, orphan)
		return removed == 1
	})
	stopHerd(t, b)
}

// TestClusterToolProgressOnEveryInstance: the lead's own call of a real
// MCP server's trigger-long-running-operation on A streams its progress
// as tool_progress frames to pages of the thread on A and on B alike, in
// order up to the last step, before the call's result.
func TestClusterToolProgressOnEveryInstance(t *testing.T) {
	bin, err := filepath.Abs(everythingServer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run `make test` (or `make mcp-test-server`), which installs it with npm: %v", everythingServer, err)
	}
	dsn := pgtest.DSN(t)
	env := clusterEnv(dsn, "HERD_WORKSPACES_DIR="+t.TempDir(),
		"HERD_MCP_SERVERS=[{name: everything, command: '"+bin+"', timeout_seconds: 30}]",
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
