package mcp_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd/agent/mcp"
)

// pidOf is the process of stdio server name's current session.
func pidOf(t *testing.T, s *mcp.Servers, name string) int {
	t.Helper()
	out, err := call(t, toolsOf(t, s, true)["mcp__"+name+"__pid"], `{}`)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(out)
	return pid
}

func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// Set adds a server while herd runs, keeps one whose settings did not
// change, restarts one whose settings did (a new process, its old one
// stopped and reaped before Set returns) and stops one removed — the
// admin console (docs/DESIGN.md §12). Tools changes Generation.
func TestSetChangesServersLive(t *testing.T) {
	s := start(t)
	if got := s.Status(); len(got) != 0 {
		t.Fatalf("status = %+v, want no servers", got)
	}
	gen := s.Generation()
	a, b := stdioServer("a"), stdioServer("b")
	s.Set([]mcp.ServerConfig{a, b})
	if s.Generation() == gen {
		t.Error("Set left the generation as it was")
	}
	pidA, pidB := pidOf(t, s, "a"), pidOf(t, s, "b")
	gen = s.Generation()
	s.Set([]mcp.ServerConfig{stdioServer("a"), stdioServer("b")})
	if s.Generation() != gen || pidOf(t, s, "a") != pidA {
		t.Error("a Set of the same settings changed the tools or restarted a server")
	}

	b2 := stdioServer("b")
	b2.Env["GIVEN"] = "edited"
	s.Set([]mcp.ServerConfig{stdioServer("a"), b2})
	if !gone(pidB) {
		t.Errorf("b's first process %d runs on after its settings changed", pidB)
	}
	if got, err := call(t, toolsOf(t, s, true)["mcp__b__env"], `{"name":"GIVEN"}`); got != "edited" || err != nil {
		t.Errorf("b's env GIVEN = %q, %v; want the new settings' edited", got, err)
	}
	if pidOf(t, s, "a") != pidA {
		t.Error("a, whose settings did not change, was restarted")
	}

	s.Set([]mcp.ServerConfig{b2})
	if !gone(pidA) {
		t.Errorf("a's process %d runs on after a was removed", pidA)
	}
	if st := s.Status(); len(st) != 1 || st[0].Name != "b" {
		t.Errorf("status = %+v, want b alone", st)
	}
	if _, ok := toolsOf(t, s, true)["mcp__a__echo"]; ok {
		t.Error("a removed server's tools are still offered")
	}
}

// Test connects apart from the servers in use, lists the tools, and
// stops the process; a server that cannot start says why.
func TestTestConnection(t *testing.T) {
	s := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := s.Test(ctx, stdioServer("kid"))
	if err != nil || !strings.Contains(strings.Join(got, " "), "mcp:kid/echo") {
		t.Fatalf("Test = %v, %v; want the tools, mcp:kid/echo among them", got, err)
	}
	if len(s.Status()) != 0 {
		t.Errorf("Test left a server in the list: %+v", s.Status())
	}
	_, err = s.Test(ctx, mcp.ServerConfig{Name: "nope", Command: "/nonexistent/mcp-server", TimeoutSeconds: 2})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/mcp-server") {
		t.Errorf("Test of a missing command = %v, want the command named", err)
	}
}
