package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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
	// cgroup is the command's pids cgroup, removed when it ends; "" if none.
	cgroup string
	// info is the read end of bwrap's --info-fd, which names the sandbox's
	// init; nil in host mode.
	info *os.File
	// group: kill the process group after the command, the only cleanup
	// host mode has without a PID namespace.
	group bool
}

// start starts line in workspace, its output going to out. The caller
// must call run.
func (sb *sandbox) start(ctx context.Context, workspace, line string, out io.Writer) (*job, error) {
	j := &job{}
	env := []string{"HOME=" + workspace, "LANG=C.UTF-8", "TERM=dumb", "TMPDIR=/tmp"}
	var infoW *os.File
	if sb.cfg.Mode == SandboxBwrap {
		name, args, err := sb.bwrapCommand(workspace, line, j)
		if err != nil {
			return nil, err
		}
		j.cmd = exec.CommandContext(ctx, name, args...)
		j.cmd.Env = append(env, "PATH="+defaultPath)
		j.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if j.info, infoW, err = os.Pipe(); err != nil {
			j.removeCgroup()
			return nil, err
		}
		j.cmd.ExtraFiles = []*os.File{infoW}
	} else {
		j.cmd = exec.CommandContext(ctx, "bash", "-c", line)
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
	j.cmd.Cancel = func() error { return killGroup(j.cmd.Process.Pid) }
	j.cmd.WaitDelay = bashWaitDelay
	return j, nil
}

// bwrapCommand is the command line of a bwrap command: joining its pids
// cgroup (a shell that writes its own pid, then execs, so nothing runs
// outside it), prlimit setting the rlimits, then bwrap.
func (sb *sandbox) bwrapCommand(workspace, line string, j *job) (string, []string, error) {
	l := sb.cfg.Limits
	limits := []string{
		fmt.Sprintf("--as=%d", l.MemoryMB*mib),
		fmt.Sprintf("--cpu=%d:%d", l.CPUSeconds, l.CPUSeconds+1),
		fmt.Sprintf("--fsize=%d", l.FileSizeMB*mib),
	}
	if sb.pids == nil {
		limits = append(limits, fmt.Sprintf("--nproc=%d", l.Processes))
	}
	args := append([]string{sb.prlimit}, limits...)
	args = append(args, "--", sb.bwrap)
	args = append(args, sb.bwrapArgs(workspace)...)
	args = append(args, "--info-fd", "3", "--", "bash", "-c", line)
	if sb.pids == nil {
		return args[0], args[1:], nil
	}
	dir, err := sb.pids.create(l.Processes)
	if err != nil {
		return "", nil, err
	}
	j.cgroup = dir
	join := []string{"-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(dir, "cgroup.procs")}
	return "/bin/sh", append(join, args...), nil
}

// run starts the command, waits for it and for every process it started
// to be gone, and returns Wait's error (or errSurvivors).
func (j *job) run() error {
	defer j.removeCgroup()
	ended := make(chan struct{})
	defer close(ended)
	err := startPinned(j.cmd, ended)
	if j.info != nil {
		// Only bwrap may hold the write end: EOF must mean bwrap is done with it.
		j.cmd.ExtraFiles[0].Close()
		defer j.info.Close()
	}
	if err != nil {
		return err
	}
	init := j.sandboxInit()
	waitErr := j.cmd.Wait()
	if j.group {
		// Background jobs outlive bash; they die with the call so nothing
		// the model started keeps running unseen.
		_ = killGroup(j.cmd.Process.Pid)
	}
	if init >= 0 && !awaitSandboxEnd(init) && waitErr == nil {
		waitErr = errSurvivors
	}
	return waitErr
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

func (j *job) removeCgroup() {
	if j.cgroup != "" {
		_ = os.Remove(j.cgroup)
	}
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
// (SIGXCPU, SIGXFSZ) must be told apart from a failure.
func (sb *sandbox) exitStatus(ps *os.ProcessState) string {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return killedBy(ws.Signal())
	}
	code := ps.ExitCode()
	if sb.cfg.Mode == SandboxBwrap && code > 128 && code < 128+65 {
		return killedBy(syscall.Signal(code - 128))
	}
	if code != 0 {
		return fmt.Sprintf("exit code %d", code)
	}
	return ""
}

func killedBy(sig syscall.Signal) string {
	return fmt.Sprintf("killed by signal %d (%v)", int(sig), sig)
}
