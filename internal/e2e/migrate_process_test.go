package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"herd/internal/pgtest"
	"herd/models"
)

// runMigrateCmd runs the herd binary's migrate with args and env, and
// returns its exit code and output.
func runMigrateCmd(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(herdBinary(t), append([]string{"migrate"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// instance is what a user of an instance sees of it, as far as a move
// must keep it: the threads with their messages, cards and records by
// seq, the usage figures, the settings and the admin's ledger.
type instance struct {
	Titles   map[string]string
	Messages map[string][]string         // thread → "seq type id content"
	Cards    map[string][]string         // thread → "task status"
	Records  map[string]map[int64]string // thread → seq → what (HTTP)
	Replay   map[string]map[int64]string // thread → seq → frame type (WebSocket)
	LastSeq  map[string]int64
	Usage    map[string]string // thread → its usage JSON
	Admin    string            // the admin usage history's JSON
	Settings string
	Prefs    string
}

func readInstance(t *testing.T, p *proc, c *client) instance {
	t.Helper()
	in := instance{Titles: map[string]string{}, Messages: map[string][]string{}, Cards: map[string][]string{}, Records: map[string]map[int64]string{},
		Replay: map[string]map[int64]string{}, LastSeq: map[string]int64{}, Usage: map[string]string{}}
	var list struct {
		Threads []struct{ ID, Title string }
	}
	c.call("GET", "/api/threads", nil, &list)
	for _, th := range list.Threads {
		in.Titles[th.ID] = th.Title
		var st struct {
			Messages []struct {
				ID, Type, Content string
				Seq               int64
			}
			Tasks []struct {
				TaskID string `json:"task_id"`
				Status string
			}
			LastSeq int64 `json:"last_seq"`
		}
		c.call("GET", "/api/threads/"+th.ID, nil, &st)
		for _, m := range st.Messages {
			in.Messages[th.ID] = append(in.Messages[th.ID], strings.Join([]string{itoa(m.Seq), m.Type, m.ID, m.Content}, " "))
		}
		for _, task := range st.Tasks {
			in.Cards[th.ID] = append(in.Cards[th.ID], task.TaskID+" "+task.Status)
		}
		in.LastSeq[th.ID] = st.LastSeq
		in.Records[th.ID] = allSeqs(c, th.ID)
		in.Replay[th.ID] = replayFrames(t, p, c, th.ID, st.LastSeq)
		in.Usage[th.ID] = rawGet(c, "/api/threads/"+th.ID+"/usage")
	}
	in.Admin = rawGet(c, "/api/admin/usage?days=7")
	in.Settings = rawGet(c, "/api/settings")
	in.Prefs = rawGet(c, "/api/account/preferences")
	return in
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func rawGet(c *client, path string) string {
	var v json.RawMessage
	c.call("GET", path, nil, &v)
	return string(v)
}

// replayFrames opens threadID's stream from the start and reads the
// replayed frames up to last: seq → frame type.
func replayFrames(t *testing.T, p *proc, c *client, threadID string, last int64) map[int64]string {
	t.Helper()
	hdr := http.Header{"Origin": {p.url}}
	for _, ck := range c.http.Jar.Cookies(mustParse(p.url)) {
		hdr.Add("Cookie", ck.Name+"="+ck.Value)
	}
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(p.url, "http")+"/api/threads/"+threadID+"/stream?after_seq=0", hdr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	out := map[int64]string{}
	for int64(len(out)) < last {
		_, raw, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("replay of %s ended after %d of %d records: %v", threadID, len(out), last, err)
		}
		var f frame
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		if f.Seq != nil {
			out[*f.Seq] = f.Type + " " + f.Data.TaskID
		}
	}
	return out
}

// TestMigrateRoundTrip fills an instance on SQLite through the real
// server (two users, preferences, an API token, the token gate, threads
// with demo runs and cards), refuses to copy it while it serves, copies it
// once stopped, refuses to copy into the now non-empty target, then
// serves the copy on PostgreSQL: the same threads, messages, cards and
// records by seq over HTTP and the WebSocket replay, the same usage and
// settings, the old password and token still sign in, and a new run goes
// on from the thread's last seq.
func TestMigrateRoundTrip(t *testing.T) {
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	quick := []string{"HERD_MODELS_0_LATENCY_MS=20", "HERD_MODELS_1_LATENCY_MS=20"}
	p := startHerdWith(t, dir, quick...)
	c := p.signIn()
	c.call("POST", "/api/admin/users", map[string]string{"email": "bob@example.com", "password": "bob's long password"}, nil)
	c.call("PUT", "/api/account/preferences", map[string]string{"theme": "dark"}, nil)
	var tok struct{ Token string }
	c.call("POST", "/api/tokens", map[string]string{"name": "ci"}, &tok)
	var a, b struct{ ID string }
	c.call("POST", "/api/threads", map[string]string{"title": "first"}, &a)
	streamRun(t, p, c, a.ID, "Check:\n- alpha\n- beta\n- researcher: gamma")
	streamRun(t, p, c, a.ID, "And once more:\n- delta")
	c.call("POST", "/api/threads", map[string]string{"title": "second"}, &b)
	streamRun(t, p, c, b.ID, "Look at:\n- one\n- two")
	bob := p.signInAs("bob@example.com", "bob's long password")
	var bobs struct{ ID string }
	bob.call("POST", "/api/threads", map[string]string{"title": "bob's"}, &bobs)
	streamRun(t, p, bob, bobs.ID, "Just one:\n- thing")
	// The admin's toggle is a setting: after the move the figures stay
	// hidden, and the admin's ledger (never gated) must be the same.
	c.call("PUT", "/api/admin/settings", map[string]bool{"token_usage_enabled": false}, nil)
	before := readInstance(t, p, c)
	if len(before.Titles) != 2 || len(before.Cards[a.ID]) != 4 {
		t.Fatalf("the source instance: %d threads, %d cards in the first; want 2 and 4", len(before.Titles), len(before.Cards[a.ID]))
	}

	from := filepath.Join(dir, "herd.db")
	env := []string{"HERD_DATABASE_DSN=" + dsn}
	if code, out := runMigrateCmd(t, env, "--from", from); code != 1 || !strings.Contains(out, "is in use by another herd") || !strings.Contains(out, "at rest") {
		t.Errorf("migrate while herd serves the source: exit %d\n%s", code, out)
	}
	stopHerd(t, p)
	// The data directory names its database.
	code, out := runMigrateCmd(t, env, "--from", dir)
	if code != 0 {
		t.Fatalf("migrate: exit %d\n%s", code, out)
	}
	for _, want := range []string{"run_events", "Verified: the rows of every table, the last seq of all 3 threads", "rows/s", "Done."} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
	t.Logf("herd migrate:\n%s", out)
	if code, out := runMigrateCmd(t, env, "--from", from); code != 1 || !strings.Contains(out, "already holds herd data") || !strings.Contains(out, "--replace") {
		t.Errorf("migrate into the filled target: exit %d\n%s", code, out)
	}

	p2 := startHerdWith(t, t.TempDir(), append(pgEnv(dsn), quick...)...)
	c2 := p2.signIn()
	after := readInstance(t, p2, c2)
	compareInstances(t, before, after)
	// The token made on SQLite still signs in.
	req, _ := http.NewRequest("GET", p2.url+"/api/auth/me", nil)
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the API token after the move: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	p2.signInAs("bob@example.com", "bob's long password")
	// A new run goes on from the thread's last seq, gap-free, and what
	// came before it is untouched.
	c2.send(a.ID, "After the move:\n- epsilon")
	recs := allSeqs(c2, a.ID)
	last := before.LastSeq[a.ID]
	for seq := int64(1); seq <= int64(len(recs)); seq++ {
		if _, ok := recs[seq]; !ok {
			t.Fatalf("after a new run the thread's seqs have a gap at %d: %v", seq, recs)
		}
		if seq <= last && recs[seq] != before.Records[a.ID][seq] {
			t.Errorf("seq %d is %q after a new run, was %q", seq, recs[seq], before.Records[a.ID][seq])
		}
	}
	if int64(len(recs)) <= last {
		t.Errorf("the run after the move added no records past %d", last)
	}
	stopHerd(t, p2)
}

func compareInstances(t *testing.T, before, after instance) {
	t.Helper()
	eq := func(what string, a, b any) {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			t.Errorf("%s differ after the move:\nbefore %s\nafter  %s", what, ja, jb)
		}
	}
	eq("thread titles", before.Titles, after.Titles)
	eq("last seqs", before.LastSeq, after.LastSeq)
	eq("messages", before.Messages, after.Messages)
	eq("cards", before.Cards, after.Cards)
	eq("records", before.Records, after.Records)
	eq("replayed frames", before.Replay, after.Replay)
	eq("thread usage", before.Usage, after.Usage)
	eq("admin usage", before.Admin, after.Admin)
	eq("settings", before.Settings, after.Settings)
	eq("preferences", before.Prefs, after.Prefs)
	if !strings.Contains(after.Prefs, `"dark"`) || !strings.Contains(after.Settings, "false") {
		t.Errorf("preferences %s, settings %s: want the dark theme and the token gate off", after.Prefs, after.Settings)
	}
	for id, recs := range after.Replay {
		if int64(len(recs)) != after.LastSeq[id] || !slices.ContainsFunc(mapValues(recs), func(s string) bool { return strings.HasPrefix(s, "task_completed") }) {
			t.Errorf("thread %s replays %d records (want %d) with a completed card", id, len(recs), after.LastSeq[id])
		}
	}
}

func mapValues(m map[int64]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestMigrateBadInput: every mistake exits non-zero with a message that
// says what to do, and writes nothing.
func TestMigrateBadInput(t *testing.T) {
	dir := t.TempDir()
	notHerd := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notHerd, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing", "herd.db")
	tests := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"no source", nil, []string{"--to", "postgres://h/d"}, 2, "--from is required"},
		{"no target", []string{"HERD_DATABASE_DSN="}, []string{"--from", missing}, 2, "give the target as --to DSN or in HERD_DATABASE_DSN"},
		{"stray argument", nil, []string{"--from", missing, "--to", "postgres://h/d", "extra"}, 2, `unexpected argument "extra"`},
		{"missing file", nil, []string{"--from", missing, "--to", "postgres://h/d"}, 1, "no database at " + missing},
		{"not a database", nil, []string{"--from", notHerd, "--to", "postgres://h/d"}, 1, "file is not a database"},
		{"bad DSN", nil, []string{"--from", sourceDB(t), "--to", "postgres://herd:s3cret@h:notaport/d"}, 1, "not a valid PostgreSQL connection string"},
		{"unreachable server", nil, []string{"--from", sourceDB(t), "--to", "postgres://herd@127.0.0.1:1/herd?connect_timeout=2"}, 1, "open PostgreSQL database herd@127.0.0.1:1/herd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := runMigrateCmd(t, tt.env, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.want) {
				t.Errorf("exit %d, want %d with %q:\n%s", code, tt.code, tt.want, out)
			}
			if strings.Contains(out, "s3cret") {
				t.Errorf("the message shows the password:\n%s", out)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); err == nil {
		t.Error("migrate created the missing source's directory")
	}
}

// sourceDB is a fresh, empty herd database.
func sourceDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "herd.db")
	s, err := models.Open(path, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
