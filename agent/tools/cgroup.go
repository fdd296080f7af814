package tools

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// pidsCgroup is where the bwrap sandbox caps a command's processes: a
// directory of the pids controller that the server may write, holding one
// child cgroup per command with its own pids.max. Unlike RLIMIT_NPROC it
// counts only the command's processes, and it holds for root too.
type pidsCgroup struct {
	// dir is this server's cgroup, herd-<pid> under the server's own.
	dir string
	v2  bool
}

// cgroupSeq numbers the commands' cgroups. It is shared by every
// pidsCgroup of the process, since they all name the same directory.
var cgroupSeq atomic.Uint64

func (c *pidsCgroup) String() string {
	version := "v1"
	if c.v2 {
		version = "v2"
	}
	return version + " " + c.dir
}

// findPidsCgroup returns the pids cgroup this server can use, or nil when
// the machine offers none: no pids controller, or not writable (a server
// without a delegated cgroup). It first clears the directories of earlier
// servers that are no longer running.
func findPidsCgroup() *pidsCgroup {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	for _, cand := range pidsCandidates(string(mounts), string(own)) {
		if c := claimPidsCgroup(cand.dir, cand.v2); c != nil {
			return c
		}
	}
	return nil
}

type cgroupCandidate struct {
	dir string
	v2  bool
}

// pidsCandidates lists the directories of the server's own cgroup in the
// hierarchies that may carry the pids controller: the v1 hierarchy of
// pids, then the v2 one (usable only if pids is delegated there).
func pidsCandidates(mountinfo, selfCgroup string) []cgroupCandidate {
	paths := map[string]string{} // "pids" or "" (v2) → the server's cgroup path
	for _, line := range strings.Split(selfCgroup, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			if ctrl == "pids" || ctrl == "" {
				paths[ctrl] = parts[2]
			}
		}
	}
	var v1, v2 []cgroupCandidate
	for _, line := range strings.Split(mountinfo, "\n") {
		// mountinfo: id parent major:minor root mountpoint options... - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, p := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(p) < 3 {
			continue
		}
		root, point := unescapeMount(f[3]), unescapeMount(f[4])
		switch {
		case p[0] == "cgroup" && hasOption(p[2], "pids"):
			if path, ok := paths["pids"]; ok {
				v1 = append(v1, cgroupCandidate{dir: cgroupDir(point, root, path)})
			}
		case p[0] == "cgroup2":
			if path, ok := paths[""]; ok {
				v2 = append(v2, cgroupCandidate{dir: cgroupDir(point, root, path), v2: true})
			}
		}
	}
	return append(v1, v2...)
}

func hasOption(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// cgroupDir is where the cgroup path of /proc/self/cgroup is found under
// a mount of its hierarchy whose root is root.
func cgroupDir(point, root, path string) string {
	rel := path
	if root != "/" {
		rel = strings.TrimPrefix(path, root)
	}
	return filepath.Join(point, rel)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// claimPidsCgroup makes this server's cgroup under parent and checks that
// a command's cgroup can be made in it with a pids limit.
func claimPidsCgroup(parent string, v2 bool) *pidsCgroup {
	if v2 && !enablePids(parent) && !leaveForLeaf(parent) {
		return nil
	}
	removeStaleCgroups(parent)
	c := &pidsCgroup{dir: filepath.Join(parent, fmt.Sprintf("herd-%d", os.Getpid())), v2: v2}
	if err := os.Mkdir(c.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil
	}
	if v2 && !enablePids(c.dir) {
		_ = os.Remove(c.dir)
		return nil
	}
	probe, err := c.create(1)
	if err != nil {
		_ = os.Remove(c.dir)
		return nil
	}
	_ = os.Remove(probe)
	return c
}

// enablePids makes the pids controller available to dir's children, as
// cgroup v2 requires; it fails where the controller is not delegated.
func enablePids(dir string) bool {
	ctrl := filepath.Join(dir, "cgroup.subtree_control")
	on, err := listsPids(ctrl)
	if err != nil {
		return false
	}
	return on || os.WriteFile(ctrl, []byte("+pids"), 0) == nil
}

// listsPids reports whether a controller list (cgroup.controllers or
// cgroup.subtree_control: names separated by spaces) names pids.
func listsPids(file string) (bool, error) {
	list, err := os.ReadFile(file)
	return err == nil && slices.Contains(strings.Fields(string(list)), "pids"), err
}

// serverLeaf is the cgroup v2 leaf the server moves itself into.
const serverLeaf = "herd-server"

// leaveForLeaf moves the server from parent into a leaf cgroup of its own
// and enables pids for parent's children. cgroup v2 allows controllers
// for a cgroup's children only while it holds no processes itself, so a
// delegated cgroup (systemd's Delegate=) must be emptied first. It does so
// only when the pids controller is available in parent and the server is
// the only process there, and undoes the move when enabling fails.
func leaveForLeaf(parent string) bool {
	if on, err := listsPids(filepath.Join(parent, "cgroup.controllers")); err != nil || !on {
		return false
	}
	procs, err := os.ReadFile(filepath.Join(parent, "cgroup.procs"))
	if err != nil || strings.TrimSpace(string(procs)) != strconv.Itoa(os.Getpid()) {
		return false
	}
	leaf := filepath.Join(parent, serverLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return false
	}
	self := []byte(strconv.Itoa(os.Getpid()))
	if os.WriteFile(filepath.Join(leaf, "cgroup.procs"), self, 0) != nil {
		_ = os.Remove(leaf)
		return false
	}
	if enablePids(parent) {
		return true
	}
	_ = os.WriteFile(filepath.Join(parent, "cgroup.procs"), self, 0)
	_ = os.Remove(leaf)
	return false
}

// removeStaleCgroups removes the cgroups of servers no longer running.
// Their commands died with them, so the directories are empty.
func removeStaleCgroups(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "herd-"))
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "herd-") || err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if subs, err := os.ReadDir(dir); err == nil {
			for _, s := range subs {
				if s.IsDir() {
					_ = os.Remove(filepath.Join(dir, s.Name()))
				}
			}
		}
		_ = os.Remove(dir)
	}
}

// create makes a command's cgroup allowing max processes and returns its
// directory; the command joins it by writing its pid to cgroup.procs.
func (c *pidsCgroup) create(max int) (string, error) {
	dir := filepath.Join(c.dir, fmt.Sprintf("cmd-%d", cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("pids cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(max)), 0); err != nil {
		_ = os.Remove(dir)
		return "", fmt.Errorf("pids cgroup: set pids.max: %w", err)
	}
	return dir, nil
}
