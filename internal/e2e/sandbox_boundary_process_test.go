package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests attack the bwrap sandbox through the real binary, as a
// signed-in user's command would, with herd running as root (how CI and
// most containers run it) and as an unprivileged user: nothing a command
// does may act as root or reach past its limits (docs/DESIGN.md §4,
// docs/SECURITY.md).

// nobodyID is the uid and gid herd runs as in the unprivileged cases, and
// the account a root herd runs commands as by default.
const nobodyID = 65534

// identities are who herd runs as in these tests: root (required in CI,
// which runs as root) and an unprivileged user.
func identities(t *testing.T) []string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI must run as root: the sandbox's root case runs there")
		}
		return []string{"unprivileged"}
	}
	return []string{"root", "unprivileged"}
}

// startHerdAs starts herd as root or, for "unprivileged", as nobody (when
// the test is root; otherwise as the test's own user), in bwrap mode so
// that a sandbox that cannot run fails the start rather than falls back.
func startHerdAs(t *testing.T, who string, env ...string) (p *proc, dataDir string) {
	t.Helper()
	env = append([]string{"HERD_SANDBOX_MODE=bwrap"}, env...)
	if who == "root" || os.Geteuid() != 0 {
		dataDir = t.TempDir()
		return startHerdWith(t, dataDir, env...), dataDir
	}
	// nobody needs a binary and a data directory it can reach.
	dir, err := os.MkdirTemp("", "herd-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "herd")
	if out, err := exec.Command("cp", herdBinary(t), bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	dataDir = filepath.Join(dir, "data")
	for _, d := range []string{dir, dataDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, nobodyID, nobodyID); err != nil {
			t.Fatal(err)
		}
	}
	env = append(env, "HOME="+dir)
	// herd starts in cgroups delegated to nobody, as systemd's Delegate=
	// would give a service, then drops to nobody.
	procs := delegateCgroups(t)
	argv := []string{"/bin/sh", "-c", `n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"`,
		"delegate", strconv.Itoa(len(procs))}
	argv = append(append(argv, procs...), "setpriv", "--reuid", strconv.Itoa(nobodyID), "--regid", strconv.Itoa(nobodyID), "--clear-groups", "--", bin)
	return startHerdCmd(t, argv, dataDir, append([]string{
		"HERD_ADMIN_EMAIL=ops@example.com", "HERD_ADMIN_PASSWORD=long enough pw"}, env...)...), dataDir
}

// delegateCgroups makes, in each cgroup v1 hierarchy of the controllers
// the sandbox uses, a cgroup below the test's own that nobody may manage,
// and returns the files a process joins them by. They are removed when
// the test ends.
func delegateCgroups(t *testing.T) []string {
	t.Helper()
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("herd-test-%d", rand.Int())
	var procs []string
	for _, line := range strings.Split(strings.TrimSpace(string(self)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[1] == "" || strings.HasPrefix(parts[1], "name=") {
			continue
		}
		var mount string
		for _, ctrl := range strings.Split(parts[1], ",") {
			if slices.Contains([]string{"pids", "memory", "cpu", "cpuacct"}, ctrl) {
				mount = filepath.Join("/sys/fs/cgroup", parts[1])
			}
		}
		if _, err := os.Stat(mount); mount == "" || err != nil {
			continue
		}
		dir := filepath.Join(mount, parts[2], name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatalf("delegate a cgroup: %v", err)
		}
		t.Cleanup(func() { removeCgroupTree(dir) })
		for _, f := range []string{"", "cgroup.procs", "tasks"} {
			if err := os.Chown(filepath.Join(dir, f), nobodyID, nobodyID); err != nil && f != "tasks" {
				t.Fatalf("delegate a cgroup: %v", err)
			}
		}
		procs = append(procs, filepath.Join(dir, "cgroup.procs"))
	}
	if len(procs) == 0 && os.Getenv("CI") != "" {
		t.Fatal("no cgroup v1 hierarchy to delegate to nobody")
	}
	return procs
}

// removeCgroupTree removes the cgroup dir and those below it, deepest
// first; their processes are gone.
func removeCgroupTree(dir string) {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for _, d := range slices.Backward(dirs) {
		_ = os.Remove(d)
	}
}

// attackScript tries, in one command, what a command must never be able
// to do; each success prints a word the test looks for. The sysctl is
// written with the value it has and prlimit opened to append nothing, so
// a sandbox that failed changes nothing on the machine.
func attackScript(marker string) string {
	return strings.Join([]string{
		"echo uid=$(id -u) gid=$(id -g)",
		"grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status",
		"mount -o remount,rw,bind /usr 2>/dev/null && echo REMOUNTED",
		"touch /usr/" + marker + " 2>/dev/null && echo USR-WRITTEN",
		"cat /proc/sys/kernel/printk_ratelimit_burst > /proc/sys/kernel/printk_ratelimit_burst && echo SYSCTL-WRITTEN",
		"mkdir -p /tmp/cg && { mount -t cgroup -o pids none /tmp/cg || mount -t cgroup2 none /tmp/cg; } 2>/dev/null && echo CGROUP-MOUNTED",
		"unshare -U true 2>/dev/null && echo USERNS",
		"unshare -Ur true 2>/dev/null && echo USERNS-ROOT",
		// Opened for appending nothing: proves it writable without harm.
		"{ : >> /usr/bin/prlimit; } 2>/dev/null && echo PRLIMIT-WRITABLE",
		"cp /bin/true suid && chmod 6755 suid && echo set-id-made",
		"echo done",
	}, "; ")
}

// TestSandboxAttacksFail: a command cannot remount the system read-write,
// write a kernel setting, mount a cgroup hierarchy to raise its own
// limits, make a user namespace or replace a program herd runs, and keeps
// no capability and no set-ID file, whether herd runs as root (its
// commands then run as nobody) or as an unprivileged user.
func TestSandboxAttacksFail(t *testing.T) {
	for _, who := range identities(t) {
		t.Run(who, func(t *testing.T) {
			marker := fmt.Sprintf(".herd-marker-%d", rand.Int())
			t.Cleanup(func() { os.Remove("/usr/" + marker) })
			prlimit, _ := exec.LookPath("prlimit")
			before, _ := os.ReadFile(prlimit)
			p, dataDir := startHerdAs(t, who)
			if !strings.Contains(p.log.String(), "no capabilities (CapEff 0)") {
				t.Errorf("the start-up line does not state the commands' capabilities:\n%s", p.log.String())
			}
			c := p.signIn()
			th := runCommand(c, attackScript(marker))
			got := printed(t, taskResult(t, c, th))
			t.Logf("the command printed:\n%s", got)
			if !strings.Contains(got, "done") || !strings.Contains(got, "set-id-made") {
				t.Fatalf("the attack script did not run through: %q", got)
			}
			if want := fmt.Sprintf("uid=%d gid=%d", nobodyID, nobodyID); !strings.Contains(got, want) {
				t.Errorf("the command ran as %q; want %s", firstLine(got), want)
			}
			if !strings.Contains(got, "CapEff:\t0000000000000000") || !strings.Contains(got, "NoNewPrivs:\t1") {
				t.Errorf("the command holds capabilities or may gain privileges: %q", got)
			}
			// Read-only, not only out of the uid's reach.
			if !strings.Contains(got, "printk_ratelimit_burst: Read-only file system") {
				t.Errorf("a kernel setting's write did not meet a read-only /proc/sys: %q", got)
			}
			for _, word := range []string{"REMOUNTED", "USR-WRITTEN", "SYSCTL-WRITTEN", "CGROUP-MOUNTED", "USERNS", "PRLIMIT-WRITABLE"} {
				if strings.Contains(got, word) {
					t.Errorf("the command could do it: %s", word)
				}
			}
			if _, err := os.Stat("/usr/" + marker); err == nil {
				t.Errorf("the command wrote /usr/%s on the host", marker)
			}
			if after, _ := os.ReadFile(prlimit); string(after) != string(before) {
				t.Errorf("%s changed", prlimit)
			}
			info, err := os.Stat(filepath.Join(dataDir, "workspaces", th, "suid"))
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
				t.Errorf("the command left a set-ID file in its workspace: %v", info.Mode())
			}
			if st := info.Sys().(*syscall.Stat_t); st.Uid != nobodyID {
				t.Errorf("the command's file belongs to uid %d; want %d", st.Uid, nobodyID)
			}
		})
	}
}

// printed is what the demo's bash subagent reports the command printed,
// without the command line it quotes first.
func printed(t *testing.T, result string) string {
	t.Helper()
	_, out, ok := strings.Cut(result, "It printed:")
	if !ok {
		t.Fatalf("no output in the task's result: %q", result)
	}
	return out
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestSandboxQuotasHold: a command cannot outrun its limits, which are
// totals of the command, not allowances per process: blocks reserved with
// fallocate, a file past the room left, 50,000 empty files, three
// processes of 200 MiB under a 256 MiB limit, a fork loop that would have
// made another user's command fail.
func TestSandboxQuotasHold(t *testing.T) {
	for _, who := range identities(t) {
		t.Run(who, func(t *testing.T) {
			p, dataDir := startHerdAs(t, who,
				"HERD_SANDBOX_LIMITS_WORKSPACE_MB=10", "HERD_SANDBOX_LIMITS_WORKSPACE_FILES=1000",
				"HERD_SANDBOX_LIMITS_MEMORY_MB=256", "HERD_SANDBOX_LIMITS_PROCESSES=64")
			if strings.Contains(p.log.String(), "sandbox limits do not all hold per command") {
				t.Errorf("the machine's cgroups are not used:\n%s", p.log.String())
			}
			c := p.signIn()
			cases := []struct {
				name, command, want string
				check               func(t *testing.T, ws string)
			}{
				{"fallocate", ": > big; fallocate -n -l 401M big; echo rc=$?; fallocate -l 401M big2; echo rc=$?",
					"keep size mode is unsupported", workspaceWithin(10<<20+8<<20, 1000)},
				{"empty files", "mkdir d && cd d && for i in $(seq 50000); do : > $i; done; echo finished",
					"the command was stopped: the workspace holds", workspaceWithin(10<<20+8<<20, 1000+1000)},
				{"memory of several processes", "for i in 1 2 3; do (x=$(head -c 200000000 /dev/zero | tr '\\0' a); sleep 2; echo ${#x}) & done; wait; echo finished",
					"the command ran out of memory: its processes together may use 256 MiB", nil},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					th := runCommand(c, tc.command)
					got := printed(t, taskResult(t, c, th))
					if !strings.Contains(got, tc.want) {
						t.Errorf("got %q; want %q", got, tc.want)
					}
					if tc.check != nil {
						tc.check(t, filepath.Join(dataDir, "workspaces", th))
					}
				})
			}
		})
	}
}

// workspaceWithin checks that the workspace ws uses at most bytes and
// holds at most files entries.
func workspaceWithin(bytes, files int64) func(t *testing.T, ws string) {
	return func(t *testing.T, ws string) {
		t.Helper()
		out, err := exec.Command("du", "-s", "-B1", "--inodes", ws).Output()
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
		out, err = exec.Command("du", "-s", "-B1", ws).Output()
		if err != nil {
			t.Fatal(err)
		}
		used, _ := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
		t.Logf("the workspace holds %d entries in %d bytes", n, used)
		if used > bytes || n > files {
			t.Errorf("the workspace holds %d entries in %d bytes; want at most %d in %d", n, used, files, bytes)
		}
	}
}

// TestForkLoopStaysWithItsUser: one user's command that fills its process
// limit fills only its own; another user's command at the same moment
// starts its processes (with RLIMIT_NPROC, which counts every command of
// the commands' uid together, it could not fork).
func TestForkLoopStaysWithItsUser(t *testing.T) {
	for _, who := range identities(t) {
		t.Run(who, func(t *testing.T) {
			p, _ := startHerdAs(t, who, "HERD_SANDBOX_LIMITS_PROCESSES=64")
			admin := p.signIn()
			const pw = "a long and unusual passphrase 7"
			admin.call("POST", "/api/admin/users", map[string]string{"email": "bob@example.com", "password": pw, "role": "user"}, nil)
			bob := p.signInAs("bob@example.com", pw)
			tok := markedSleep()
			bomb := runCommand(admin, "for i in $(seq 58); do sleep "+tok+" & done; sleep 6; echo bombed")
			waitForProcs(t, tok, 58)
			th := runCommand(bob, "ls -d . && /bin/echo fine from bob")
			if got := printed(t, taskResult(t, bob, th)); !strings.Contains(got, "fine from bob") {
				t.Errorf("bob's command beside the fork loop: %q", got)
			}
			if got := printed(t, taskResult(t, admin, bomb)); !strings.Contains(got, "bombed") {
				t.Errorf("the fork loop's command: %q", got)
			}
		})
	}
}

// waitForProcs waits until at least n processes have arg among their
// arguments, that is until the command has filled its limit.
func waitForProcs(t *testing.T, arg string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(pidsWithArg(t, arg)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of the command's processes ran; it did not fill its limit", len(pidsWithArg(t, arg)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
