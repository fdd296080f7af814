package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Defaults of the bash tool when the config leaves a value at zero.
const (
	defaultBashTimeoutSeconds = 120
	defaultOutputLimitBytes   = 30_000
)

// bashWaitDelay bounds how long Wait lingers after the command exits or is
// killed while something outside its process group still holds the
// output pipe.
const bashWaitDelay = 500 * time.Millisecond

// defaultPath is the sandbox's PATH, and the host's when the server has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

type bashTool struct {
	mode    string
	timeout time.Duration
	limit   int
	// bwrap is the bubblewrap binary and sysMounts its read-only view of the
	// system; both are set only in bwrap mode.
	bwrap     string
	sysMounts []string
}

// NewBash returns the bash tool configured by cfg (docs/DESIGN.md §4). An empty
// mode means host. In bwrap mode it checks that bubblewrap is installed
// and can create its namespaces, and returns an error saying why when it
// cannot. Whether the tool is offered at all (sandbox.allow_host_bash) and
// on which address (CheckBashAllowed) is the caller's decision.
func NewBash(cfg SandboxConfig) (Tool, error) {
	t := &bashTool{
		mode:    cfg.Mode,
		timeout: time.Duration(cfg.BashTimeoutSeconds) * time.Second,
		limit:   cfg.OutputLimitBytes,
	}
	if t.mode == "" {
		t.mode = SandboxHost
	}
	if cfg.BashTimeoutSeconds <= 0 {
		t.timeout = defaultBashTimeoutSeconds * time.Second
	}
	if t.limit <= 0 {
		t.limit = defaultOutputLimitBytes
	}
	switch t.mode {
	case SandboxHost:
		if _, err := exec.LookPath("bash"); err != nil {
			return nil, fmt.Errorf("bash tool: %w", err)
		}
	case SandboxBwrap:
		bwrap, err := exec.LookPath("bwrap")
		if err != nil {
			return nil, fmt.Errorf("bash tool: sandbox.mode is bwrap but bwrap is not installed: %w: %w", errBwrapUnavailable, err)
		}
		t.bwrap = bwrap
		t.sysMounts = systemMounts()
		if err := t.probe(); err != nil {
			return nil, fmt.Errorf("bash tool: sandbox.mode is bwrap but %w", err)
		}
	default:
		return nil, fmt.Errorf("bash tool: sandbox.mode %q is not %q or %q", cfg.Mode, SandboxHost, SandboxBwrap)
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
	where := "It runs directly on the host machine."
	if t.mode == SandboxBwrap {
		where = "It runs in a sandbox: there is no network, only the workspace is writable, and files outside " +
			"the workspace and the system directories are not visible."
	}
	return bashSchema.Spec(Bash, fmt.Sprintf(
		"Run a command with `bash -c` in the workspace directory (also HOME). %s stdout and stderr come back "+
			"together; output over %d bytes keeps its beginning and end with a note of how many bytes were cut. "+
			"A non-zero exit code is reported. The command and everything it started is killed after "+
			"timeout_seconds (default and maximum %d), and processes left in the background are killed when "+
			"it returns. There is no stdin and no terminal, so do not start interactive programs. The "+
			"environment is minimal and holds no credentials. To read or edit files prefer read_file, "+
			"write_file and str_replace.", where, t.limit, secs))
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
	timeout := t.timeout
	if p.TimeoutSeconds != nil {
		timeout = min(timeout, time.Duration(*p.TimeoutSeconds)*time.Second)
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	out := newHeadTail(t.limit)
	cmd := t.command(runCtx, env.Workspace, p.Command)
	// One writer for both streams makes exec share a single pipe, which
	// keeps stdout and stderr in the order the command wrote them.
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("bash: start: %w", err)
	}
	waitErr := cmd.Wait()
	// Background jobs outlive bash; they die with the call so nothing the
	// model started keeps running unseen. The group is usually gone already.
	_ = killGroup(cmd.Process.Pid)

	var status string
	switch {
	case ctx.Err() != nil:
		return "", fmt.Errorf("bash: command stopped: %w", ctx.Err())
	case cmd.ProcessState == nil:
		return "", fmt.Errorf("bash: wait: %w", waitErr)
	case runCtx.Err() != nil && diedOfSIGKILL(cmd.ProcessState):
		// Checking the kill too keeps a command that finished just as the
		// deadline passed from being reported as timed out.
		status = fmt.Sprintf("command timed out after %d seconds; process group killed", int(timeout/time.Second))
	default:
		status = exitStatus(cmd.ProcessState)
	}
	return formatBashResult(out.String(), status), nil
}

// command builds the process for one command line: its own process group
// (so a timeout or a stop kills everything it started), the minimal
// environment, and in bwrap mode the sandbox around it.
func (t *bashTool) command(ctx context.Context, workspace, line string) *exec.Cmd {
	var cmd *exec.Cmd
	env := []string{"HOME=" + workspace, "LANG=C.UTF-8", "TERM=dumb"}
	if t.mode == SandboxBwrap {
		args := append(t.bwrapArgs(workspace), "--", "bash", "-c", line)
		cmd = exec.CommandContext(ctx, t.bwrap, args...)
		env = append(env, "PATH="+defaultPath, "TMPDIR=/tmp")
	} else {
		cmd = exec.CommandContext(ctx, "bash", "-c", line)
		// Host bash is meant to use the machine's tools, and PATH holds no
		// secrets, so it is the one variable taken from the server.
		path := os.Getenv("PATH")
		if path == "" {
			path = defaultPath
		}
		env = append(env, "PATH="+path, "TMPDIR=/tmp")
	}
	cmd.Dir = workspace
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = bashWaitDelay
	return cmd
}

// killGroup kills the process group led by pid. A group already gone is
// reported as os.ErrProcessDone, which exec.Cmd treats as nothing to do.
func killGroup(pid int) error {
	err := syscall.Kill(-pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	if err != nil {
		return fmt.Errorf("kill process group %d: %w", pid, err)
	}
	return nil
}

func diedOfSIGKILL(ps *os.ProcessState) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func exitStatus(ps *os.ProcessState) string {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	if code := ps.ExitCode(); code != 0 {
		return fmt.Sprintf("exit code %d", code)
	}
	return ""
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
