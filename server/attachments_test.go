package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"herd/agent"
	"herd/agent/demo"
	"herd/agent/tools"
)

// workspaceFiles lists every name under dir, links and FIFOs included,
// with their sizes: what a refused request must leave as it was.
func workspaceFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %v %d", p, info.Mode().Type(), info.Size()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRunAttachmentsRefused: the run route refuses each bad attachment
// with a 400 that names it (traversal, absolute, missing, a symlink out,
// a FIFO, a folder, too many, not a list of paths), before anything is
// written: no record, no run, the workspace as it was. A new thread takes
// none (it has no files yet) and is not made.
func TestRunAttachmentsRefused(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	ws := filepath.Join(a.dir, "workspaces", th)
	outside := t.TempDir()
	for path, data := range map[string]string{filepath.Join(ws, "uploads", "report.csv"): "a,b\n1,2\n", filepath.Join(outside, "secret.txt"): "secret\n"} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "uploads", "leak.txt")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "uploads", "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := workspaceFiles(t, ws)
	tooMany := slices.Repeat([]string{"uploads/report.csv"}, agent.MaxAttachments+1)

	for _, c := range []struct {
		name, body, msg string
	}{
		{"traversal", `{"content":"hi","attachments":["uploads/report.csv","../` + th + `/uploads/report.csv"]}`, `attachments[1] "../`},
		{"absolute", `{"content":"hi","attachments":["` + filepath.Join(outside, "secret.txt") + `"]}`, "not a clean path"},
		{"missing", `{"content":"hi","attachments":["uploads/none.csv"]}`, `attachments[0] "uploads/none.csv": no such file`},
		{"symlink out", `{"content":"hi","attachments":["uploads/leak.txt"]}`, `"uploads/leak.txt": leads outside the thread's workspace`},
		{"fifo", `{"content":"hi","attachments":["uploads/pipe"]}`, `"uploads/pipe": not a regular file`},
		{"folder", `{"content":"hi","attachments":["uploads"]}`, `"uploads": not a regular file`},
		{"too many", fmt.Sprintf(`{"content":"hi","attachments":%s}`, mustMarshal(t, tooMany)), "a message attaches at most 20"},
		{"not a list", `{"content":"hi","attachments":"uploads/report.csv"}`, "attachments"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := u.do("POST", "/api/threads/"+th+"/runs", c.body)
			var e struct {
				Error struct{ Message string } `json:"error"`
			}
			_ = json.Unmarshal(r.body, &e)
			if r.status != http.StatusBadRequest || !strings.Contains(e.Error.Message, c.msg) {
				t.Fatalf("%d %.300s; want 400 saying %q", r.status, r.body, c.msg)
			}
			if c.name != "not a list" && r.errorCode() != "bad_attachment" {
				t.Errorf("code %q, want bad_attachment", r.errorCode())
			}
		})
	}
	if n, _ := a.store.LastSeq(context.Background(), th); n != 0 {
		t.Errorf("refused runs wrote %d records", n)
	}
	if runs, _ := a.store.Runs(context.Background(), th); len(runs) != 0 {
		t.Errorf("refused runs started %d runs", len(runs))
	}
	if after := workspaceFiles(t, ws); !slices.Equal(after, before) {
		t.Errorf("the workspace changed:\n%q\nwant\n%q", after, before)
	}

	r := u.do("POST", "/api/threads", `{"content":"hi","attachments":["uploads/report.csv"]}`)
	if r.status != http.StatusBadRequest || r.errorCode() != "bad_attachment" {
		t.Errorf("a new thread with attachments: %d %s, want 400", r.status, r.body)
	}
	var list struct {
		Threads []threadJSON `json:"threads"`
	}
	u.mustJSON("GET", "/api/threads", nil, http.StatusOK, &list)
	if len(list.Threads) != 1 {
		t.Errorf("%d threads after the refusal, want the one made before", len(list.Threads))
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// leadNotes records the note of attached files in the human message of
// each lead request, in order ("" for a message with none).
type leadNotes struct {
	demo agent.Provider
	mu   sync.Mutex
	seen []string
}

func (p *leadNotes) Complete(ctx context.Context, req agent.Request, onDelta func(string)) (agent.Response, error) {
	if slices.ContainsFunc(req.Tools, func(s tools.Spec) bool { return s.Name == agent.ToolTask }) {
		note := ""
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if m := req.Messages[i]; m.Type == agent.TypeHuman {
				_, note, _ = strings.Cut(m.Content, agent.AttachedNote)
				break
			}
		}
		p.mu.Lock()
		p.seen = append(p.seen, note)
		p.mu.Unlock()
	}
	return p.demo.Complete(ctx, req, onDelta)
}

func (p *leadNotes) last() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[len(p.seen)-1]
}

// TestRunAttachmentsKept: a run's message keeps its attachments with
// their sizes and sniffed types (additional_kwargs.attachments, in the
// thread's JSON); its lead is told of them, and so is a Retry's, which
// answers the same message; an Edit keeps them unless it sends its own.
func TestRunAttachmentsKept(t *testing.T) {
	p := &leadNotes{demo: demo.New(demoModel("demo-fast", 0, 0))}
	a := newApp(t, func(c *appConfig) { c.provider = p })
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	ws := filepath.Join(a.dir, "workspaces", th)
	if err := os.MkdirAll(filepath.Join(ws, "uploads"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "uploads", "report.png"), []byte("not a picture\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var started struct {
		RunID     string `json:"run_id"`
		MessageID string `json:"message_id"`
	}
	u.mustJSON("POST", "/api/threads/"+th+"/runs", map[string]any{"content": "hello", "attachments": []string{"uploads/report.png"}}, http.StatusAccepted, &started)
	a.waitIdle(th)
	const line = "\n- uploads/report.png (14 bytes, text/plain)"
	if got := p.last(); got != line {
		t.Errorf("the lead was told %q, want %q", got, line)
	}
	var thread struct {
		Messages []struct {
			ID               string          `json:"id"`
			Type             string          `json:"type"`
			AdditionalKwargs json.RawMessage `json:"additional_kwargs"`
		} `json:"messages"`
	}
	humanKwargs := func() []string {
		u.mustJSON("GET", "/api/threads/"+th, nil, http.StatusOK, &thread)
		var out []string
		for _, m := range thread.Messages {
			if m.Type == agent.TypeHuman {
				out = append(out, string(m.AdditionalKwargs))
			}
		}
		return out
	}
	want := `{"attachments":[{"path":"uploads/report.png","size":14,"type":"text/plain"}]}`
	if got := humanKwargs(); len(got) != 1 || got[0] != want {
		t.Errorf("the message's additional_kwargs %q, want %s", got, want)
	}

	u.mustJSON("POST", "/api/threads/"+th+"/runs/"+started.RunID+"/retry", nil, http.StatusAccepted, nil)
	a.waitIdle(th)
	if got := p.last(); got != line {
		t.Errorf("the Retry's lead was told %q, want %q", got, line)
	}

	u.mustJSON("POST", "/api/threads/"+th+"/messages/"+started.MessageID+"/edit", map[string]any{"content": "hello again"}, http.StatusAccepted, &started)
	a.waitIdle(th)
	if got := p.last(); got != line {
		t.Errorf("the Edit's lead was told %q, want %q", got, line)
	}
	if got := humanKwargs(); len(got) != 1 || got[0] != want {
		t.Errorf("the edited message's additional_kwargs %q, want %s", got, want)
	}
	u.mustJSON("POST", "/api/threads/"+th+"/messages/"+started.MessageID+"/edit", map[string]any{"content": "without", "attachments": []string{}}, http.StatusAccepted, nil)
	a.waitIdle(th)
	if got := p.last(); got != "" {
		t.Errorf("an Edit that sends no attachments told its lead %q", got)
	}
}
