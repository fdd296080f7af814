package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
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

// bwrapProbeTimeout bounds the start-up check that bubblewrap can run.
const bwrapProbeTimeout = 10 * time.Second

// defaultPath is the sandbox's PATH, and the host's when the server has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// errBwrapUnavailable marks a bwrap sandbox that cannot run on this
// machine: bwrap is missing or cannot create its namespaces.
var errBwrapUnavailable = errors.New("bubblewrap sandbox unavailable")

// bwrapEtc are the /etc entries the sandbox sees: what the dynamic linker,
// name lookups of the user and Debian's alternatives need, nothing more.
var bwrapEtc = []string{
	"/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/localtime",
}

type bashTool struct {
	mode    string
	timeout time.Duration
	limit   int
	// bwrap is the bubblewrap binary and sysMounts its read-only view of the
	// system; both are set only in bwrap mode.
	bwrap     string
	sysMounts []string
}

// NewBash returns the bash tool configured by cfg (SPEC §4.2). An empty
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

// probe runs a trivial command in the sandbox, because bwrap is often
// installed where it cannot work (in a container without user namespaces)
// and that should stop the server at start, not fail every command.
func (t *bashTool) probe() error {
	ws, err := os.MkdirTemp("", "herd-bwrap-probe-")
	if err != nil {
		return fmt.Errorf("probe workspace: %w", err)
	}
	defer os.RemoveAll(ws)
	ctx, cancel := context.WithTimeout(context.Background(), bwrapProbeTimeout)
	defer cancel()
	cmd := t.command(ctx, ws, "true")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: bwrap failed: %s (%w)", errBwrapUnavailable, strings.TrimSpace(string(out)), err)
	}
	return nil
}

var bashSchema = paramSchema{
	Properties: map[string]paramProp{
		"command":         {Type: "string", Description: "The bash command line to run."},
		"timeout_seconds": {Type: "integer", Minimum: 1, Description: "Kill the command after this many seconds. Optional; it cannot exceed the configured limit."},
	},
	Required: []string{"command"},
}

func (t *bashTool) Spec() ToolSpec {
	secs := int(t.timeout / time.Second)
	where := "It runs directly on the host machine."
	if t.mode == SandboxBwrap {
		where = "It runs in a sandbox: there is no network, only the workspace is writable, and files outside " +
			"the workspace and the system directories are not visible."
	}
	return bashSchema.spec("bash", fmt.Sprintf(
		"Run a command with `bash -c` in the workspace directory (also HOME). %s stdout and stderr come back "+
			"together; output over %d bytes keeps its beginning and end with a note of how many bytes were cut. "+
			"A non-zero exit code is reported. The command and everything it started is killed after "+
			"timeout_seconds (default and maximum %d), and processes left in the background are killed when "+
			"it returns. There is no stdin and no terminal, so do not start interactive programs. The "+
			"environment is minimal and holds no credentials. To read or edit files prefer read_file, "+
			"write_file and str_replace.", where, t.limit, secs))
}

func (t *bashTool) Run(ctx context.Context, env ToolEnv, args json.RawMessage) (string, error) {
	var p struct {
		Command        string `json:"command"`
		TimeoutSeconds *int   `json:"timeout_seconds"`
	}
	if err := decodeToolArgs(bashSchema, args, &p); err != nil {
		return "", err
	}
	if strings.TrimSpace(p.Command) == "" {
		return "", fmt.Errorf("%w: field \"command\" must not be empty", ErrBadArgs)
	}
	if env.Workspace == "" {
		return "", errors.New("no workspace is set for this tool call")
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

// bwrapArgs confines a command to the workspace, bound read-write at its
// own path so paths printed inside mean the same outside. --unshare-all
// drops the network; --die-with-parent and the pid namespace make killing
// bwrap's process group kill everything inside, even across --new-session.
func (t *bashTool) bwrapArgs(workspace string) []string {
	args := []string{"--unshare-all", "--die-with-parent", "--new-session"}
	args = append(args, t.sysMounts...)
	return append(args,
		"--proc", "/proc",
		"--dev", "/dev",
		"--tmpfs", "/tmp",
		"--bind", workspace, workspace,
		"--chdir", workspace,
	)
}

// systemMounts returns the read-only view of the host system: /usr, the
// top-level binary and library directories (as the symlinks they are on a
// merged-/usr system) and the selected /etc entries.
func systemMounts() []string {
	args := []string{"--ro-bind", "/usr", "/usr"}
	for _, dir := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		info, err := os.Lstat(dir)
		switch {
		case err != nil:
			continue
		case info.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(dir)
			if err != nil {
				continue
			}
			args = append(args, "--symlink", target, dir)
		default:
			args = append(args, "--ro-bind", dir, dir)
		}
	}
	for _, p := range bwrapEtc {
		args = append(args, "--ro-bind-try", p, p)
	}
	return args
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

// CheckBashAllowed applies the start-up rule of SPEC §4.2 to the listen
// address addr: host bash (mode host, or empty) on an address other than
// loopback (127.0.0.0/8, ::1, localhost) is refused unless
// sandbox.allow_host_bash_public is set, because anyone who reaches the
// server could then run commands on the machine. bwrap mode is allowed
// anywhere. With sandbox.allow_host_bash false the bash tool is not
// offered at all, so there is nothing to refuse; the caller then leaves
// bash out of the toolset.
func CheckBashAllowed(cfg SandboxConfig, addr string) error {
	if !cfg.AllowHostBash || cfg.Mode == SandboxBwrap || cfg.AllowHostBashPublic || isLoopbackAddr(addr) {
		return nil
	}
	return fmt.Errorf("refusing host bash on non-loopback address %q: sandbox.allow_host_bash is true with "+
		"sandbox.mode host, which lets anyone who reaches the server run commands on this machine; listen on "+
		"127.0.0.1, set sandbox.mode: bwrap, set sandbox.allow_host_bash: false, or accept the risk with "+
		"sandbox.allow_host_bash_public: true", addr)
}

// isLoopbackAddr reports whether a listen address binds only loopback. An
// empty host binds every interface; a name other than localhost may
// resolve anywhere, so both count as public.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
