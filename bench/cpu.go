package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuSample is the CPU time (user and system) used so far on the machine's
// side of one row: this process (the harness, with the embedded NATS server and
// the in-process executor or loop), its children that have been waited for
// (emitter bench), and the database servers the row talks to.
type cpuSample struct {
	harness time.Duration // this process and its waited-for children
	self    time.Duration // this process alone: the NATS server and the executor or loop
	servers time.Duration // PostgreSQL and Redis server processes
}

// serverProcesses are the command names whose CPU counts as the database
// servers'.
var serverProcesses = map[string]bool{"postgres": true, "redis-server": true}

// takeCPU samples the CPU used so far.
func takeCPU() cpuSample {
	self := rusage(syscall.RUSAGE_SELF)
	return cpuSample{harness: self + rusage(syscall.RUSAGE_CHILDREN), self: self, servers: serversCPU()}
}

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTick is the unit of /proc/<pid>/stat's times: USER_HZ, 100 on every
// Linux this runs on.
const clockTick = 10 * time.Millisecond

// serversCPU sums the CPU time of the PostgreSQL and Redis server processes
// visible in /proc, their reaped children included. A backend that exits
// between two samples loses its time unless its parent reaped it in between,
// which the postmaster does.
func serversCPU() time.Duration {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var total time.Duration
	for _, p := range stats {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		name, ticks, ok := parseProcStat(string(data))
		if ok && serverProcesses[name] {
			total += time.Duration(ticks) * clockTick
		}
	}
	return total
}

// parseProcStat returns the command name of a /proc/<pid>/stat line and the
// sum of its utime, stime, cutime and cstime fields (14 to 17), in clock
// ticks.
func parseProcStat(s string) (name string, ticks int64, ok bool) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	name = s[open+1 : end]
	// After the name come field 3 (state) onwards.
	fields := strings.Fields(s[end+1:])
	if len(fields) < 15 {
		return "", 0, false
	}
	for _, f := range fields[11:15] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return "", 0, false
		}
		ticks += n
	}
	return name, ticks, true
}

// cpu sets r's CPU per operation from the samples taken before and after its
// measured part. Call it after rate.
func (r *Result) cpu(before, after cpuSample) {
	if r.Ops <= 0 {
		return
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(r.Ops) }
	r.CPUPerOp = per(after.harness - before.harness)
	r.SelfCPUPerOp = per(after.self - before.self)
	if r.dbServer {
		r.ServerCPUPerOp = per(after.servers - before.servers)
	}
}

// cpuCell shows a row's CPU per operation: the harness's and emitter's, plus
// the database server's where it used any; "—" where not measured.
func cpuCell(r Result) string {
	if r.CPUPerOp <= 0 {
		return "—"
	}
	s := strconv.FormatFloat(r.CPUPerOp, 'f', 0, 64)
	if r.ServerCPUPerOp > 0 {
		s += " + " + strconv.FormatFloat(r.ServerCPUPerOp, 'f', 0, 64) + " db"
	}
	return s
}
