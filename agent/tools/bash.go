package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Defaults of the bash tool when the config leaves a value at zero.
const (
	defaultBashTimeoutSeconds = 120
	defaultOutputLimitBytes   = 30_000
)

type bashTool struct {
	sb      *sandbox
	quota   quota
	timeout time.Duration
	limit   int
	turns   *userTurns // commands at once per user
	watches *monitor   // the workspaces of running commands
}

// NewBash returns the bash tool configured by cfg (docs/DESIGN.md §4). An
// empty mode means host; auto is resolved as Resolve does. In bwrap mode
// it checks that bubblewrap is installed and can create its namespaces,
// and returns an error saying why when it cannot. Whether the tool is
// offered at all (sandbox.allow_host_bash), on which address
// (CheckBashAllowed) and to whom is the caller's decision.
func NewBash(cfg SandboxConfig) (Tool, error) {
	sb, err := newSandbox(cfg)
	if err != nil {
		return nil, fmt.Errorf("bash tool: %w", err)
	}
	t := &bashTool{
		sb:      sb,
		quota:   workspaceQuota(sb.cfg.Limits),
		timeout: time.Duration(cfg.BashTimeoutSeconds) * time.Second,
		limit:   cfg.OutputLimitBytes,
		turns:   newUserTurns(sb.cfg.Limits.CommandsPerUser),
		watches: newMonitor(),
	}
	if cfg.BashTimeoutSeconds <= 0 {
		t.timeout = defaultBashTimeoutSeconds * time.Second
	}
	if t.limit <= 0 {
		t.limit = defaultOutputLimitBytes
	}
	return t, nil
}

var bashSchema = Schema{
	Properties: map[string]Prop{
		"command":         {Type: "string", Description: "The bash command line to run."},
		"timeout_seconds": {Type: "integer", Minimum: 1, Description: "Kill the command after this many seconds. Optional; it cannot exceed the configured limit."},
	},
	Required: []string{"command"},
}

func (t *bashTool) Spec() Spec {
	secs := int(t.timeout / time.Second)
	l := t.sb.cfg.Limits
	where := "It runs directly on the host machine."
	if t.sb.cfg.Mode == SandboxBwrap {
		net := "there is no network"
		if t.sb.cfg.Network == NetworkHost {
			net = "the network is reachable"
		}
		where = fmt.Sprintf("It runs in a sandbox: %s, only the workspace and /tmp are writable, files outside "+
			"the workspace and the system directories are not visible, and /tmp is private and empty at each call. "+
			"Limits: %d processes, %d MiB of memory and %d s of CPU time for the command and everything it "+
			"starts, files up to %d MiB, /tmp up to %d MiB.", net, l.Processes, l.MemoryMB, l.CPUSeconds, l.FileSizeMB, l.TmpMB)
	}
	return bashSchema.Spec(Bash, fmt.Sprintf(
		"Run a command with `bash -c` in the workspace directory (also HOME). %s The workspace may use "+
			"%d MiB and %d files and directories; a command that goes over is stopped, and commands are "+
			"refused until it shrinks. stdout and stderr come back "+
			"together; output over %d bytes keeps its beginning and end with a note of how many bytes were cut. "+
			"A non-zero exit code is reported. The command and everything it started is killed after "+
			"timeout_seconds (default and maximum %d), and processes left in the background are killed when "+
			"it returns. There is no stdin and no terminal, so do not start interactive programs. The "+
			"environment is minimal and holds no credentials. To read or edit files prefer read_file, "+
			"write_file and str_replace.", where, l.WorkspaceMB, l.WorkspaceFiles, t.limit, secs))
}

func (t *bashTool) Run(ctx context.Context, env Env, args json.RawMessage) (string, error) {
	var p struct {
		Command        string `json:"command"`
		TimeoutSeconds *int   `json:"timeout_seconds"`
	}
	if err := bashSchema.Decode(args, &p); err != nil {
		return "", err
	}
	if strings.TrimSpace(p.Command) == "" {
		return "", fmt.Errorf("%w: field \"command\" must not be empty", ErrBadArgs)
	}
	if env.Workspace == "" {
		return "", errNoWorkspace
	}
	waited, release, err := t.turns.take(ctx, env.User)
	if err != nil {
		return "", fmt.Errorf("bash: waiting for one of your other commands to end: %w", err)
	}
	defer release()
	used, err := t.quota.refuseOver(ctx, env.Workspace, "bash")
	if err != nil {
		return "", err
	}
	// A root herd's commands run as sandbox.user, which must own the
	// workspace: the file tools give it what they create, and a workspace
	// from before is given over whole, once.
	if err := OwnWorkspace(env.Workspace, t.sb.cfg.RunAs); err != nil {
		return "", fmt.Errorf("bash: %w", err)
	}
	timeout := t.timeout
	if p.TimeoutSeconds != nil {
		timeout = min(timeout, time.Duration(*p.TimeoutSeconds)*time.Second)
	}
	fileSize := min(int64(t.sb.cfg.Limits.FileSizeMB)*mib, max(t.quota.limit-used.bytes, 1))
	output, status, err := t.execute(ctx, env.Workspace, p.Command, timeout, fileSize)
	if err != nil {
		return "", err
	}
	if note := t.quota.noteOver(ctx, env.Workspace); note != "" {
		status = strings.TrimPrefix(status+"\n"+note, "\n")
	}
	if waited > time.Second {
		status = strings.TrimPrefix(status+"\n"+fmt.Sprintf("(it waited %s for one of your other commands to end: "+
			"%d may run at once)", waited.Round(time.Second), t.sb.cfg.Limits.CommandsPerUser), "\n")
	}
	return formatBashResult(output, status), nil
}

// execute runs command in workspace, held to its limits while it runs,
// and returns its output and how it ended (empty for a plain success).
func (t *bashTool) execute(ctx context.Context, workspace, command string, timeout time.Duration, fileSize int64) (output, status string, err error) {
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := newHeadTail(t.limit)
	j, err := t.sb.start(runCtx, workspace, command, out, commandLimits{fileSize: fileSize})
	if err != nil {
		return "", "", fmt.Errorf("bash: start: %w", err)
	}
	var stopped stopReason
	stop := func(reason string) {
		if stopped.set(reason) {
			j.kill()
		}
	}
	l := t.sb.cfg.Limits
	// Without a cpu cgroup's bandwidth a command may use every core.
	cpus := l.CPUs
	if !t.sb.cg.has(ctrlCPU) {
		cpus = float64(runtime.NumCPU())
	}
	endDisk := t.watches.watch(workspace, t.quota, stop)
	endCPU := watchCPU(j.cg, time.Duration(l.CPUSeconds)*time.Second, cpus, stop)
	waitErr := j.run()
	endCPU()
	endDisk()

	switch {
	case ctx.Err() != nil:
		return "", "", fmt.Errorf("bash: command stopped: %w", ctx.Err())
	case j.cmd.ProcessState == nil:
		return "", "", fmt.Errorf("bash: %w", waitErr)
	case stopped.get() != "":
		status = stopped.get() + "; " + t.sb.killedWhat()
	case runCtx.Err() != nil && diedOfSIGKILL(j.cmd.ProcessState):
		// Checking the kill too keeps a command that finished just as the
		// deadline passed from being reported as timed out.
		status = fmt.Sprintf("command timed out after %d seconds; %s", int(timeout/time.Second), t.sb.killedWhat())
	default:
		status = t.sb.exitStatus(j.cmd.ProcessState, fileSize)
	}
	if n := j.oomKills; n > 0 {
		status = joinStatus(status, fmt.Sprintf("the command ran out of memory: its processes together may use %d MiB "+
			"(sandbox.limits.memory_mb), and the kernel killed %d of them", l.MemoryMB, n))
	}
	if errors.Is(waitErr, errSurvivors) {
		status = joinStatus(status, waitErr.Error())
	}
	return out.String(), status, nil
}

func joinStatus(status, more string) string {
	return strings.TrimPrefix(status+"; "+more, "; ")
}

// stopReason is why a command's watch stopped it; the first reason wins.
type stopReason struct {
	mu     sync.Mutex
	reason string
}

func (s *stopReason) set(reason string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reason != "" {
		return false
	}
	s.reason = reason
	return true
}

func (s *stopReason) get() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// userTurns lets each user have at most n commands running at once, so
// that one user's runs cannot take every process, core and byte of
// memory the sandbox's limits allow many commands together. A command
// over the cap waits for a turn (its context bounds the wait). An empty
// user (a call no user made) is not counted.
type userTurns struct {
	n     int
	mu    sync.Mutex
	users map[string]*turns
}

type turns struct {
	slots chan struct{}
	refs  int // commands holding or waiting for a slot
}

func newUserTurns(n int) *userTurns {
	return &userTurns{n: n, users: map[string]*turns{}}
}

// take waits for a turn of user's and returns how long it waited and the
// release of the turn.
func (u *userTurns) take(ctx context.Context, user string) (time.Duration, func(), error) {
	if user == "" {
		return 0, func() {}, nil
	}
	u.mu.Lock()
	t := u.users[user]
	if t == nil {
		t = &turns{slots: make(chan struct{}, u.n)}
		u.users[user] = t
	}
	t.refs++
	u.mu.Unlock()
	drop := func() {
		u.mu.Lock()
		if t.refs--; t.refs == 0 {
			delete(u.users, user)
		}
		u.mu.Unlock()
	}
	start := time.Now()
	select {
	case t.slots <- struct{}{}:
	case <-ctx.Done():
		drop()
		return 0, nil, ctx.Err()
	}
	var once sync.Once
	return time.Since(start), func() {
		once.Do(func() {
			<-t.slots
			drop()
		})
	}, nil
}

// formatBashResult is what the model reads: the output (or a note that
// there was none) and, on its own last line, how the command ended when
// that was not a plain success.
func formatBashResult(output, status string) string {
	if output == "" {
		output = "(no output)"
	}
	if status == "" {
		return output
	}
	if !strings.HasSuffix(output, "\n") {
		output += "\n"
	}
	return output + status
}

// headTail keeps the first and the last bytes of a stream within limit,
// so a command's start (what it did) and end (how it failed) both survive
// however much it prints, in bounded memory.
type headTail struct {
	headMax, tailMax int
	head, tail       []byte
	total            int
}

func newHeadTail(limit int) *headTail {
	return &headTail{headMax: limit / 2, tailMax: limit - limit/2}
}

func (w *headTail) Write(p []byte) (int, error) {
	n := len(p)
	w.total += n
	if room := w.headMax - len(w.head); room > 0 {
		k := min(room, len(p))
		w.head = append(w.head, p[:k]...)
		p = p[k:]
	}
	w.tail = append(w.tail, p...)
	if extra := len(w.tail) - w.tailMax; extra > 0 {
		w.tail = w.tail[extra:]
	}
	return n, nil
}

func (w *headTail) String() string {
	cut := w.total - len(w.head) - len(w.tail)
	if cut == 0 {
		return string(w.head) + string(w.tail)
	}
	var b bytes.Buffer
	b.Write(w.head)
	fmt.Fprintf(&b, "\n[... %d bytes of output cut ...]\n", cut)
	b.Write(w.tail)
	return b.String()
}
