package mcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herd/agent/mcp"
	"herd/agent/tools"
)

// caller is one user's run calling a server's tools, and the log lines
// its calls were given.
type caller struct {
	user, run string
	got       shown
}

func (c *caller) env(t *testing.T) tools.Env {
	env := c.got.env(t)
	env.User, env.Run = c.user, c.run
	return env
}

func (c *caller) logs() []string {
	c.got.mu.Lock()
	defer c.got.mu.Unlock()
	return slices.Clone(c.got.logs)
}

// announceAll has each caller call announce with its word, all of them
// in flight at once.
func announceAll(t *testing.T, tl tools.Tool, group string, callers map[string]*caller) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for word, c := range callers {
		args, _ := json.Marshal(map[string]any{"word": word, "group": group, "together": len(callers)})
		wg.Go(func() {
			if out, err := tl.Run(ctx, c.env(t), args); err != nil || out != "announced "+word {
				t.Errorf("announce %s = %q, %v", word, out, err)
			}
		})
	}
	wg.Wait()
}

func dropped(s *mcp.Servers) int64 { return s.Status()[0].LogLinesDropped }

// One session serves every user's calls of a server, and MCP ties a log
// line to no request: a line without an owner reaches calls of one
// user's one run, or nobody, and is counted (docs/DESIGN.md §4). Over
// HTTP, a line on a call's own response stream is that call's.
func TestLogLinesStayWithTheirOwner(t *testing.T) {
	h := serveHTTP(t, "")
	for _, cfg := range []mcp.ServerConfig{stdioServer("kid"), {Name: "web", URL: h.url(), TimeoutSeconds: 20}} {
		t.Run(cfg.Transport(), func(t *testing.T) {
			s := start(t, cfg)
			announce := toolsOf(t, s, true)[mcp.ModelName(cfg.Name, "announce")]
			stdio := cfg.Stdio()

			// Two users' calls in flight at once: neither is given the
			// other's words (their request parameters).
			ann := &caller{user: "ann", run: "run-a"}
			bob := &caller{user: "bob", run: "run-b"}
			announceAll(t, announce, "users", map[string]*caller{"ann-card-4242": ann, "bob-card-7777": bob})
			for _, c := range []struct {
				who     *caller
				own     string
				other   string
				ownLine []string // the line on its own stream, over HTTP
			}{
				{ann, "ann-card-4242", "bob-card-7777", []string{"info said ann-card-4242"}},
				{bob, "bob-card-7777", "ann-card-4242", []string{"info said bob-card-7777"}},
			} {
				logs := c.who.logs()
				if strings.Contains(strings.Join(logs, "\n"), c.other) {
					t.Errorf("%s's call was given %s's lines: %q", c.who.user, c.other, logs)
				}
				if want := c.ownLine; stdio && len(logs) != 0 || !stdio && !slices.Equal(logs, want) {
					t.Errorf("%s's lines = %q, want %q (stdio: none, no line has an owner)", c.who.user, logs, want)
				}
			}
			if stdio {
				if n := dropped(s); n != 4 {
					t.Errorf("dropped = %d, want the 4 lines without an owner", n)
				}
			}

			// One user's two runs at once: the same.
			before := dropped(s)
			one, two := &caller{user: "ann", run: "run-1"}, &caller{user: "ann", run: "run-2"}
			announceAll(t, announce, "runs", map[string]*caller{"first-run": one, "second-run": two})
			if l1, l2 := strings.Join(one.logs(), "\n"), strings.Join(two.logs(), "\n"); strings.Contains(l1, "second-run") || strings.Contains(l2, "first-run") {
				t.Errorf("two runs of one user share lines: %q, %q", l1, l2)
			}
			if stdio && dropped(s)-before != 4 {
				t.Errorf("dropped %d lines of two runs, want 4", dropped(s)-before)
			}

			// One run's calls, alone or two at once, get every line of it.
			time.Sleep(2100 * time.Millisecond) // the other runs' calls ended more than logGrace ago
			solo, also := &caller{user: "cy", run: "run-c"}, &caller{user: "cy", run: "run-c"}
			announceAll(t, announce, "one-run", map[string]*caller{"cy-one": solo, "cy-two": also})
			want := []string{"said cy-one", "loose cy-one", "said cy-two", "loose cy-two"}
			if !stdio {
				// Over HTTP each call's own stream carries its said line;
				// a loose line may come just after the answers.
				want = []string{"said cy-one"}
			}
			for _, line := range want {
				if !slices.Contains(solo.logs(), "info "+line) {
					t.Errorf("a lone run's call lacks %q: %q", line, solo.logs())
				}
			}
		})
	}
}

// A line a server sends just after answering one user's call does not
// reach the next user's call, alone in flight when it comes: lines
// without an owner wait logGrace after a call of another run ends.
func TestTrailingLineStaysWithItsOwner(t *testing.T) {
	s := start(t, stdioServer("kid"))
	ts := toolsOf(t, s, true)
	ann := &caller{user: "ann", run: "run-a"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := ts["mcp__kid__trail"].Run(ctx, ann.env(t), json.RawMessage(`{"word":"ann-secret-query"}`)); err != nil {
		t.Fatal(err)
	}
	bob := &caller{user: "bob", run: "run-b"}
	announceAll(t, ts["mcp__kid__announce"], "after", map[string]*caller{"bob-word": bob})
	if logs := bob.logs(); strings.Contains(strings.Join(logs, "\n"), "ann-secret-query") {
		t.Errorf("bob's call was given the line ann's call left behind: %q", logs)
	}
	if n := dropped(s); n < 1 {
		t.Errorf("dropped = %d, want ann's trailing line counted", n)
	}
}
