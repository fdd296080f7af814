package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
			"Limits: %d processes, %d MiB of memory and %d s of CPU time per process, files up to %d MiB, "+
			"/tmp up to %d MiB.", net, l.Processes, l.MemoryMB, l.CPUSeconds, l.FileSizeMB, l.TmpMB)
	}
	return bashSchema.Spec(Bash, fmt.Sprintf(
		"Run a command with `bash -c` in the workspace directory (also HOME). %s The workspace may use "+
			"%d MiB; over that, commands are refused until it shrinks. stdout and stderr come back "+
			"together; output over %d bytes keeps its beginning and end with a note of how many bytes were cut. "+
			"A non-zero exit code is reported. The command and everything it started is killed after "+
			"timeout_seconds (default and maximum %d), and processes left in the background are killed when "+
			"it returns. There is no stdin and no terminal, so do not start interactive programs. The "+
			"environment is minimal and holds no credentials. To read or edit files prefer read_file, "+
			"write_file and str_replace.", where, l.WorkspaceMB, t.limit, secs))
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
	if err := t.quota.refuseOver(ctx, env.Workspace, "bash"); err != nil {
		return "", err
	}
	timeout := t.timeout
	if p.TimeoutSeconds != nil {
		timeout = min(timeout, time.Duration(*p.TimeoutSeconds)*time.Second)
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	out := newHeadTail(t.limit)
	j, err := t.sb.start(runCtx, env.Workspace, p.Command, out)
	if err != nil {
		return "", fmt.Errorf("bash: start: %w", err)
	}
	waitErr := j.run()

	var status string
	switch {
	case ctx.Err() != nil:
		return "", fmt.Errorf("bash: command stopped: %w", ctx.Err())
	case j.cmd.ProcessState == nil:
		return "", fmt.Errorf("bash: %w", waitErr)
	case runCtx.Err() != nil && diedOfSIGKILL(j.cmd.ProcessState):
		// Checking the kill too keeps a command that finished just as the
		// deadline passed from being reported as timed out.
		status = fmt.Sprintf("command timed out after %d seconds; %s", int(timeout/time.Second), t.sb.killedWhat())
	default:
		status = t.sb.exitStatus(j.cmd.ProcessState)
	}
	if errors.Is(waitErr, errSurvivors) {
		status = strings.TrimPrefix(status+"; "+waitErr.Error(), "; ")
	}
	if note := t.quota.noteOver(ctx, env.Workspace); note != "" {
		status = strings.TrimPrefix(status+"\n"+note, "\n")
	}
	return formatBashResult(out.String(), status), nil
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
