package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// This file starts a command's processes and makes sure they end: with
// the command, on a timeout or a stop, and with the server.

// bashWaitDelay bounds how long Wait lingers after the command exits or is
// killed while something outside its process group still holds the
// output pipe: only possible in host mode without a PID namespace.
const bashWaitDelay = 500 * time.Millisecond

// sandboxExitDelay bounds the wait for the kernel to end a sandbox's last
// processes once its init is gone.
const sandboxExitDelay = 5 * time.Second

// defaultPath is the sandbox's PATH, and the host's when the server has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// killedWhat says what a timeout killed, which depends on whether the
// command had a PID namespace of its own.
func (sb *sandbox) killedWhat() string {
	if sb.cfg.Mode == SandboxBwrap || sb.pidns {
		return "it and every process it started were killed"
	}
	return "process group killed"
}

// errSurvivors marks a sandbox whose processes had not all ended within
// sandboxExitDelay of its end.
var errSurvivors = errors.New("some of its processes were still exiting when the call returned")

// job is one started command.
type job struct {
	cmd *exec.Cmd
	// cg is the command's cgroups, removed when it ends; nil if none.
	cg *commandCgroup
	// info is the read end of bwrap's --info-fd, which names the sandbox's
	// init; nil in host mode. childEnds are the ends of the pipes that
	// bwrap holds, closed here once it started.
	info      *os.File
	childEnds []*os.File
	// group: kill the process group after the command, the only cleanup
	// host mode has without a PID namespace.
	group bool
	// init is a pidfd of the sandbox's init once it runs, else -1: killing
	// it ends every process of the command.
	init   int
	ctx    context.Context // its end kills the command
	killMu sync.Mutex      // guards init, started, killed and reaped
	// started: the command runs; killed: kill was called, before or
	// after; reaped: Wait returned, so its pid may belong to another
	// process and kill does nothing.
	started, killed, reaped bool
	// oomKills is how many of its processes the kernel killed for its
	// memory limit, read as it ended.
	oomKills int64
}

// The descriptors bwrap reads: its --info-fd and its --seccomp.
const (
	infoFD    = 3
	seccompFD = 4
)

// commandLimits are the limits decided for one command as it starts.
type commandLimits struct {
	// fileSize is RLIMIT_FSIZE: the smaller of file_size_mb and the room
	// left in the workspace, so no single file can take it over.
	fileSize int64
}

// start starts line in workspace, its output going to out. The caller
// must call run.
func (sb *sandbox) start(ctx context.Context, workspace, line string, out io.Writer, cl commandLimits) (*job, error) {
	j := &job{init: -1}
	env := []string{"HOME=" + workspace, "LANG=C.UTF-8", "TERM=dumb", "TMPDIR=/tmp"}
	if sb.cfg.Mode == SandboxBwrap {
		if err := sb.startBwrap(j, workspace, line, cl); err != nil {
			j.close()
			return nil, err
		}
		j.cmd.Env = append(env, "PATH="+defaultPath)
	} else {
		j.cmd = exec.Command("bash", "-c", line)
		// Host bash is meant to use the machine's tools, and PATH holds no
		// secrets, so it is the one variable taken from the server.
		path := os.Getenv("PATH")
		if path == "" {
			path = defaultPath
		}
		j.cmd.Env = append(env, "PATH="+path)
		j.cmd.SysProcAttr = sb.hostProcAttr()
		j.group = !sb.pidns
	}
	j.cmd.Dir = workspace
	// One writer for both streams makes exec share a single pipe, which
	// keeps stdout and stderr in the order the command wrote them.
	if out != nil {
		j.cmd.Stdout, j.cmd.Stderr = out, out
	}
	j.cmd.WaitDelay = bashWaitDelay
	// The context is watched by run rather than exec.CommandContext, so
	// that its end also kills the sandbox's init at once.
	j.ctx = ctx
	return j, nil
}

// startBwrap prepares j to run line in the bwrap sandbox.
func (sb *sandbox) startBwrap(j *job, workspace, line string, cl commandLimits) error {
	if sb.cg != nil {
		cg, err := sb.cg.create(sb.cfg.Limits)
		if err != nil {
			return err
		}
		j.cg = cg
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return err
	}
	j.info, j.childEnds = infoR, []*os.File{infoW}
	if sb.seccomp != nil {
		filter, err := seccompFile(sb.seccomp)
		if err != nil {
			return err
		}
		j.childEnds = append(j.childEnds, filter)
	}
	name, args := sb.commandLine(workspace, line, j.cg, cl)
	j.cmd = exec.Command(name, args...)
	j.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	j.cmd.ExtraFiles = j.childEnds
	return nil
}

// commandLine is the command line of a bwrap command: joining its
// cgroups (a shell that writes its own pid to each, then execs, so
// nothing runs outside them), prlimit setting the rlimits, bwrap, and for
// a root herd setpriv dropping the command to sandbox.user inside the
// sandbox, every capability and the bounding set gone and no way back
// (no_new_privs), before bash starts.
func (sb *sandbox) commandLine(workspace, line string, cg *commandCgroup, cl commandLimits) (string, []string) {
	l := sb.cfg.Limits
	// Where a cgroup counts the command's CPU time, its watch stops it at
	// the limit and RLIMIT_CPU, a second later, only backs it up.
	cpu := l.CPUSeconds
	if sb.cg.has(ctrlCPUAcct) {
		cpu++
	}
	limits := []string{
		fmt.Sprintf("--cpu=%d:%d", cpu, cpu+1),
		fmt.Sprintf("--fsize=%d", cl.fileSize),
	}
	if !sb.cg.has(ctrlMemory) {
		limits = append(limits, fmt.Sprintf("--as=%d", l.MemoryMB*mib))
	}
	if !sb.cg.has(ctrlPids) {
		limits = append(limits, fmt.Sprintf("--nproc=%d", l.Processes))
	}
	args := append([]string{sb.prlimit}, limits...)
	args = append(args, "--", sb.bwrap)
	args = append(args, sb.bwrapArgs(workspace)...)
	args = append(args, "--info-fd", strconv.Itoa(infoFD), "--")
	if a := sb.cfg.RunAs; a != nil {
		args = append(args, sb.setpriv, "--reuid", strconv.Itoa(a.UID), "--regid", strconv.Itoa(a.GID),
			"--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--")
	}
	args = append(args, "bash", "-c", line)
	if cg == nil {
		return args[0], args[1:]
	}
	procs := cg.procs()
	join := []string{"-c", `n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ 2>/dev/null > "$1" || ` +
		`{ echo "herd: the command could not join its cgroup $1; it did not run" >&2; exit 125; }; shift; n=$((n-1)); done; exec "$@"`,
		"herd-join", strconv.Itoa(len(procs))}
	join = append(join, procs...)
	return "/bin/sh", append(join, args...)
}

// run starts the command, waits for it and for every process it started
// to be gone, and returns Wait's error (or errSurvivors). A cancel of the
// start's context, and the watch, kill the command and its sandbox.
func (j *job) run() error {
	defer j.close()
	ended := make(chan struct{})
	defer close(ended)
	err := startPinned(j.cmd, ended)
	for _, f := range j.childEnds {
		// Only bwrap may hold them: EOF on info must mean bwrap is done.
		f.Close()
	}
	j.childEnds = nil
	if err != nil {
		return err
	}
	j.killMu.Lock()
	j.init = j.sandboxInit()
	j.started = true
	if j.killed {
		j.killLocked()
	}
	j.killMu.Unlock()
	stop := context.AfterFunc(j.ctx, j.kill)
	waitErr := j.cmd.Wait()
	j.killMu.Lock()
	j.reaped = true
	j.killMu.Unlock()
	stop()
	if j.group {
		// Background jobs outlive bash; they die with the call so nothing
		// the model started keeps running unseen.
		_ = killGroup(j.cmd.Process.Pid)
	}
	j.killMu.Lock()
	init := j.init
	j.init = -1
	j.killMu.Unlock()
	if init >= 0 && !awaitSandboxEnd(init) && waitErr == nil {
		waitErr = errSurvivors
	}
	j.oomKills = j.cg.oomKills()
	return waitErr
}

// kill ends the command: its process group, and the sandbox's init with
// everything in its PID namespace. Before the command started, it ends it
// as it starts.
func (j *job) kill() {
	j.killMu.Lock()
	defer j.killMu.Unlock()
	j.killed = true
	if j.started && !j.reaped {
		j.killLocked()
	}
}

func (j *job) killLocked() {
	_ = killGroup(j.cmd.Process.Pid)
	if j.init >= 0 {
		_ = unix.PidfdSendSignal(j.init, unix.SIGKILL, nil, 0)
	}
}

// close releases what start made, whether or not the command ran.
func (j *job) close() {
	for _, f := range j.childEnds {
		f.Close()
	}
	if j.info != nil {
		j.info.Close()
	}
	j.cg.remove()
}

// startPinned starts cmd from an OS thread that stays alive, locked to
// one goroutine, until ended is closed. The parent-death signal fires when
// the thread that started the child ends, not the process, and the Go
// runtime ends a thread when a goroutine exits while locked to it; pinning
// the starting thread makes the signal mean "the server died".
func startPinned(cmd *exec.Cmd, ended <-chan struct{}) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		started <- cmd.Start()
		<-ended
	}()
	return <-started
}

// sandboxInit returns a pidfd of the sandbox's init (its pid 1), or -1.
// The init's end is the end of everything in its PID namespace, so
// waiting for it after bwrap exits makes "gone when the tool returns"
// exact even when bwrap was killed first.
func (j *job) sandboxInit() int {
	if j.info == nil {
		return -1
	}
	var info struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.NewDecoder(j.info).Decode(&info); err != nil || info.ChildPID <= 0 {
		return -1
	}
	fd, err := unix.PidfdOpen(info.ChildPID, 0)
	if err != nil {
		return -1
	}
	// bwrap is not yet reaped, so while the pid is still its child it
	// cannot have been reused: the pidfd is the sandbox's init.
	if parentOf(info.ChildPID) != j.cmd.Process.Pid {
		unix.Close(fd)
		return -1
	}
	return fd
}

// awaitSandboxEnd kills the sandbox's init (a no-op when it is gone) and
// waits until it has ended, which the kernel reports only once every
// process of its PID namespace is gone. It reports whether that happened
// within sandboxExitDelay.
func awaitSandboxEnd(pidfd int) bool {
	defer unix.Close(pidfd)
	_ = unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	deadline := time.Now().Add(sandboxExitDelay)
	for {
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		if errors.Is(err, unix.EINTR) && time.Now().Before(deadline) {
			continue
		}
		return err == nil && n > 0
	}
}

// parentOf returns the parent pid of pid, or 0 when it cannot be read.
func parentOf(pid int) int {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
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

// exitStatus says how a command ended when it was not a plain success.
// bwrap reports a command killed by signal N as exit code 128+N, as a
// shell does, so in bwrap mode such a code is read as that signal: a limit
// (SIGXCPU, SIGXFSZ) must be told apart from a failure. fileSize is the
// command's RLIMIT_FSIZE, which SIGXFSZ names.
func (sb *sandbox) exitStatus(ps *os.ProcessState, fileSize int64) string {
	sig := syscall.Signal(-1)
	ws, ok := ps.Sys().(syscall.WaitStatus)
	code := ps.ExitCode()
	switch {
	case ok && ws.Signaled():
		sig = ws.Signal()
	case sb.cfg.Mode == SandboxBwrap && code > 128 && code < 128+65:
		sig = syscall.Signal(code - 128)
	case code != 0:
		return fmt.Sprintf("exit code %d", code)
	default:
		return ""
	}
	status := killedBy(sig)
	switch sig {
	case syscall.SIGXFSZ:
		status += fmt.Sprintf(": a file reached %s, the most one file may grow to now (the smaller of "+
			"sandbox.limits.file_size_mb and the room left in the workspace)", mebibytes(fileSize))
	case syscall.SIGXCPU:
		status += ": a process used its CPU time (sandbox.limits.cpu_seconds)"
	}
	return status
}

func killedBy(sig syscall.Signal) string {
	return fmt.Sprintf("killed by signal %d (%v)", int(sig), sig)
}
