package tools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"
)

// Sandbox modes.
const (
	SandboxHost  = "host"
	SandboxBwrap = "bwrap"
)

// SandboxConfig governs the bash tool (docs/DESIGN.md §4).
type SandboxConfig struct {
	Mode                string `yaml:"mode"`
	AllowHostBash       bool   `yaml:"allow_host_bash"`
	AllowHostBashPublic bool   `yaml:"allow_host_bash_public"`
	BashTimeoutSeconds  int    `yaml:"bash_timeout_seconds"`
	OutputLimitBytes    int    `yaml:"output_limit_bytes"`
}

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

// CheckBashAllowed applies the start-up rule of docs/DESIGN.md §4 to the listen
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
