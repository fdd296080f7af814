package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	Network             string        `yaml:"network"`
	AllowHostBash       bool          `yaml:"allow_host_bash"`
	AllowHostBashPublic bool          `yaml:"allow_host_bash_public"`
	BashTimeoutSeconds  int           `yaml:"bash_timeout_seconds"`
	OutputLimitBytes    int           `yaml:"output_limit_bytes"`
	Limits              SandboxLimits `yaml:"limits"`
}

// SandboxLimits are the resource limits of one command. A zero field takes
// its default. Processes, memory, CPU time, file size and /tmp hold in
// bwrap mode; the workspace size holds in every mode, checked at the
// tools' boundaries.
type SandboxLimits struct {
	// Processes is the most processes (threads included) one command may
	// run at once: a pids cgroup where the machine allows one, else
	// RLIMIT_NPROC, which counts every process of the server's user.
	Processes int `yaml:"processes"`
	// MemoryMB is the address space of each process (RLIMIT_AS).
	MemoryMB int `yaml:"memory_mb"`
	// CPUSeconds is the CPU time of each process (RLIMIT_CPU).
	CPUSeconds int `yaml:"cpu_seconds"`
	// FileSizeMB is the largest file a command may write (RLIMIT_FSIZE).
	FileSizeMB int `yaml:"file_size_mb"`
	// TmpMB is the size of the sandbox's private /tmp.
	TmpMB int `yaml:"tmp_mb"`
	// WorkspaceMB is the disk a thread's workspace may use.
	WorkspaceMB int `yaml:"workspace_mb"`
}

// Defaults of the limits when the config leaves a value at zero; the
// documented defaults are config.example.yaml's.
var defaultLimits = SandboxLimits{
	Processes: 256, MemoryMB: 2048, CPUSeconds: 120, FileSizeMB: 512, TmpMB: 256, WorkspaceMB: 1024,
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
	cfg SandboxConfig // defaults filled, Mode concrete
	// why says how auto chose the mode; "" when the mode was configured.
	why string

	// bwrap mode: the binaries, the read-only view of the system and the
	// pids cgroup (nil where the machine offers none).
	bwrap, prlimit string
	sysMounts      []string
	pids           *pidsCgroup

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
	sb := &sandbox{cfg: cfg}
	switch cfg.Mode {
	case SandboxAuto:
		err := sb.setUpBwrap()
		if err == nil {
			sb.cfg.Mode = SandboxBwrap
			sb.why = "auto: bubblewrap works here"
			return sb, nil
		}
		if !errors.Is(err, errBwrapUnavailable) {
			return nil, err
		}
		sb.cfg.Mode = SandboxHost
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
	sb.sysMounts = systemMounts(sb.cfg.Network == NetworkHost)
	sb.pids = findPidsCgroup()
	err = sb.probeBwrap()
	if err != nil && sb.pids != nil {
		// A cgroup that can be made but not joined must cost the process
		// limit its cgroup, not the sandbox: the report then says
		// RLIMIT_NPROC.
		sb.pids = nil
		err = sb.probeBwrap()
	}
	return err
}

// probeBwrap runs a trivial command in the sandbox, because bwrap is
// often installed where it cannot work (in a container without user
// namespaces) and that should be known at start, not fail every command.
func (sb *sandbox) probeBwrap() error {
	ws, err := os.MkdirTemp("", "herd-bwrap-probe-")
	if err != nil {
		return fmt.Errorf("probe workspace: %w", err)
	}
	defer os.RemoveAll(ws)
	ctx, cancel := context.WithTimeout(context.Background(), bwrapProbeTimeout)
	defer cancel()
	j, err := sb.start(ctx, ws, "true", nil)
	if err != nil {
		return fmt.Errorf("%w: %w", errBwrapUnavailable, err)
	}
	var out strings.Builder
	j.cmd.Stdout, j.cmd.Stderr = &out, &out
	if err := j.run(); err != nil {
		return fmt.Errorf("%w: bwrap failed: %s (%w)", errBwrapUnavailable, strings.TrimSpace(out.String()), err)
	}
	return nil
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
	// Confinement says what a command can see and reach.
	Confinement string
	// Limits lists each limit and how it holds.
	Limits string
	// Cleanup says whether nothing a command starts outlives the tool, and how.
	Cleanup string
}

// Attrs are the report as slog key-value pairs, for one log line.
func (r Report) Attrs() []any {
	attrs := []any{"mode", r.Mode}
	if r.Why != "" {
		attrs = append(attrs, "why", r.Why)
	}
	return append(attrs, "commands", r.Commands, "confinement", r.Confinement, "limits", r.Limits, "cleanup", r.Cleanup)
}

// Resolve turns cfg's mode auto into bwrap or host by what works on this
// machine, fills the defaults, and reports what the sandbox enforces. The
// caller stores the resolved config, so that SandboxHost means host mode:
// only admins' runs get a shell (docs/DESIGN.md §4).
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
	wsLimit := fmt.Sprintf("workspace %d MiB (checked before bash and file writes and after each command)", l.WorkspaceMB)
	if sb.cfg.Mode == SandboxBwrap {
		r.Commands = "bwrap: every user's runs get confined bash"
		network := "no network"
		if sb.cfg.Network == NetworkHost {
			network = "host network (sandbox.network: host)"
		}
		r.Confinement = "only the workspace and read-only system directories; own pid, ipc and uts namespaces; " + network
		var procs string
		if sb.pids != nil {
			procs = fmt.Sprintf("processes %d per command (pids cgroup %s)", l.Processes, sb.pids)
		} else {
			procs = fmt.Sprintf("processes %d (RLIMIT_NPROC: counts all processes of the server's user", l.Processes)
			if os.Geteuid() == 0 {
				procs += ", and does NOT hold for root: no writable pids cgroup found"
			}
			procs += ")"
		}
		r.Limits = fmt.Sprintf("%s, memory %d MiB address space per process (RLIMIT_AS), CPU %d s per process (RLIMIT_CPU), "+
			"file size %d MiB (RLIMIT_FSIZE), /tmp %d MiB (tmpfs), %s",
			procs, l.MemoryMB, l.CPUSeconds, l.FileSizeMB, l.TmpMB, wsLimit)
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

// bwrapArgs confines a command to the workspace, bound read-write at its
// own path so paths printed inside mean the same outside. --unshare-all
// drops the network (unless shared back) and gives the command its own
// pid namespace and /proc: nothing of the host's processes, the server's
// environment included, is visible. --die-with-parent ends the sandbox
// with the server.
func (sb *sandbox) bwrapArgs(workspace string) []string {
	args := []string{"--unshare-all", "--die-with-parent", "--new-session"}
	if sb.cfg.Network == NetworkHost {
		args = append(args, "--share-net")
	}
	args = append(args, sb.sysMounts...)
	args = append(args,
		"--proc", "/proc",
		"--dev", "/dev",
		"--size", fmt.Sprint(sb.cfg.Limits.TmpMB*mib), "--tmpfs", "/tmp",
	)
	// The sandbox's root is empty, so the data directory is invisible
	// unless it lies inside a system directory bound above; then it is
	// covered before the workspace is bound back.
	if data := filepath.Dir(filepath.Dir(workspace)); sb.insideSystemMount(data) {
		args = append(args, "--tmpfs", data)
	}
	return append(args,
		"--bind", workspace, workspace,
		"--chdir", workspace,
	)
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
