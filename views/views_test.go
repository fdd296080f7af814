package views

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"
	"golang.org/x/net/html"
)

const testCSRF = "csrf-token-123"

var (
	testTime  = time.Date(2025, 3, 14, 9, 26, 0, 0, time.UTC)
	testUser  = &User{ID: "u1", Email: "ann@example.com"}
	testAdmin = &User{ID: "u2", Email: "root@example.com", Admin: true}
)

func page(u *User) Page {
	return Page{Title: "T", User: u, CSRF: testCSRF, Assets: map[string]string{"app.js": "/static/app.abc123.js"}}
}

func stateJSON(t *testing.T, v map[string]any) string {
	t.Helper()
	// Encode without HTML escaping, as a careless handler might: the view
	// must stay safe whatever the handler does.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func threadPage(t *testing.T, u *User, title string) ThreadPage {
	return ThreadPage{
		Page:   page(u),
		Thread: ThreadItem{ID: "th-1", Title: title, UpdatedAt: testTime},
		Messages: []MessageView{
			{ID: "m1", Seq: 1, Type: "human", HTML: "<p>List these</p>"},
			{ID: "m2", Seq: 2, Type: "ai", HTML: "<p>On it</p>", ModelName: "demo-fast", ToolCalls: []ToolCallView{
				{ID: "call-bash", Name: "bash", Args: `{"command":"ls <b>"}`},
				{ID: "call-task", Name: "task", Args: `{"description":"x"}`},
			}},
			{ID: "m3", Seq: 3, Type: "tool", ToolCallID: "call-bash", Content: "a.txt\n<script>x</script>", HTML: "<p>ignored</p>"},
			{ID: "m4", Seq: 4, Type: "tool", ToolCallID: "call-task", Content: "Task Succeeded. Result: ok"},
			{ID: "m5", Seq: 5, Type: "ai", HTML: "<p>Partial</p>", Stopped: true},
		},
		Models: []ModelOption{
			{Name: "gpt", Label: "GPT", Provider: "openai"},
			{Name: "demo-fast", Label: "Demo Fast", Provider: "demo"},
		},
		DefaultModel: "demo-fast",
		LastSeq:      5,
		StateJSON: stateJSON(t, map[string]any{
			"thread_id": "th-1", "title": title, "last_seq": 5, "active_run_id": nil,
			"token_usage_enabled": true,
		}),
	}
}

// pages is every full page with representative data.
func pages(t *testing.T) map[string]templ.Component {
	return map[string]templ.Component{
		"setup":  Setup(SetupPage{Page: page(nil), Email: "a@b.c", Token: "one-time"}),
		"login":  Login(LoginPage{Page: page(nil), Email: "a@b.c", AllowSignup: true, Next: "/threads/x", Passwords: true, Providers: []ProviderButton{{Name: "corp", Label: "Corp", Down: "Corp cannot be reached right now"}}}),
		"signup": Signup(SignupPage{Page: page(nil)}),
		"threads": ThreadList(ThreadListPage{Page: page(testUser), Threads: []ThreadItem{
			{ID: "th-1", Title: "First", UpdatedAt: testTime}, {ID: "th-2", UpdatedAt: testTime},
		}}),
		"thread": Thread(threadPage(t, testUser, "Hello")),
		"settings": Settings(SettingsPage{Page: page(testUser), NewToken: "herd_secret", NewName: "cli", Tokens: []TokenView{
			{ID: "tok1", Name: "cli", Prefix: "herd_sec", CreatedAt: testTime},
			{ID: "tok2", Name: "ci", Prefix: "herd_abc", CreatedAt: testTime, LastUsedAt: &testTime},
		}}),
		"admin": Admin(AdminPage{Page: page(testAdmin), TokenUsageEnabled: true,
			ConsoleModels: []ConsoleModelView{{Name: "demo-fast", DisplayName: "Demo Fast", Provider: "demo", FromFile: true, Default: true},
				{Name: "gpt", DisplayName: "GPT", Provider: "openai", Model: "gpt-4o", BaseURL: "https://api.openai.com/v1", APIKey: "…abcd", Stream: "auto"}},
			Agents: []AgentTypeView{{Name: "researcher", Description: "Researches", FromFile: true}, {Name: "writer", Description: "Writes", Model: "gpt", Tools: "read_file, ls", MaxTurns: "8"}},
			Limits: []LimitView{{Name: "lead_max_turns", Label: "Lead turns per run", Value: 9, File: 25, Set: true}},
			Users: []UserView{
				{ID: "u2", Email: "root@example.com", Role: "admin", CreatedAt: testTime, Self: true},
				{ID: "u1", Email: "ann@example.com", Role: "user", CreatedAt: testTime, Disabled: true},
			}}),
		"account": Account(AccountPage{Page: page(testUser), Sessions: []SessionView{
			{ID: "s1", CreatedAt: testTime, LastSeenAt: &testTime, UserAgent: "Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0", IP: "127.0.0.1", Current: true},
			{ID: "s2", CreatedAt: testTime, UserAgent: "curl/8.0"},
		}}),
		"error": Error(ErrorPage{Page: page(testUser), Status: 404, Message: "Thread not found"}),
		"usage": AdminUsage(usagePage(3)),
	}
}

func render(t *testing.T, c templ.Component) string {
	t.Helper()
	var b strings.Builder
	if err := c.Render(context.Background(), &b); err != nil {
		t.Fatalf("render: %v", err)
	}
	return b.String()
}

func parse(t *testing.T, s string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(s))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return doc
}

func elements(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && match(d) {
			out = append(out, d)
		}
	}
	return out
}

func byTag(tag string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Data == tag }
}

func byID(id string) func(*html.Node) bool {
	return func(n *html.Node) bool { return attr(n, "id") == id }
}

func byClass(class string) func(*html.Node) bool {
	return func(n *html.Node) bool {
		v, _ := attrOK(n, "class")
		return strings.Contains(" "+v+" ", " "+class+" ")
	}
}

func one(t *testing.T, n *html.Node, what string, match func(*html.Node) bool) *html.Node {
	t.Helper()
	got := elements(n, match)
	if len(got) != 1 {
		t.Fatalf("%s: found %d elements, want 1", what, len(got))
	}
	return got[0]
}

func attrOK(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func attr(n *html.Node, key string) string {
	v, _ := attrOK(n, key)
	return v
}

func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return b.String()
}

// TestPagesAreCSPSafe checks what the Content-Security-Policy (script-src
// 'self', no inline styles) and CSRF protection need of every page.
func TestPagesAreCSPSafe(t *testing.T) {
	for name, c := range pages(t) {
		t.Run(name, func(t *testing.T) {
			doc := parse(t, render(t, c))
			for _, n := range elements(doc, func(*html.Node) bool { return true }) {
				if n.Data == "style" {
					t.Errorf("<style> element found")
				}
				for _, a := range n.Attr {
					if a.Key == "style" {
						t.Errorf("<%s style=%q>: inline style", n.Data, a.Val)
					}
					if strings.HasPrefix(a.Key, "on") {
						t.Errorf("<%s %s=%q>: inline handler", n.Data, a.Key, a.Val)
					}
					if strings.HasPrefix(strings.TrimSpace(strings.ToLower(a.Val)), "javascript:") {
						t.Errorf("<%s %s=%q>: javascript URL", n.Data, a.Key, a.Val)
					}
				}
			}
			for _, s := range elements(doc, byTag("script")) {
				switch typ := attr(s, "type"); {
				case typ == "module" && attr(s, "src") != "" && s.FirstChild == nil:
				case typ == "application/json" && attr(s, "id") == "herd-state":
				default:
					t.Errorf("script type=%q src=%q: only the module and the JSON data block are allowed", typ, attr(s, "src"))
				}
			}
			forms := elements(doc, func(n *html.Node) bool { return n.Data == "form" && attr(n, "method") == "post" })
			if len(forms) == 0 && name != "thread" && name != "usage" {
				t.Errorf("no POST form found")
			}
			for _, f := range forms {
				csrf := elements(f, func(n *html.Node) bool {
					return n.Data == "input" && attr(n, "type") == "hidden" && attr(n, "name") == "_csrf"
				})
				if len(csrf) != 1 || attr(csrf[0], "value") != testCSRF {
					t.Errorf("form action=%q: want one hidden _csrf input with the page token", attr(f, "action"))
				}
			}
		})
	}
}

func TestLayoutHead(t *testing.T) {
	tests := []struct {
		name     string
		user     *User
		wantMeta bool
	}{
		{"signed out", nil, false},
		{"signed in", testUser, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := parse(t, render(t, Error(ErrorPage{Page: page(tt.user), Status: 500})))
			metas := elements(doc, func(n *html.Node) bool { return n.Data == "meta" && attr(n, "name") == "csrf-token" })
			if got := len(metas) == 1 && attr(metas[0], "content") == testCSRF; got != tt.wantMeta {
				t.Errorf("csrf-token meta with the token: got %v, want %v", got, tt.wantMeta)
			}
			if got := len(elements(doc, func(n *html.Node) bool { return attr(n, "action") == "/logout" })); got != map[bool]int{false: 0, true: 1}[tt.wantMeta] {
				t.Errorf("sign-out forms: got %d", got)
			}
			js := one(t, doc, "script", byTag("script"))
			if got, want := attr(js, "src"), "/static/app.abc123.js"; got != want {
				t.Errorf("script src: got %q, want the hashed asset %q", got, want)
			}
			css := one(t, doc, "stylesheet", func(n *html.Node) bool { return attr(n, "rel") == "stylesheet" })
			if got, want := attr(css, "href"), "/static/app.css"; got != want {
				t.Errorf("stylesheet href: got %q, want the fallback %q", got, want)
			}
		})
	}
}

func TestAdminLinkOnlyForAdmins(t *testing.T) {
	tests := []struct {
		name string
		user *User
		want int
	}{
		{"user", testUser, 0},
		{"admin", testAdmin, 1},
		{"signed out", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := parse(t, render(t, ThreadList(ThreadListPage{Page: page(tt.user)})))
			links := elements(doc, func(n *html.Node) bool { return n.Data == "a" && attr(n, "href") == "/admin" })
			if len(links) != tt.want {
				t.Errorf("links to /admin: got %d, want %d", len(links), tt.want)
			}
		})
	}
}

func TestThreadStateCannotBreakOut(t *testing.T) {
	const title = `</script><img src=x onerror=alert(1)><script>alert(2)</script>`
	p := threadPage(t, testUser, title)
	out := render(t, Thread(p))
	doc := parse(t, out)

	if imgs := elements(doc, byTag("img")); len(imgs) != 0 {
		t.Errorf("the title injected %d <img> elements", len(imgs))
	}
	if n := len(elements(doc, byTag("script"))); n != 2 {
		t.Errorf("script elements: got %d, want 2 (the module and the data block)", n)
	}
	block := one(t, doc, "#herd-state", byID("herd-state"))
	if got := attr(block, "type"); got != "application/json" {
		t.Errorf("#herd-state type: got %q, want application/json", got)
	}
	var got, want map[string]any
	if err := json.Unmarshal([]byte(text(block)), &got); err != nil {
		t.Fatalf("#herd-state is not JSON: %v", err)
	}
	if err := json.Unmarshal([]byte(p.StateJSON), &want); err != nil {
		t.Fatal(err)
	}
	if got["title"] != want["title"] || got["thread_id"] != "th-1" || got["last_seq"] != float64(5) {
		t.Errorf("#herd-state: got %v, want %v", got, want)
	}
	if h1 := one(t, doc, "#thread-title", byID("thread-title")); text(h1) != title {
		t.Errorf("title text: got %q, want %q", text(h1), title)
	}
}

func TestThreadComposer(t *testing.T) {
	tests := []struct {
		name     string
		activeID string
		wantStop bool
	}{
		{"no active run", "", false},
		{"active run", "run-9", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := threadPage(t, testUser, "Hi")
			p.ActiveRunID = tt.activeID
			doc := parse(t, render(t, Thread(p)))

			stop := one(t, doc, "#stop-button", byID("stop-button"))
			if _, hidden := attrOK(stop, "hidden"); hidden == tt.wantStop {
				t.Errorf("stop hidden: got %v, want %v", hidden, !tt.wantStop)
			}
			send := one(t, doc, "#send-button", byID("send-button"))
			if _, disabled := attrOK(send, "disabled"); !disabled {
				t.Errorf("send must start disabled until app.js takes over")
			}
			for _, id := range []string{"composer", "composer-input", "composer-error", "conn-status", "messages"} {
				one(t, doc, "#"+id, byID(id))
			}
		})
	}
}

func TestModelPicker(t *testing.T) {
	doc := parse(t, render(t, Thread(threadPage(t, testUser, "Hi"))))
	sel := one(t, doc, "#composer-model", byID("composer-model"))
	opts := elements(sel, byTag("option"))
	want := []struct {
		value, label string
		selected     bool
	}{
		{"gpt", "GPT", false},
		{"demo-fast", "Demo Fast (demo)", true},
	}
	if len(opts) != len(want) {
		t.Fatalf("options: got %d, want %d", len(opts), len(want))
	}
	for i, w := range want {
		_, selected := attrOK(opts[i], "selected")
		if attr(opts[i], "value") != w.value || text(opts[i]) != w.label || selected != w.selected {
			t.Errorf("option %d: got (%q, %q, %v), want (%q, %q, %v)",
				i, attr(opts[i], "value"), text(opts[i]), selected, w.value, w.label, w.selected)
		}
	}
}

func TestThreadMessages(t *testing.T) {
	doc := parse(t, render(t, Thread(threadPage(t, testUser, "Hi"))))
	list := one(t, doc, "#messages", byID("messages"))
	if got := elements(list, byID("empty-state")); len(got) != 0 {
		t.Errorf("empty state shown beside messages")
	}

	articles := elements(list, byTag("article"))
	var ids []string
	for _, a := range articles {
		ids = append(ids, attr(a, "id")+"/"+attr(a, "class")+"/"+attr(a, "data-seq"))
	}
	if got, want := strings.Join(ids, " "), "msg-m1/msg msg-human/1 msg-m2/msg msg-ai/2 msg-m5/msg msg-ai/5"; got != want {
		t.Errorf("articles: got %q, want %q (tool messages nest under their calls)", got, want)
	}

	call := one(t, list, "bash call", func(n *html.Node) bool { return attr(n, "data-tool-call-id") == "call-bash" })
	if call.Data != "details" || text(one(t, call, ".tool-name", byClass("tool-name"))) != "bash" {
		t.Errorf("bash call: want a <details> naming the tool")
	}
	if got := text(one(t, call, ".tool-args", byClass("tool-args"))); got != `{"command":"ls <b>"}` {
		t.Errorf("args: got %q, want the escaped JSON", got)
	}
	result := one(t, call, "#msg-m3", byID("msg-m3"))
	if got := text(result); got != "a.txt\n<script>x</script>" || attr(result, "data-seq") != "3" {
		t.Errorf("result: got %q seq %q, want the raw content as text", got, attr(result, "data-seq"))
	}
	slot := one(t, list, "task slot", byClass("task-slot"))
	if attr(slot, "data-task-id") != "call-task" || slot.FirstChild != nil {
		t.Errorf("task call: want an empty slot for its card")
	}
	if got := elements(doc, byID("msg-m4")); len(got) != 0 {
		t.Errorf("the task's tool message is shown; its card will show it")
	}
	stopped := one(t, list, "#msg-m5", byID("msg-m5"))
	if note := one(t, stopped, ".msg-note", byClass("msg-note")); text(note) != "Stopped" {
		t.Errorf("stopped note: got %q", text(note))
	}
}

func TestMessage(t *testing.T) {
	tests := []struct {
		name string
		m    MessageView
		want string
	}{
		{
			name: "human",
			m:    MessageView{ID: "a", Seq: 7, Type: "human", HTML: "<p>hi <em>there</em></p>"},
			want: `<article class="msg msg-human" id="msg-a" data-seq="7" data-run-id=""><div class="msg-body"><p>hi <em>there</em></p></div><div class="msg-actions"><button type="button" class="msg-copy button-quiet">Copy</button></div></article>`,
		},
		{
			name: "ai with model",
			m:    MessageView{ID: "b", Seq: 8, Type: "ai", HTML: "<p>ok</p>", ModelName: "demo-fast", ModelLabel: "Demo Fast"},
			want: `<article class="msg msg-ai" id="msg-b" data-seq="8" data-run-id=""><div class="msg-body"><p>ok</p></div><div class="msg-actions"><button type="button" class="msg-copy button-quiet">Copy</button></div><p class="msg-meta" title="demo-fast">Demo Fast</p></article>`,
		},
		{
			name: "ai with an unknown model",
			m:    MessageView{ID: "b", Seq: 8, Type: "ai", HTML: "<p>ok</p>", ModelName: "gone"},
			want: `<article class="msg msg-ai" id="msg-b" data-seq="8" data-run-id=""><div class="msg-body"><p>ok</p></div><div class="msg-actions"><button type="button" class="msg-copy button-quiet">Copy</button></div><p class="msg-meta" title="gone">gone</p></article>`,
		},
		{
			name: "ai with only a tool call",
			m:    MessageView{ID: "c", Seq: 9, Type: "ai", ModelName: "m", ToolCalls: []ToolCallView{{ID: "k", Name: "ls", Args: `{}`}}},
			want: `<article class="msg msg-ai" id="msg-c" data-seq="9" data-run-id=""><div class="msg-tools"><details class="tool-call" data-tool-call-id="k"><summary><span class="tool-name">ls</span><code class="tool-brief">{}</code></summary><pre class="tool-args" tabindex="0">{}</pre></details></div></article>`,
		},
		{
			name: "ai whose run left turns out",
			m:    MessageView{ID: "e", Seq: 11, Type: "ai", HTML: "<p>ok</p>", ModelName: "m", Trimmed: &ContextTrim{Sent: 3, Total: 11}},
			want: `<article class="msg msg-ai" id="msg-e" data-seq="11" data-run-id=""><div class="msg-body"><p>ok</p></div><div class="msg-actions"><button type="button" class="msg-copy button-quiet">Copy</button></div><p class="msg-note msg-context">Earlier messages were left out of this answer to fit the model's context window (<span class="context-sent">3</span> of <span class="context-total">11</span> turns sent).</p><p class="msg-meta" title="m">m</p></article>`,
		},
		{
			name: "tool",
			m:    MessageView{ID: "d", Seq: 10, Type: "tool", Content: "<i>out</i>"},
			want: `<div class="tool-result" id="msg-d" data-seq="10"><pre class="tool-output" tabindex="0">&lt;i&gt;out&lt;/i&gt;</pre></div>`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := render(t, Message(tt.m)); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestEmptyThreadTeachesTheDemo(t *testing.T) {
	p := threadPage(t, testUser, "")
	p.Messages = nil
	doc := parse(t, render(t, Thread(p)))
	empty := one(t, doc, "#empty-state", byID("empty-state"))
	got := text(empty)
	for _, want := range []string{"a plain question", "one subagent per item", "Run `sleep 2 && echo Done`"} {
		if !strings.Contains(got, want) {
			t.Errorf("empty state %q lacks %q", got, want)
		}
	}
	if h1 := one(t, doc, "#thread-title", byID("thread-title")); text(h1) != "Untitled thread" {
		t.Errorf("untitled: got %q", text(h1))
	}
}

func TestThreadListActions(t *testing.T) {
	doc := parse(t, render(t, pages(t)["threads"]))
	for _, action := range []string{"/threads/th-1/rename", "/threads/th-1/delete", "/threads/th-2/delete"} {
		one(t, doc, action, func(n *html.Node) bool { return n.Data == "form" && attr(n, "action") == action })
	}
	del := one(t, doc, "delete form", func(n *html.Node) bool { return attr(n, "action") == "/threads/th-1/delete" })
	if del.Parent.Data != "details" {
		t.Errorf("delete form sits in <%s>, want <details> as its confirm step", del.Parent.Data)
	}
	one(t, doc, "link", func(n *html.Node) bool { return n.Data == "a" && attr(n, "href") == "/threads/th-1" })
}

func TestSettingsShowsNewTokenOnce(t *testing.T) {
	out := render(t, pages(t)["settings"])
	doc := parse(t, out)
	field := one(t, doc, "#new-token", byID("new-token"))
	if _, ro := attrOK(field, "readonly"); !ro || attr(field, "value") != "herd_secret" {
		t.Errorf("new token field: want read-only with the token")
	}
	if !strings.Contains(out, "you won't see it again") && !strings.Contains(out, "you won&#39;t see it again") {
		t.Errorf("no once-only warning")
	}
	for _, action := range []string{"/settings/tokens", "/settings/tokens/tok1/delete", "/settings/tokens/tok2/delete"} {
		one(t, doc, action, func(n *html.Node) bool { return attr(n, "action") == action })
	}
	if !strings.Contains(text(doc), "never") {
		t.Errorf("a token never used does not say so")
	}

	again := render(t, Settings(SettingsPage{Page: page(testUser)}))
	if strings.Contains(again, "new-token") {
		t.Errorf("the token box renders without a new token")
	}
}

func TestAdmin(t *testing.T) {
	doc := parse(t, render(t, pages(t)["admin"]))
	box := one(t, doc, "toggle", byID("token-usage-enabled"))
	if _, checked := attrOK(box, "checked"); !checked || attr(box, "name") != "token_usage_enabled" {
		t.Errorf("token usage toggle: want a checked token_usage_enabled box")
	}
	if !strings.Contains(text(doc), "demo model") {
		t.Errorf("demo models are not labelled")
	}
	self := elements(doc, func(n *html.Node) bool { return strings.HasPrefix(attr(n, "action"), "/admin/users/u2") })
	if len(self) != 1 {
		t.Errorf("own row: got %d forms, want only the role form", len(self))
	}
	for _, action := range []string{"/admin/users", "/admin/users/u1", "/admin/users/u1/delete", "/admin/settings"} {
		if len(elements(doc, func(n *html.Node) bool { return attr(n, "action") == action })) == 0 {
			t.Errorf("no form posts to %s", action)
		}
	}
	enable := one(t, doc, "disabled input", func(n *html.Node) bool { return attr(n, "name") == "disabled" })
	if attr(enable, "value") != "false" {
		t.Errorf("a disabled user offers disabled=%q, want false (enable)", attr(enable, "value"))
	}
	if !strings.Contains(text(doc), "you") {
		t.Errorf("own row not marked")
	}
}

// Provider tool-call ids may repeat across runs: each result belongs under
// the latest call with its id, never an older one.
func TestThreadMessagesRepeatedCallIDs(t *testing.T) {
	call := func(name string) []ToolCallView { return []ToolCallView{{ID: "c", Name: name, Args: "{}"}} }
	msgs := []MessageView{
		{ID: "a1", Seq: 1, Type: "ai", ToolCalls: call("ls")},
		{ID: "r1", Seq: 2, Type: "tool", ToolCallID: "c", Content: "one"},
		{ID: "a2", Seq: 3, Type: "ai", ToolCalls: call("ls")},
		{ID: "r2", Seq: 4, Type: "tool", ToolCallID: "c", Content: "two"},
		{ID: "a3", Seq: 5, Type: "ai", ToolCalls: call("task")},
		{ID: "r3", Seq: 6, Type: "tool", ToolCallID: "c", Content: "task result"},
	}
	doc := parse(t, render(t, Thread(ThreadPage{Page: page(testUser), Messages: msgs, StateJSON: "{}"})))
	for _, tt := range []struct{ msg, result string }{{"msg-a1", "msg-r1"}, {"msg-a2", "msg-r2"}} {
		article := one(t, doc, tt.msg, byID(tt.msg))
		results := elements(article, byClass("tool-result"))
		if len(results) != 1 || attr(results[0], "id") != tt.result {
			t.Errorf("%s: want exactly %s under its call", tt.msg, tt.result)
		}
	}
	if got := elements(doc, byID("msg-r3")); len(got) != 0 {
		t.Errorf("the task result is shown under an older call with the same id")
	}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			if c.result != nil {
				t.Errorf("%s: rendering wrote into the handler's messages", m.ID)
			}
		}
	}
}

func TestBrowserName(t *testing.T) {
	for ua, want := range map[string]string{
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36":                                       "Chrome on Linux",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36 Edg/120.0":                   "Edge on Windows",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1": "Safari on iPhone",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 14.0; rv:120.0) Gecko/20100101 Firefox/120.0":                                                     "Firefox on macOS",
		"curl/8.5.0":            "curl",
		"":                      "Unknown browser",
		"Go-http-client/1.1":    "Go-http-client/1.1",
		strings.Repeat("é", 30): strings.Repeat("é", 20) + "…",
	} {
		if got := browserName(ua); got != want {
			t.Errorf("browserName(%q) = %q, want %q", ua, got, want)
		}
	}
}
