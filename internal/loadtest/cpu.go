package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuUse is where the machine's CPU went while the runs ran: it tells a
// saturated machine (latency is the cores) from one with room to spare
// (latency is queueing), whatever else shares the cores.
type cpuUse struct {
	wall    time.Duration
	cores   int
	busy    time.Duration // every process on the machine
	herds   time.Duration // the herd processes
	driver  time.Duration // this process: the clients
	pg      time.Duration // PostgreSQL's processes, when the herds share one on this machine
	sampled bool
}

// cpuMark is the counters at one moment.
type cpuMark struct {
	at          time.Time
	busy, herds time.Duration
	driver, pg  time.Duration
	cores       int
	ok          bool
}

// ticks is the kernel's clock tick for /proc (USER_HZ, 100 on Linux).
const ticks = 100

func markCPU(hs herds) cpuMark {
	m := cpuMark{at: time.Now()}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if f[0] == "cpu" {
			// user nice system idle iowait irq softirq steal
			for i, v := range f[1:] {
				n, _ := strconv.ParseInt(v, 10, 64)
				if i != 3 && i != 4 && i < 8 {
					m.busy += time.Duration(n) * time.Second / ticks
				}
			}
		} else if strings.HasPrefix(f[0], "cpu") {
			m.cores++
		}
	}
	for _, h := range hs {
		m.herds += h.cpuTime()
	}
	if len(hs) > 0 && hs[0].postmaster > 0 {
		m.pg = treeCPU(hs[0].postmaster)
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		m.driver = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	m.ok = true
	return m
}

// since is the use between an earlier mark and m.
func (m cpuMark) since(from cpuMark) cpuUse {
	if !m.ok || !from.ok {
		return cpuUse{}
	}
	return cpuUse{wall: m.at.Sub(from.at), cores: m.cores, busy: m.busy - from.busy, herds: m.herds - from.herds, driver: m.driver - from.driver, pg: m.pg - from.pg, sampled: true}
}

func (u cpuUse) print() {
	if !u.sampled || u.wall <= 0 {
		return
	}
	secs := u.wall.Seconds()
	fmt.Printf("CPU while the runs ran (%.1f s, %d cores): machine %.0f%% busy; herds %.1f s, PostgreSQL %.1f s, clients (this driver) %.1f s, other processes %.1f s\n",
		secs, u.cores, 100*u.busy.Seconds()/(secs*float64(u.cores)), u.herds.Seconds(), u.pg.Seconds(), u.driver.Seconds(), (u.busy - u.herds - u.pg - u.driver).Seconds())
}

// cpuTime is the CPU time the herd process has used, from /proc.
func (h *herd) cpuTime() time.Duration {
	st, _ := procStat(h.cmd.Process.Pid)
	return st.cpu
}

// treeCPU is the CPU time of PostgreSQL's postmaster pid and its
// backends: those running, and those that ended (the postmaster's
// children's time).
func treeCPU(pid int) time.Duration {
	st, ok := procStat(pid)
	if !ok {
		return 0
	}
	total := st.cpu + st.children
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if cst, ok := procStat(child); ok && cst.ppid == pid {
			total += cst.cpu
		}
	}
	return total
}

type stat struct {
	ppid          int
	cpu, children time.Duration
}

// procStat reads a process's parent and CPU times from /proc/PID/stat.
func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, false
	}
	// The fields after the command name, which is in parentheses: state,
	// ppid, …, utime (14th of the line), stime, cutime, cstime.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return stat{}, false
	}
	n := func(i int) int64 { v, _ := strconv.ParseInt(f[i], 10, 64); return v }
	tick := func(v int64) time.Duration { return time.Duration(v) * time.Second / ticks }
	return stat{ppid: int(n(1)), cpu: tick(n(11) + n(12)), children: tick(n(13) + n(14))}, true
}
