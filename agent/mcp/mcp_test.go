package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd/agent/mcp"
	"herd/agent/tools"
)

// start runs servers for cfgs with short backoffs and closes them when
// the test ends.
func start(t *testing.T, cfgs ...mcp.ServerConfig) *mcp.Servers {
	t.Helper()
	s := mcp.New(cfgs, mcp.Options{MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, OutputLimit: 2000})
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func toolsOf(t *testing.T, s *mcp.Servers, admin bool) map[string]tools.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[string]tools.Tool{}
	for _, tl := range s.Tools(ctx, admin) {
		out[tl.Spec().Name] = tl
	}
	return out
}

func names(m map[string]tools.Tool) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func call(t *testing.T, tl tools.Tool, args string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return tl.Run(ctx, tools.Env{Workspace: t.TempDir()}, json.RawMessage(args))
}

// waitState waits, on Changed, until server name is in state.
func waitState(t *testing.T, s *mcp.Servers, name, state string) mcp.ServerStatus {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		changed := s.Changed()
		for _, st := range s.Status() {
			if st.Name == name && st.State == state {
				return st
			}
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("server %s never reached %s: %+v", name, state, s.Status())
		}
	}
}

func TestHTTPCalls(t *testing.T) {
	h := serveHTTP(t, "")
	s := start(t, mcp.ServerConfig{Name: "t", URL: h.url(), TimeoutSeconds: 1})
	if st := s.Status()[0]; st.State != mcp.StateIdle {
		t.Errorf("before first use: state %s, want idle (HTTP connects on first use)", st.State)
	}
	ts := toolsOf(t, s, false)
	want := []string{"mcp__t__announce", "mcp__t__chatty", "mcp__t__crash", "mcp__t__echo", "mcp__t__env", "mcp__t__exit", "mcp__t__fail", "mcp__t__grow", "mcp__t__hang", "mcp__t__picture", "mcp__t__pid", "mcp__t__trail"}
	if got := names(ts); !slices.Equal(got, want) {
		t.Fatalf("tools = %v, want %v", got, want)
	}
	var schema map[string]any
	if err := json.Unmarshal(ts["mcp__t__echo"].Spec().Parameters, &schema); err != nil || schema["required"] == nil {
		t.Errorf("echo's parameters = %s, want the published schema with its required list", ts["mcp__t__echo"].Spec().Parameters)
	}

	tests := []struct {
		name, tool, args string
		want             string // in the result, or in the error when wantErr
		wantErr          bool
		badArgs          bool
	}{
		{name: "text", tool: "mcp__t__echo", args: `{"text":"hi","times":2}`, want: "echo: hiecho: hi"},
		{name: "missing required", tool: "mcp__t__echo", args: `{}`, want: "text", wantErr: true, badArgs: true},
		{name: "wrong type", tool: "mcp__t__echo", args: `{"text":5}`, want: "text", wantErr: true, badArgs: true},
		{name: "not an object", tool: "mcp__t__echo", args: `[1]`, want: "JSON object", wantErr: true, badArgs: true},
		{name: "tool error", tool: "mcp__t__fail", args: ``, want: "the disk is on fire", wantErr: true},
		{name: "image and resource", tool: "mcp__t__picture", args: `{}`, want: "a red dot:\n[image: image/png, 9 bytes]\n[resource file:///notes.txt]\n<b>not html</b>"},
		{name: "timeout", tool: "mcp__t__hang", args: `{}`, want: "did not finish hang within 1s", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := call(t, ts[tt.tool], tt.args)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v (result %q), want an error with %q", err, got, tt.want)
				}
				if errors.Is(err, tools.ErrBadArgs) != tt.badArgs {
					t.Errorf("err = %v: ErrBadArgs %v, want %v", err, !tt.badArgs, tt.badArgs)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	select {
	case <-h.state.cancelled:
	case <-time.After(5 * time.Second):
		t.Error("the server never saw the timed-out call cancelled")
	}
}

// A run that is stopped ends its MCP call at once, and the server is
// told (notifications/cancelled).
func TestCancelTellsTheServer(t *testing.T) {
	h := serveHTTP(t, "")
	s := start(t, mcp.ServerConfig{Name: "t", URL: h.url(), TimeoutSeconds: 60})
	hang := toolsOf(t, s, true)["mcp__t__hang"]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := hang.Run(ctx, tools.Env{}, nil)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond) // let the call reach the server
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a cancelled call did not end")
	}
	select {
	case <-h.state.cancelled:
	case <-time.After(5 * time.Second):
		t.Error("the server never saw the call cancelled")
	}
}

func TestUseAndLists(t *testing.T) {
	h := serveHTTP(t, "")
	echoOnly := []string{"echo", "hang"}
	s := start(t,
		mcp.ServerConfig{Name: "open", URL: h.url(), Tools: &echoOnly, DisallowedTools: []string{"hang"}},
		mcp.ServerConfig{Name: "admin", URL: h.url(), Use: mcp.UseAdmins},
	)
	if got := names(toolsOf(t, s, false)); !slices.Equal(got, []string{"mcp__open__echo"}) {
		t.Errorf("a user's tools = %v, want only open's echo (admin's are for admins)", got)
	}
	if got := toolsOf(t, s, true); len(got) != 13 {
		t.Errorf("an admin's tools = %v, want open's echo and admin's twelve", names(got))
	}
}

func TestListChanged(t *testing.T) {
	h := serveHTTP(t, "")
	s := start(t, mcp.ServerConfig{Name: "t", URL: h.url()})
	ts := toolsOf(t, s, true)
	changed := s.Changed()
	if _, err := call(t, ts["mcp__t__grow"], `{}`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("tools/list_changed did not change the tools")
	}
	extra, ok := toolsOf(t, s, true)["mcp__t__extra"]
	if !ok {
		t.Fatal("the new tool is not listed")
	}
	if got, err := call(t, extra, `{}`); got != "extra!" || err != nil {
		t.Errorf("extra = %q, %v", got, err)
	}
}

// An HTTP server that goes away: calls answer a clear error at once, the
// admin sees it restarting, and once it is back its tools work again.
func TestHTTPRestart(t *testing.T) {
	h := serveHTTP(t, "")
	s := start(t, mcp.ServerConfig{Name: "t", URL: h.url(), TimeoutSeconds: 2})
	echo := toolsOf(t, s, true)["mcp__t__echo"]
	h.crash()
	if _, err := call(t, echo, `{"text":"x"}`); err == nil {
		t.Fatal("a call to a server that is gone succeeded")
	}
	st := waitState(t, s, "t", mcp.StateRestarting)
	if st.LastError == "" {
		t.Errorf("restarting without a last error: %+v", st)
	}
	began := time.Now()
	if _, err := call(t, echo, `{"text":"x"}`); err == nil || !strings.Contains(err.Error(), "unavailable") {
		t.Errorf("err = %v, want the server's state and unavailability", err)
	}
	if d := time.Since(began); d > time.Second {
		t.Errorf("a call while restarting took %v, want an answer at once", d)
	}
	serveHTTP(t, h.addr)
	waitState(t, s, "t", mcp.StateConnected)
	if got, err := call(t, echo, `{"text":"back"}`); got != "echo: back" || err != nil {
		t.Errorf("after the restart: %q, %v", got, err)
	}
}

func TestHTTPFollowsNoRedirect(t *testing.T) {
	h := serveHTTP(t, "")
	redirect := serveRedirect(t, h.url())
	s := start(t, mcp.ServerConfig{Name: "r", URL: redirect, TimeoutSeconds: 2})
	if got := toolsOf(t, s, true); len(got) != 0 {
		t.Errorf("tools through a redirect: %v", names(got))
	}
	st := s.Status()[0]
	if st.State == mcp.StateConnected || !strings.Contains(st.LastError, "redirect") {
		t.Errorf("status = %+v, want a failure naming the redirect", st)
	}
}

func stdioServer(name string) mcp.ServerConfig {
	return mcp.ServerConfig{Name: name, Command: os.Args[0], Env: map[string]string{"HERD_MCP_TEST_STDIO": "1"}, TimeoutSeconds: 10}
}

// A stdio server starts with Start, is restarted when it exits, and is
// gone after Close (goleak checks the goroutines that own it).
func TestStdioCrashAndRestart(t *testing.T) {
	s := start(t, stdioServer("kid"))
	waitState(t, s, "kid", mcp.StateConnected)
	ts := toolsOf(t, s, true)
	if got, err := call(t, ts["mcp__kid__echo"], `{"text":"hi"}`); got != "echo: hi" || err != nil {
		t.Fatalf("echo = %q, %v", got, err)
	}
	changed := s.Changed()
	if _, err := call(t, ts["mcp__kid__exit"], `{}`); err == nil {
		t.Error("a call whose server exited succeeded")
	}
	<-changed
	if st := waitState(t, s, "kid", mcp.StateConnected); st.Restarts != 1 {
		t.Errorf("status = %+v, want one restart", st)
	}
	if got, err := call(t, ts["mcp__kid__echo"], `{"text":"again"}`); got != "echo: again" || err != nil {
		t.Errorf("after the restart: %q, %v", got, err)
	}
}

// A stdio server gets the env it is configured with and nothing of
// herd's own environment, which holds model keys.
func TestStdioEnvironment(t *testing.T) {
	t.Setenv("HERD_TEST_SECRET", "sk-should-not-pass")
	cfg := stdioServer("kid")
	cfg.Env["GIVEN"] = "yes"
	s := start(t, cfg)
	env := toolsOf(t, s, true)["mcp__kid__env"]
	for name, want := range map[string]string{"GIVEN": "yes", "HERD_TEST_SECRET": "", "PATH": os.Getenv("PATH")} {
		if got, err := call(t, env, `{"name":"`+name+`"}`); got != want || err != nil {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
}

// Close ends a stdio server's process: every child has an owner.
func TestCloseEndsTheChild(t *testing.T) {
	s := mcp.New([]mcp.ServerConfig{stdioServer("kid")}, mcp.Options{})
	s.Start()
	out, err := call(t, toolsOf(t, s, true)["mcp__kid__pid"], `{}`)
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(out)
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the server's process %d is not running: %v", pid, err)
	}
	s.Close()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("after Close, signalling the server's process %d = %v, want ESRCH (gone and reaped)", pid, err)
	}
}

func TestStdioFailsClearly(t *testing.T) {
	s := start(t, mcp.ServerConfig{Name: "nope", Command: "/nonexistent/mcp-server", TimeoutSeconds: 2})
	st := waitState(t, s, "nope", mcp.StateFailed)
	if !strings.Contains(st.LastError, "/nonexistent/mcp-server") {
		t.Errorf("last error = %q, want the command named", st.LastError)
	}
}
