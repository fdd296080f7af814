package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"herd/internal/loopback"
)

// Sandbox modes. SandboxAuto is a configured value only: Resolve turns it
// into SandboxBwrap or SandboxHost.
const (
	SandboxAuto  = "auto"
	SandboxHost  = "host"
	SandboxBwrap = "bwrap"
)

// Network settings of the bwrap sandbox.
const (
	NetworkNone = "none"
	NetworkHost = "host"
)

// SandboxConfig governs the bash tool (docs/DESIGN.md §4).
type SandboxConfig struct {
	Mode string `yaml:"mode"`
	// Network is none (the default: no network namespace shared) or host
	// (bwrap shares the host's network and its resolv.conf).
	Network string `yaml:"network"`
	// User is the account bwrap commands run as when herd runs as root: a
	// user name, a uid or uid:gid, never root (default nobody). A herd
	// that is not root runs them as its own user in a user namespace.
	User                string        `yaml:"user"`
	AllowHostBash       bool          `yaml:"allow_host_bash"`
	AllowHostBashPublic bool          `yaml:"allow_host_bash_public"`
	BashTimeoutSeconds  int           `yaml:"bash_timeout_seconds"`
	OutputLimitBytes    int           `yaml:"output_limit_bytes"`
	Limits              SandboxLimits `yaml:"limits"`

	// RunAs is set by Resolve: the account that runs bwrap commands and
	// owns the workspaces, when it is not the server's own (herd is root).
	RunAs *Account `yaml:"-"`
}

// SandboxLimits are the resource limits of one command. A zero field takes
// its default. Processes, memory, CPU, file size and /tmp hold in bwrap
// mode; the workspace's size, files and the free-space floor hold in
// every mode.
type SandboxLimits struct {
	// Processes is the most processes (threads included) one command may
	// run at once: a pids cgroup where the machine allows one, else
	// RLIMIT_NPROC, which counts every process of the commands' uid.
	Processes int `yaml:"processes"`
	// MemoryMB is the memory of one command, all its processes together
	// (a memory cgroup; else RLIMIT_AS, the address space of each process).
	MemoryMB int `yaml:"memory_mb"`
	// CPUSeconds is the CPU time of one command, all its processes
	// together (its cgroup's count; else RLIMIT_CPU, per process).
	CPUSeconds int `yaml:"cpu_seconds"`
	// CPUs is how many cores' worth of CPU one command may use at once
	// (a cpu cgroup's bandwidth).
	CPUs float64 `yaml:"cpus"`
	// FileSizeMB is the largest file a command may write (RLIMIT_FSIZE);
	// never more than the room left in the workspace when it starts.
	FileSizeMB int `yaml:"file_size_mb"`
	// TmpMB is the size of the sandbox's private /tmp and /dev/shm.
	TmpMB int `yaml:"tmp_mb"`
	// WorkspaceMB is the disk a thread's workspace may use.
	WorkspaceMB int `yaml:"workspace_mb"`
	// WorkspaceFiles is how many files and directories it may hold.
	WorkspaceFiles int `yaml:"workspace_files"`
	// MinFreeMB is the free space the workspaces' disk keeps: below it
	// commands and growing writes are refused, and a running command is
	// stopped, before the disk (the database's too, by default) fills.
	MinFreeMB int `yaml:"min_free_mb"`
	// CommandsPerUser is how many commands one user's runs may have
	// running at once, across their threads; more wait for a turn.
	CommandsPerUser int `yaml:"commands_per_user"`
}

// Defaults of the limits when the config leaves a value at zero; the
// documented defaults are config.example.yaml's.
var defaultLimits = SandboxLimits{
	Processes: 256, MemoryMB: 2048, CPUSeconds: 120, CPUs: 1, FileSizeMB: 512, TmpMB: 256,
	WorkspaceMB: 1024, WorkspaceFiles: 100_000, MinFreeMB: 256, CommandsPerUser: 4,
}

func (l SandboxLimits) withDefaults() SandboxLimits {
	fill := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	fill(&l.Processes, defaultLimits.Processes)
	fill(&l.MemoryMB, defaultLimits.MemoryMB)
	fill(&l.CPUSeconds, defaultLimits.CPUSeconds)
	fill(&l.FileSizeMB, defaultLimits.FileSizeMB)
	fill(&l.TmpMB, defaultLimits.TmpMB)
	fill(&l.WorkspaceMB, defaultLimits.WorkspaceMB)
	fill(&l.WorkspaceFiles, defaultLimits.WorkspaceFiles)
	fill(&l.MinFreeMB, defaultLimits.MinFreeMB)
	fill(&l.CommandsPerUser, defaultLimits.CommandsPerUser)
	if l.CPUs <= 0 {
		l.CPUs = defaultLimits.CPUs
	}
	return l
}

const mib = 1 << 20

// bwrapProbeTimeout bounds the start-up check that bubblewrap can run.
const bwrapProbeTimeout = 10 * time.Second

// errBwrapUnavailable marks a bwrap sandbox that cannot run on this
// machine: bwrap is missing or cannot create its namespaces.
var errBwrapUnavailable = errors.New("bubblewrap sandbox unavailable")

// bwrapEtc are the /etc entries the sandbox sees: what the dynamic linker,
// name lookups of the user and Debian's alternatives need, nothing more.
var bwrapEtc = []string{
	"/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/localtime",
}

// sandbox is a SandboxConfig resolved against this machine: the concrete
// mode and the means it found to enforce it.
type sandbox struct {
	cfg SandboxConfig // defaults filled, Mode concrete, RunAs resolved
	// why says how auto chose the mode; "" when the mode was configured.
	why string

	// bwrap mode: the binaries, the read-only view of the system, the
	// cgroups (nil where the machine offers none) and the seccomp filter
	// (nil on an architecture it does not know).
	bwrap, prlimit, setpriv string
	sysMounts               []string
	cg                      *cgroups
	seccomp                 []byte
	// seen is what the start-up probe found a command to be.
	seen processCreds

	// host mode: each command in its own PID namespace (pidns), inside a
	// user namespace when the server is not root (userns).
	pidns, userns bool
	// pidnsErr is why host mode has no PID namespace.
	pidnsErr error
}

// newSandbox resolves cfg: auto becomes bwrap where bubblewrap works and
// host otherwise; bwrap that cannot work is an error saying why.
func newSandbox(cfg SandboxConfig) (*sandbox, error) {
	inheritedOnce.Do(closeInheritedOnExec)
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.Network == "" {
		cfg.Network = NetworkNone
	}
	if cfg.Network != NetworkNone && cfg.Network != NetworkHost {
		return nil, fmt.Errorf("sandbox.network %q is not %q or %q", cfg.Network, NetworkNone, NetworkHost)
	}
	if cfg.Mode == "" {
		cfg.Mode = SandboxHost
	}
	cfg.RunAs = nil
	sb := &sandbox{cfg: cfg}
	switch cfg.Mode {
	case SandboxAuto:
		// The probe must run in the sandbox it tries.
		sb.cfg.Mode = SandboxBwrap
		err := sb.setUpBwrap()
		if err == nil {
			sb.why = "auto: bubblewrap works here"
			return sb, nil
		}
		if !errors.Is(err, errBwrapUnavailable) {
			return nil, err
		}
		sb.cfg.Mode, sb.cfg.RunAs = SandboxHost, nil
		sb.why = "auto: " + err.Error()
		return sb, sb.setUpHost()
	case SandboxBwrap:
		if err := sb.setUpBwrap(); err != nil {
			return nil, fmt.Errorf("sandbox.mode is bwrap but %w", err)
		}
		return sb, nil
	case SandboxHost:
		return sb, sb.setUpHost()
	default:
		return nil, fmt.Errorf("sandbox.mode %q is not %q, %q or %q", cfg.Mode, SandboxAuto, SandboxHost, SandboxBwrap)
	}
}

var inheritedOnce sync.Once

// closeInheritedOnExec marks the descriptors the server inherited
// (anything above stderr that is not close-on-exec: Go opens its own
// with O_CLOEXEC) so that they do not leak into commands: neither exec
// nor bwrap closes them, and one may be a socket or a file the command
// must not reach.
func closeInheritedOnExec() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

func (sb *sandbox) setUpBwrap() error {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return fmt.Errorf("%w: bwrap is not installed: %w", errBwrapUnavailable, err)
	}
	// prlimit (util-linux, essential on Debian) applies the rlimits: it
	// sets them on itself and execs bwrap, so no hook in the server's own
	// binary is needed and every binary that builds the tool (tests too)
	// gets the same limits.
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		return fmt.Errorf("%w: prlimit (util-linux) is not installed: %w", errBwrapUnavailable, err)
	}
	sb.bwrap, sb.prlimit = bwrap, prlimit
	if os.Geteuid() == 0 {
		if err := sb.setUpRunAs(); err != nil {
			return err
		}
	}
	if sb.seccomp, err = seccompProgram(); err != nil {
		return err
	}
	sb.sysMounts = systemMounts(sb.cfg.Network == NetworkHost)
	sb.cg = findCgroups()
	err = sb.probeBwrap()
	if err != nil && sb.cg != nil && !errors.Is(err, errUnsafeSandbox) {
		// Cgroups that can be made but not joined must cost the limits
		// their cgroups, not the sandbox: the report then names the rlimits.
		sb.cg = nil
		err = sb.probeBwrap()
	}
	return err
}

// setUpRunAs resolves the account a root herd runs commands as. bwrap is
// then started as root, which needs no user namespace, and the command
// drops to the account inside the sandbox with setpriv (util-linux), so
// nothing the command runs holds root's uid or any capability.
func (sb *sandbox) setUpRunAs() error {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return fmt.Errorf("%w: herd runs as root, and setpriv (util-linux), which drops a command to sandbox.user, "+
			"is not installed: %w", errBwrapUnavailable, err)
	}
	account, err := lookupAccount(sb.cfg.User)
	if err != nil {
		return err
	}
	sb.setpriv, sb.cfg.RunAs = setpriv, &account
	return nil
}

// errUnsafeSandbox marks a sandbox whose probe command ran with more than
// it must: herd refuses to start rather than offer it.
var errUnsafeSandbox = errors.New("the sandbox does not hold")

// probeBwrap runs a command in the sandbox, because bwrap is often
// installed where it cannot work (in a container without user
// namespaces) and that should be known at start, not fail every command.
// The command reads its own credentials, which the start-up line reports:
// a sandbox whose command has a capability, or root's uid, is refused.
func (sb *sandbox) probeBwrap() error {
	ws, err := os.MkdirTemp("", "herd-bwrap-probe-")
	if err != nil {
		return fmt.Errorf("probe workspace: %w", err)
	}
	defer os.RemoveAll(ws)
	if err := OwnWorkspace(ws, sb.cfg.RunAs); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), bwrapProbeTimeout)
	defer cancel()
	var out strings.Builder
	j, err := sb.start(ctx, ws, "cat /proc/self/status /proc/self/mountinfo", &out, commandLimits{fileSize: mib})
	if err != nil {
		return fmt.Errorf("%w: %w", errBwrapUnavailable, err)
	}
	if err := j.run(); err != nil {
		return fmt.Errorf("%w: bwrap failed: %s (%w)", errBwrapUnavailable, strings.TrimSpace(out.String()), err)
	}
	sb.seen = readCreds(out.String())
	return sb.checkCreds()
}

// checkCreds refuses a sandbox whose probe command could act as root: a
// capability, root's uid, or the freedom to gain privileges.
func (sb *sandbox) checkCreds() error {
	c := sb.seen
	switch {
	case c.capEff != 0 || c.capBnd != 0 && sb.cfg.RunAs != nil:
		return fmt.Errorf("%w: a command kept capabilities (CapEff %016x, CapBnd %016x)", errUnsafeSandbox, c.capEff, c.capBnd)
	case c.uid < 0:
		return fmt.Errorf("%w: the probe command's credentials could not be read", errUnsafeSandbox)
	case !c.noNewPrivs:
		return fmt.Errorf("%w: a command may gain privileges (no_new_privs is off)", errUnsafeSandbox)
	case sb.cfg.RunAs != nil && (c.uid != sb.cfg.RunAs.UID || c.gid != sb.cfg.RunAs.GID):
		return fmt.Errorf("%w: a command ran as uid %d gid %d, not as sandbox.user %s", errUnsafeSandbox, c.uid, c.gid, sb.cfg.RunAs)
	case sb.cfg.RunAs == nil && os.Geteuid() == 0:
		return fmt.Errorf("%w: herd is root and no sandbox.user was resolved", errUnsafeSandbox)
	case !c.procSysRO:
		return fmt.Errorf("%w: /proc/sys is not read-only in the sandbox", errUnsafeSandbox)
	}
	return nil
}

// processCreds is what /proc/self/status says of a process.
type processCreds struct {
	uid, gid       int
	capEff, capBnd uint64
	noNewPrivs     bool
	seccomp        bool
	procSysRO      bool // /proc/sys is mounted read-only (mountinfo)
}

// readCreds parses /proc/<pid>/status followed by its mountinfo; fields
// it lacks read as uid -1.
func readCreds(status string) processCreds {
	c := processCreds{uid: -1, gid: -1}
	for _, line := range strings.Split(status, "\n") {
		// mountinfo: id parent major:minor root mountpoint options ...
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/proc/sys" {
			c.procSysRO = slices.Contains(strings.Split(f[5], ","), "ro")
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		switch k {
		case "Uid":
			c.uid, _ = strconv.Atoi(f[0]) // the real uid; the others follow it
			for _, id := range f[1:] {
				if n, _ := strconv.Atoi(id); n != c.uid {
					c.uid = -1
				}
			}
		case "Gid":
			c.gid, _ = strconv.Atoi(f[0])
		case "CapEff":
			c.capEff, _ = strconv.ParseUint(f[0], 16, 64)
		case "CapBnd":
			c.capBnd, _ = strconv.ParseUint(f[0], 16, 64)
		case "NoNewPrivs":
			c.noNewPrivs = f[0] == "1"
		case "Seccomp":
			c.seccomp = f[0] != "0"
		}
	}
	return c
}

func (sb *sandbox) setUpHost() error {
	if _, err := exec.LookPath("bash"); err != nil {
		return fmt.Errorf("bash tool: %w", err)
	}
	sb.userns = os.Geteuid() != 0
	sb.pidns = true
	if err := exec.Command("true").Run(); err != nil {
		return fmt.Errorf("bash tool: cannot run commands: %w", err)
	}
	cmd := exec.Command("true")
	cmd.SysProcAttr = sb.hostProcAttr()
	if err := cmd.Run(); err != nil {
		sb.pidns, sb.userns, sb.pidnsErr = false, false, err
	}
	return nil
}

// hostProcAttr puts a host command in its own process group and, where
// the probe found it works, its own PID namespace: the command is its
// init, and when it ends the kernel kills everything left inside, even
// what escaped the group with setsid. The parent-death signal ends the
// command when the server dies.
func (sb *sandbox) hostProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if !sb.pidns {
		return attr
	}
	attr.Cloneflags = syscall.CLONE_NEWPID
	if sb.userns {
		// Without root a PID namespace needs a user namespace; mapping the
		// server's own ids keeps files owned by who they were.
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
	}
	return attr
}

// Report says what a resolved sandbox enforces, for the start-up log.
type Report struct {
	Mode string
	// Why says how auto chose the mode; empty when it was configured.
	Why string
	// Commands says who gets a shell.
	Commands string
	// RunsAs says which uid, gid and capabilities a command gets, as the
	// start-up probe found them (bwrap mode).
	RunsAs string
	// Confinement says what a command can see and reach.
	Confinement string
	// Limits lists each limit and how it holds.
	Limits string
	// Cleanup says whether nothing a command starts outlives the tool, and how.
	Cleanup string
	// Warning names a limit that does not hold per command, and what one
	// user can then do to another; empty when every limit holds.
	Warning string
}

// Attrs are the report as slog key-value pairs, for one log line.
func (r Report) Attrs() []any {
	attrs := []any{"mode", r.Mode}
	if r.Why != "" {
		attrs = append(attrs, "why", r.Why)
	}
	attrs = append(attrs, "commands", r.Commands)
	if r.RunsAs != "" {
		attrs = append(attrs, "runs_as", r.RunsAs)
	}
	return append(attrs, "confinement", r.Confinement, "limits", r.Limits, "cleanup", r.Cleanup)
}

// Resolve turns cfg's mode auto into bwrap or host by what works on this
// machine, fills the defaults and RunAs, and reports what the sandbox
// enforces. The caller stores the resolved config, so that SandboxHost
// means host mode: only admins' runs get a shell (docs/DESIGN.md §4).
func Resolve(cfg SandboxConfig) (SandboxConfig, Report, error) {
	sb, err := newSandbox(cfg)
	if err != nil {
		return SandboxConfig{}, Report{}, fmt.Errorf("sandbox: %w", err)
	}
	return sb.cfg, sb.report(), nil
}

func (sb *sandbox) report() Report {
	r := Report{Mode: sb.cfg.Mode, Why: sb.why}
	l := sb.cfg.Limits
	wsLimit := fmt.Sprintf("workspace %d MiB and %d files (watched while a command runs, which is stopped as it crosses; "+
		"checked before file writes), disk free space kept above %d MiB", l.WorkspaceMB, l.WorkspaceFiles, l.MinFreeMB)
	if sb.cfg.Mode == SandboxBwrap {
		r.Commands = "bwrap: every user's runs get confined bash"
		r.RunsAs = sb.runsAs()
		network := "no network"
		if sb.cfg.Network == NetworkHost {
			network = "host network (sandbox.network: host)"
		}
		r.Confinement = "only the workspace and read-only system directories; own pid, ipc and uts namespaces; " + network
		r.Limits, r.Warning = sb.limitsReport()
		r.Limits += ", " + wsLimit
		r.Cleanup = "holds: each command runs in its own pid namespace, killed with the server and when the tool returns"
		return r
	}
	r.Commands = "host mode: only admins' runs get bash"
	if !sb.cfg.AllowHostBash {
		r.Commands = "no one: host mode and sandbox.allow_host_bash is false"
	}
	r.Confinement = "none: commands run as the server's user on this machine"
	r.Limits = "none but the timeout and the " + wsLimit
	switch {
	case sb.pidns && sb.userns:
		r.Cleanup = "holds: each command runs in its own pid namespace (in a user namespace mapping the server's ids), killed with the server"
	case sb.pidns:
		r.Cleanup = "holds: each command runs in its own pid namespace, killed with the server"
	default:
		r.Cleanup = fmt.Sprintf("does NOT hold: no pid namespace here (%v); the command's process group is killed and its "+
			"children die with the server, but a process that leaves the group (setsid) can outlive the tool", sb.pidnsErr)
	}
	return r
}

// runsAs says who a command is, from what the probe command read of itself.
func (sb *sandbox) runsAs() string {
	c := sb.seen
	who := fmt.Sprintf("uid %d, gid %d", c.uid, c.gid)
	if sb.cfg.RunAs != nil {
		who = fmt.Sprintf("uid %d (sandbox.user %s), gid %d", c.uid, sb.cfg.RunAs.Name, c.gid)
	} else {
		who += " (the server's own, in a user namespace)"
	}
	caps := "no capabilities (CapEff 0)"
	if c.capEff != 0 {
		caps = fmt.Sprintf("capabilities %016x", c.capEff)
	}
	extra := ", no new privileges"
	if !c.noNewPrivs {
		extra = ", MAY gain privileges"
	}
	if c.seccomp {
		extra += ", seccomp: no user namespaces, fallocate modes, io_uring or keyrings"
	} else {
		extra += ", no seccomp filter on " + runtime.GOARCH
	}
	return who + ", " + caps + extra + "; /proc/sys and the system directories read-only"
}

// limitsReport lists how each limit of a command holds, and warns of
// those that fall back to per-process rlimits.
func (sb *sandbox) limitsReport() (limits, warning string) {
	l := sb.cfg.Limits
	// Each controller's limit as its cgroup holds it, else as the rlimit
	// does ("" where nothing does), and what one user can then do.
	held := []struct {
		ctrl, cgroup, rlimit, weak string
	}{
		{ctrlPids, fmt.Sprintf("processes %d per command (pids cgroup)", l.Processes), fmt.Sprintf("processes %d (RLIMIT_NPROC)", l.Processes),
			"no pids cgroup: RLIMIT_NPROC counts the processes of every command of the commands' uid, so one user's fork loop can make other users' commands fail"},
		{ctrlMemory, fmt.Sprintf("memory %d MiB per command (memory cgroup)", l.MemoryMB), fmt.Sprintf("memory %d MiB of address space per process (RLIMIT_AS)", l.MemoryMB),
			"no memory cgroup: memory is limited per process, so a command of many processes can use many times memory_mb and starve other users' commands and the server"},
		{ctrlCPUAcct, fmt.Sprintf("CPU time %d s per command (cgroup)", l.CPUSeconds), fmt.Sprintf("CPU time %d s per process (RLIMIT_CPU)", l.CPUSeconds),
			"no CPU accounting cgroup: CPU time is limited per process"},
		{ctrlCPU, fmt.Sprintf("%g CPUs at once per command (cpu cgroup)", l.CPUs), "",
			"no cpu cgroup: one command can use every core, slowing every other user's"},
	}
	var parts, weak []string
	for _, h := range held {
		switch {
		case sb.cg.has(h.ctrl):
			parts = append(parts, h.cgroup)
		case h.rlimit != "":
			parts = append(parts, h.rlimit)
			fallthrough
		default:
			weak = append(weak, h.weak)
		}
	}
	parts = append(parts, fmt.Sprintf("%d commands at once per user", l.CommandsPerUser),
		fmt.Sprintf("file size %d MiB (RLIMIT_FSIZE)", l.FileSizeMB), fmt.Sprintf("/tmp and /dev/shm %d MiB (tmpfs)", l.TmpMB))
	if sb.cg != nil {
		parts[0] += "; cgroups: " + sb.cg.String()
	}
	if len(weak) > 0 {
		warning = "sandbox limits do not all hold per command: " + strings.Join(weak, "; ") +
			" (give herd a delegated cgroup v2 subtree or writable v1 hierarchies: docs/OPERATIONS.md \"The sandbox\")"
	}
	return strings.Join(parts, ", "), warning
}

// bwrapArgs confines a command to the workspace, bound read-write at its
// own path so paths printed inside mean the same outside. The command has
// its own pid, ipc, uts and cgroup namespaces and /proc, so nothing of the
// host's processes, the server's environment included, is visible; no
// network unless shared back. --die-with-parent ends the sandbox with the
// server. A herd that is not root runs bwrap in a user namespace of its
// own uid, with no capabilities and no further user namespaces. A root
// herd runs bwrap as root, without a user namespace, keeping only what
// setpriv needs to drop the command to sandbox.user (commandLine) and the
// search of directories that enters the workspace, which belongs to that
// account; setpriv drops them all.
func (sb *sandbox) bwrapArgs(workspace string) []string {
	args := []string{"--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session"}
	if sb.cfg.RunAs != nil {
		args = append(args, "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP",
			"--cap-add", "CAP_DAC_READ_SEARCH")
	} else {
		args = append(args, "--unshare-user", "--disable-userns")
	}
	if sb.cfg.Network != NetworkHost {
		args = append(args, "--unshare-net")
	}
	if sb.seccomp != nil {
		args = append(args, "--seccomp", strconv.Itoa(seccompFD))
	}
	args = append(args, sb.sysMounts...)
	tmp := strconv.Itoa(sb.cfg.Limits.TmpMB * mib)
	args = append(args,
		// bwrap would cover /proc/sys read-only only where it could write
		// it; kernel settings are the host's, so it is covered always.
		"--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys",
		"--dev", "/dev",
		"--perms", "1777", "--size", tmp, "--tmpfs", "/tmp",
		"--perms", "1777", "--size", tmp, "--tmpfs", "/dev/shm",
	)
	// The sandbox's root is empty, so the data directory is invisible
	// unless it lies inside a system directory bound above; then it is
	// covered before the workspace is bound back.
	data := filepath.Dir(filepath.Dir(workspace))
	covered := sb.insideSystemMount(data)
	if covered {
		args = append(args, "--tmpfs", data)
	}
	// The directories above the workspace are made searchable (bwrap
	// would make them 0700, which a command of sandbox.user cannot
	// enter); they hold nothing but the way down.
	var parents []string
	for dir := filepath.Dir(workspace); dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		hostDir := sb.isSystemMount(dir) || sb.insideSystemMount(dir) && !(covered && within(dir, data))
		if hostDir || slices.Contains(sandboxMounts, dir) {
			break // it exists already, as the host or the sandbox made it
		}
		parents = append(parents, dir)
	}
	for _, dir := range slices.Backward(parents) {
		args = append(args, "--perms", "0755", "--dir", dir)
	}
	return append(args,
		"--bind", workspace, workspace,
		"--chdir", workspace,
	)
}

// sandboxMounts are the directories the sandbox mounts of its own.
var sandboxMounts = []string{"/tmp", "/dev/shm", "/dev", "/proc"}

// within reports whether dir is base or lies inside it.
func within(dir, base string) bool {
	return dir == base || strings.HasPrefix(dir, base+"/")
}

// isSystemMount reports whether dir is itself a directory the sandbox
// binds from the host.
func (sb *sandbox) isSystemMount(dir string) bool {
	for i := 0; i+2 < len(sb.sysMounts); i++ {
		if (sb.sysMounts[i] == "--ro-bind" || sb.sysMounts[i] == "--ro-bind-try") && sb.sysMounts[i+2] == dir {
			return true
		}
	}
	return false
}

// insideSystemMount reports whether dir lies strictly inside a directory
// the sandbox binds from the host.
func (sb *sandbox) insideSystemMount(dir string) bool {
	for i := 0; i+2 < len(sb.sysMounts); i++ {
		if sb.sysMounts[i] != "--ro-bind" && sb.sysMounts[i] != "--ro-bind-try" {
			continue
		}
		src := sb.sysMounts[i+1]
		if rel, err := filepath.Rel(src, dir); err == nil && rel != "." && filepath.IsLocal(rel) {
			return true
		}
	}
	return false
}

// systemMounts returns the read-only view of the host system: /usr, the
// top-level binary and library directories (as the symlinks they are on a
// merged-/usr system) and the selected /etc entries, with resolv.conf when
// the network is shared.
func systemMounts(network bool) []string {
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
	etc := bwrapEtc
	if network {
		etc = append(etc[:len(etc):len(etc)], "/etc/resolv.conf", "/etc/ssl", "/etc/ca-certificates")
	}
	// bwrap would make /etc 0700, which sandbox.user cannot enter.
	args = append(args, "--perms", "0755", "--dir", "/etc")
	for _, p := range etc {
		args = append(args, "--ro-bind-try", p, p)
	}
	return args
}

// CheckBashAllowed applies the start-up rule of docs/DESIGN.md §4 to a
// resolved sandbox: host bash on a public deployment — a listen address
// other than loopback (127.0.0.0/8, ::1, localhost), or a public_url whose
// host is not loopback (a TLS proxy in front) — is refused unless
// sandbox.allow_host_bash_public is set, because whoever reaches the
// server as an admin could then run commands on the machine, and a stolen
// admin session becomes a shell. bwrap mode is allowed anywhere. With
// sandbox.allow_host_bash false the bash tool is not offered at all, so
// there is nothing to refuse; the caller then leaves bash out.
func CheckBashAllowed(cfg SandboxConfig, addr, publicURL string) error {
	if !cfg.AllowHostBash || cfg.Mode == SandboxBwrap || cfg.AllowHostBashPublic {
		return nil
	}
	if !loopback.Addr(addr) {
		return refuseHostBash(fmt.Sprintf("the non-loopback address %q", addr))
	}
	if publicURL != "" && !loopback.URL(publicURL) {
		return refuseHostBash(fmt.Sprintf("server.public_url %q, a non-loopback host", publicURL))
	}
	return nil
}

func refuseHostBash(where string) error {
	return fmt.Errorf("refusing host bash on %s: commands would run on this machine (sandbox.mode host, or auto "+
		"without a working bubblewrap) and sandbox.allow_host_bash is true, which gives admins' runs a shell here; "+
		"use sandbox.mode: bwrap (install bubblewrap), set sandbox.allow_host_bash: false, listen on 127.0.0.1 "+
		"without a public server.public_url, or accept the risk with sandbox.allow_host_bash_public: true", where)
}
