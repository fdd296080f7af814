package tools

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Each bwrap command runs in cgroups of its own (docs/DESIGN.md §4), so
// its limits are totals over all its processes rather than per process,
// and one user's command cannot use up a limit another's counts against:
// pids (processes), memory (memory.max / memory.limit_in_bytes, swap
// included where the kernel counts it), cpu (a bandwidth of
// sandbox.limits.cpus) and the CPU time it used (cpu.stat or cpuacct),
// which the command's watch holds to sandbox.limits.cpu_seconds. On
// cgroup v2 one delegated subtree carries them all; on v1 each controller
// has its hierarchy. A controller the machine does not offer falls back
// to the per-process rlimit, which the start-up line says.

// The controllers the sandbox uses.
const (
	ctrlPids    = "pids"
	ctrlMemory  = "memory"
	ctrlCPU     = "cpu"
	ctrlCPUAcct = "cpuacct" // v1 only: v2 counts CPU time in every cgroup
)

var wantedControllers = []string{ctrlPids, ctrlMemory, ctrlCPU, ctrlCPUAcct}

// cpuPeriod is the period of the cpu bandwidth limit, as the kernel's default.
const cpuPeriod = 100 * time.Millisecond

// hierarchy is one cgroup hierarchy the server can use, with its own
// cgroup (herd-<pid>) in it, under which each command gets one.
type hierarchy struct {
	dir   string
	v2    bool
	ctrls []string // the wanted controllers it carries
}

// cgroups is where the commands' cgroups are made; nil when the machine
// offers no usable controller.
type cgroups struct {
	hier []hierarchy
}

// cgroupSeq numbers the commands' cgroups, shared by every cgroups of
// the process since they all name the same directories.
var cgroupSeq atomic.Uint64

func (c *cgroups) has(ctrl string) bool {
	if c == nil {
		return false
	}
	for _, h := range c.hier {
		if slices.Contains(h.ctrls, ctrl) || (h.v2 && ctrl == ctrlCPUAcct) {
			return true
		}
	}
	return false
}

func (c *cgroups) String() string {
	var parts []string
	for _, h := range c.hier {
		v := "v1"
		if h.v2 {
			v = "v2"
		}
		parts = append(parts, fmt.Sprintf("%s %s at %s", v, strings.Join(h.ctrls, ","), h.dir))
	}
	return strings.Join(parts, "; ")
}

// findCgroups returns the cgroups this server can use, or nil. It first
// clears the directories of earlier servers that are no longer running.
func findCgroups() *cgroups {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	c := &cgroups{}
	for _, cand := range cgroupCandidates(string(mounts), string(own)) {
		if h, ok := claimHierarchy(cand, c.covered()); ok {
			c.hier = append(c.hier, h)
		}
	}
	if len(c.hier) == 0 {
		return nil
	}
	return c
}

// covered lists the controllers already claimed, so a controller mounted
// in two places is used once.
func (c *cgroups) covered() []string {
	var ctrls []string
	for _, h := range c.hier {
		ctrls = append(ctrls, h.ctrls...)
	}
	return ctrls
}

// cgroupCandidates lists the server's own cgroup in each hierarchy that
// may carry a wanted controller: every v1 hierarchy with one (the server's
// cgroup there is in /proc/self/cgroup), then v2, whose controllers are
// those its cgroup.controllers lists.
func cgroupCandidates(mountinfo, selfCgroup string) []hierarchy {
	paths := map[string]string{} // controller ("" for v2) → the server's cgroup path
	for _, line := range strings.Split(selfCgroup, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			paths[ctrl] = parts[2]
		}
	}
	var v1, v2 []hierarchy
	seen := map[string]bool{}
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
		switch p[0] {
		case "cgroup":
			var ctrls []string
			var path string
			for _, ctrl := range wantedControllers {
				if hasOption(p[2], ctrl) {
					if own, ok := paths[ctrl]; ok {
						ctrls, path = append(ctrls, ctrl), own
					}
				}
			}
			dir := cgroupDir(point, root, path)
			if len(ctrls) > 0 && !seen[dir] {
				seen[dir] = true
				v1 = append(v1, hierarchy{dir: dir, ctrls: ctrls})
			}
		case "cgroup2":
			if own, ok := paths[""]; ok {
				v2 = append(v2, hierarchy{dir: cgroupDir(point, root, own), v2: true})
			}
		}
	}
	return append(v1, v2...)
}

func hasOption(opts, want string) bool {
	return slices.Contains(strings.Split(opts, ","), want)
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

// claimHierarchy makes this server's cgroup in cand (leaving out the
// controllers another hierarchy already gave) and checks that a command's
// cgroup can be made in it with its limits.
func claimHierarchy(cand hierarchy, covered []string) (hierarchy, bool) {
	parent := cand.dir
	if cand.v2 {
		cand.ctrls = v2Controllers(parent, covered)
	} else {
		cand.ctrls = slices.DeleteFunc(cand.ctrls, func(c string) bool { return slices.Contains(covered, c) })
	}
	if len(cand.ctrls) == 0 {
		return hierarchy{}, false
	}
	if cand.v2 && !enableControllers(parent, cand.ctrls) && !leaveForLeaf(parent, cand.ctrls) {
		return hierarchy{}, false
	}
	removeStaleCgroups(parent)
	h := hierarchy{dir: filepath.Join(parent, fmt.Sprintf("herd-%d", os.Getpid())), v2: cand.v2, ctrls: cand.ctrls}
	if err := os.Mkdir(h.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return hierarchy{}, false
	}
	if h.v2 && !enableControllers(h.dir, h.ctrls) {
		_ = os.Remove(h.dir)
		return hierarchy{}, false
	}
	probe := filepath.Join(h.dir, "probe")
	err := makeCommandDir(h, probe, probeLimits)
	_ = os.Remove(probe)
	if err != nil {
		_ = os.Remove(h.dir)
		return hierarchy{}, false
	}
	return h, true
}

// probeLimits are set on the probe cgroup: any values will do.
var probeLimits = SandboxLimits{Processes: 8, MemoryMB: 64, CPUs: 1}

// v2Controllers lists the wanted controllers that dir's cgroup.controllers
// offers, leaving out those covered elsewhere.
func v2Controllers(dir string, covered []string) []string {
	list, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil
	}
	var ctrls []string
	for _, c := range strings.Fields(string(list)) {
		if slices.Contains(wantedControllers, c) && !slices.Contains(covered, c) {
			ctrls = append(ctrls, c)
		}
	}
	return ctrls
}

// enableControllers makes ctrls available to dir's children, as cgroup
// v2 requires; it fails where they are not delegated.
func enableControllers(dir string, ctrls []string) bool {
	file := filepath.Join(dir, "cgroup.subtree_control")
	on, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	var add []string
	for _, c := range ctrls {
		if !slices.Contains(strings.Fields(string(on)), c) {
			add = append(add, "+"+c)
		}
	}
	return len(add) == 0 || os.WriteFile(file, []byte(strings.Join(add, " ")), 0) == nil
}

// serverLeaf is the cgroup v2 leaf the server moves itself into.
const serverLeaf = "herd-server"

// leaveForLeaf moves the server from parent into a leaf cgroup of its own
// and enables ctrls for parent's children. cgroup v2 allows controllers
// for a cgroup's children only while it holds no processes itself, so a
// delegated cgroup (systemd's Delegate=) must be emptied first. It does so
// only when the server is the only process there, and undoes the move
// when enabling fails.
func leaveForLeaf(parent string, ctrls []string) bool {
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
	if enableControllers(parent, ctrls) {
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

// commandCgroup is one command's cgroups, one per hierarchy.
type commandCgroup struct {
	dirs []string
	// cpuStat and oomFile are where its CPU time and its OOM kills are
	// read; "" where no cgroup counts them.
	cpuStat, cpuStatKey string
	oomFile             string
}

// create makes a command's cgroups with limits l. The command joins them
// by writing its pid to each of procs().
func (c *cgroups) create(l SandboxLimits) (*commandCgroup, error) {
	cg := &commandCgroup{}
	name := fmt.Sprintf("cmd-%d", cgroupSeq.Add(1))
	for _, h := range c.hier {
		dir := filepath.Join(h.dir, name)
		if err := makeCommandDir(h, dir, l); err != nil {
			cg.remove()
			return nil, err
		}
		cg.dirs = append(cg.dirs, dir)
		switch {
		case h.v2:
			cg.cpuStat, cg.cpuStatKey = filepath.Join(dir, "cpu.stat"), "usage_usec"
			if slices.Contains(h.ctrls, ctrlMemory) {
				cg.oomFile = filepath.Join(dir, "memory.events")
			}
		default:
			if slices.Contains(h.ctrls, ctrlCPUAcct) {
				cg.cpuStat = filepath.Join(dir, "cpuacct.usage")
			}
			if slices.Contains(h.ctrls, ctrlMemory) {
				cg.oomFile = filepath.Join(dir, "memory.oom_control")
			}
		}
	}
	return cg, nil
}

// makeCommandDir makes dir in hierarchy h and sets the limits of the
// controllers h carries.
func makeCommandDir(h hierarchy, dir string, l SandboxLimits) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	for _, s := range cgroupSettings(h, l) {
		file := filepath.Join(dir, s.file)
		if s.optional {
			if _, err := os.Stat(file); err != nil {
				continue
			}
		}
		if err := os.WriteFile(file, []byte(s.value), 0); err != nil {
			_ = os.Remove(dir)
			return fmt.Errorf("cgroup: set %s: %w", s.file, err)
		}
	}
	return nil
}

type cgroupSetting struct {
	file, value string
	// optional: absent where the kernel does not count it (swap).
	optional bool
}

// cgroupSettings are the files that carry l in hierarchy h, in the order
// they must be written (v1's memory limit before the memory+swap one).
func cgroupSettings(h hierarchy, l SandboxLimits) []cgroupSetting {
	mem := strconv.Itoa(l.MemoryMB * mib)
	period := int(cpuPeriod / time.Microsecond)
	quota := strconv.Itoa(max(1000, int(l.CPUs*float64(period))))
	var s []cgroupSetting
	for _, ctrl := range h.ctrls {
		switch {
		case ctrl == ctrlPids:
			s = append(s, cgroupSetting{file: "pids.max", value: strconv.Itoa(l.Processes)})
		case ctrl == ctrlMemory && h.v2:
			s = append(s, cgroupSetting{file: "memory.max", value: mem},
				cgroupSetting{file: "memory.swap.max", value: "0", optional: true},
				cgroupSetting{file: "memory.oom.group", value: "1", optional: true})
		case ctrl == ctrlMemory:
			s = append(s, cgroupSetting{file: "memory.limit_in_bytes", value: mem},
				cgroupSetting{file: "memory.memsw.limit_in_bytes", value: mem, optional: true})
		case ctrl == ctrlCPU && h.v2:
			s = append(s, cgroupSetting{file: "cpu.max", value: quota + " " + strconv.Itoa(period)})
		case ctrl == ctrlCPU:
			s = append(s, cgroupSetting{file: "cpu.cfs_period_us", value: strconv.Itoa(period)},
				cgroupSetting{file: "cpu.cfs_quota_us", value: quota})
		}
	}
	return s
}

// procs are the files a command writes its pid to, to join its cgroups.
func (cg *commandCgroup) procs() []string {
	files := make([]string, len(cg.dirs))
	for i, d := range cg.dirs {
		files[i] = filepath.Join(d, "cgroup.procs")
	}
	return files
}

// cpuTime is the CPU time the command's processes have used, and whether
// a cgroup counts it.
func (cg *commandCgroup) cpuTime() (time.Duration, bool) {
	if cg == nil || cg.cpuStat == "" {
		return 0, false
	}
	data, err := os.ReadFile(cg.cpuStat)
	if err != nil {
		return 0, false
	}
	if cg.cpuStatKey == "" { // cpuacct.usage: nanoseconds
		ns, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		return time.Duration(ns), err == nil
	}
	usec, ok := statValue(data, cg.cpuStatKey)
	return time.Duration(usec) * time.Microsecond, ok
}

// oomKills is how many of the command's processes the kernel killed for
// going over its memory limit.
func (cg *commandCgroup) oomKills() int64 {
	if cg == nil || cg.oomFile == "" {
		return 0
	}
	data, err := os.ReadFile(cg.oomFile)
	if err != nil {
		return 0
	}
	n, _ := statValue(data, "oom_kill")
	return n
}

// statValue reads "key value" from a flat-keyed cgroup file.
func statValue(data []byte, key string) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// remove removes the command's cgroups once its processes are gone.
func (cg *commandCgroup) remove() {
	if cg == nil {
		return
	}
	for _, d := range cg.dirs {
		_ = os.Remove(d)
	}
}
