// Command temporal is the Temporal row of make bench: a Temporal server
// embedded in this process (SQLite file persistence), a Go worker running
// one no-op activity per workflow, and 64 callers each starting a workflow
// whose id is the call's idempotency key and waiting for its answer.
//
// It is a module of its own so that Temporal's dependency tree stays out of
// toolexec's and the bench module's. The bench program builds and runs it: the
// key plan (warm-up and measured run, as key numbers) comes as JSON on stdin,
// and it prints the row as one JSON object on stdout, in the bench's Result
// fields.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// plan is the calls to make, as key numbers: the warm-up's, then the
// measured run's (where a repeated number is a duplicate call).
type plan struct {
	Warmup []int `json:"warmup"`
	Run    []int `json:"run"`
}

func main() {
	var c rowConfig
	flag.StringVar(&c.id, "id", "temporal", "row id")
	flag.StringVar(&c.dir, "dir", "", "directory for the SQLite file (default: a new temporary one)")
	flag.IntVar(&c.concurrency, "concurrency", 64, "calls in flight")
	flag.Float64Var(&c.duplicates, "duplicates", 0.2, "share of duplicate calls (reported only: the plan carries them)")
	flag.IntVar(&c.shards, "shards", 4, "history shards")
	flag.IntVar(&c.partitions, "partitions", 1, "task queue read and write partitions (matching)")
	flag.IntVar(&c.wfPollers, "workflow-pollers", 8, "worker's workflow task pollers")
	flag.IntVar(&c.actPollers, "activity-pollers", 8, "worker's activity task pollers")
	flag.IntVar(&c.execSize, "exec-size", 256, "worker's MaxConcurrentWorkflowTaskExecutionSize and MaxConcurrentActivityExecutionSize")
	flag.BoolVar(&c.eager, "eager", true, "eager workflow start and eager activity dispatch (server and client)")
	flag.StringVar(&c.synchronous, "synchronous", "NORMAL", "SQLite synchronous pragma: NORMAL (WAL, fsync at checkpoints) or FULL (fsync every commit)")
	flag.IntVar(&c.sqlConns, "sql-conns", 1, "SQLite connections (more than 1 only in WAL mode)")
	flag.StringVar(&c.pgURL, "postgres", "", "persist to PostgreSQL at this URL (databases "+pgExecutionsDB+" and "+pgVisibilityDB+", dropped first) instead of SQLite")
	flag.BoolVar(&c.separateVisibility, "separate-visibility", true, "visibility records in a second SQLite file (a connection of their own)")
	flag.IntVar(&c.rps, "rps", 0, "frontend, history and matching request limits per second (0: Temporal's defaults)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured run to this file")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var p plan
	if err := json.NewDecoder(os.Stdin).Decode(&p); err != nil {
		fmt.Fprintln(os.Stderr, "temporal: reading the plan from stdin:", err)
		os.Exit(1)
	}
	r := runRow(ctx, c, p)
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, "temporal:", err)
		os.Exit(1)
	}
}
