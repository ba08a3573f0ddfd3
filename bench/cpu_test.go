package main

import (
	"os"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	line := "1234 (redis-server) S 1 1234 1234 0 -1 4194560 500 0 0 0 150 70 3 2 20 0 5 0 100 1000 200 18446744073709551615"
	name, ticks, ok := parseProcStat(line)
	if !ok || name != "redis-server" || ticks != 150+70+3+2 {
		t.Fatalf("got %q %d %v, want redis-server 225 true", name, ticks, ok)
	}
	// A command name may hold spaces and parentheses; the last ')' ends it.
	name, ticks, ok = parseProcStat("9 (a (b) c) R 1 1 1 0 -1 0 0 0 0 0 7 1 0 0 20 0 1 0 1 1 1")
	if !ok || name != "a (b) c" || ticks != 8 {
		t.Fatalf("got %q %d %v, want \"a (b) c\" 8 true", name, ticks, ok)
	}
	for _, bad := range []string{"", "12 postgres S 1", "12 (postgres) S 1 2 3", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 u 1 0 0"} {
		if _, _, ok := parseProcStat(bad); ok {
			t.Errorf("parseProcStat(%q) accepted a malformed line", bad)
		}
	}
}

func TestOwnStatParses(t *testing.T) {
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip("no /proc on this system")
	}
	if _, _, ok := parseProcStat(string(data)); !ok {
		t.Fatalf("this process's own stat line did not parse: %q", data)
	}
}

func TestResultCPU(t *testing.T) {
	r := Result{Ops: 1000, dbServer: true}
	r.cpu(cpuSample{harness: time.Second, servers: 2 * time.Second},
		cpuSample{harness: 1250 * time.Millisecond, servers: 2100 * time.Millisecond})
	if r.CPUPerOp != 250 || r.ServerCPUPerOp != 100 {
		t.Fatalf("CPU per op %v + %v, want 250 + 100", r.CPUPerOp, r.ServerCPUPerOp)
	}
	if got := cpuCell(r); got != "250 + 100 db" {
		t.Fatalf("cpuCell = %q", got)
	}
	r.ServerCPUPerOp = 0
	if got := cpuCell(r); got != "250" {
		t.Fatalf("cpuCell = %q", got)
	}
	if got := cpuCell(Result{}); got != "—" {
		t.Fatalf("cpuCell of an unmeasured row = %q", got)
	}
	// A row without a database does not count the servers' background work.
	nats := Result{Ops: 1000}
	nats.cpu(cpuSample{servers: time.Second}, cpuSample{harness: time.Second, servers: 2 * time.Second})
	if got := cpuCell(nats); got != "1000" {
		t.Fatalf("cpuCell of a row without a database = %q, want 1000", got)
	}
}
