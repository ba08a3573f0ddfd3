package main

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/events"
)

// benchOptions are the flags of emitter bench.
type benchOptions struct {
	tenant, tool, args, toolsFile string
	calls, warmup, concurrency    int
	argBytes                      int
	duplicates                    float64
	seed                          uint64
	binary                        bool
	cpuProfile                    string
}

func newBenchCmd(g *globalOptions) *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench [--calls N] [--duplicates F] [--concurrency C] [--tool N] [--args TEMPLATE]",
		Short: "Load running executors with calls and report throughput, latency and a correctness check",
		Long: `Publish --calls tool calls to running executors, keeping --concurrency of them in flight
(published and not yet answered), and report calls per second, the latency from
publishing a call to receiving its answer (p50, p95, p99, max), the answers by kind, and
a correctness check.

A share --duplicates of the calls repeat the idempotency key of another call of the run
(their other arguments differ, as a retry's would); they are spread at random through
the run, so a few arrive while the first call of their key is still in flight and wait
for it, and most find its record. Every run has a new run id, so its keys are new.

The arguments come from --args, a JSON object with placeholders:
  {{key}}     the key number, shared by a call and its duplicates
  {{flight}}  a flight number made from the key number (BA117-like), for the demo tools
  {{call}}    the call number, different for every call
  {{pad}}     filler that brings the arguments to --arg-bytes bytes
The demo airline's tools (executor --demo) need no --args: book, lookup_fare and
update_profile have templates of their own. For another tool give --args, and
--tools-file with the executor's tools file so that bench knows the tool's kind and
key arguments.

The check: a tool that deduplicates (idempotent, effectful) must enter its body once
per distinct key and never twice for one key. bench counts bodies entered from the
answers — each completed answer, and each indeterminate answer saying body_entered,
is one entry; a deduplicated answer is none — and compares them with the distinct
keys, which it derives itself (emitter key's derivation) when it knows the tool's
declaration. It also checks that each answer carries the key derived for its call.
An executor's own count of bodies entered (dispatch.Stats) is the independent
cross-check; make bench compares the two.

A progress line is drawn while the run lasts when standard output is a terminal.
With --json the report is one JSON object on standard output.

Exit status: 0 when every call was answered and the check passed; 1 when not (the
report says why), or for any other failure; 2 for bad input.`,
		Example: `  emitter bench --calls 20000 --duplicates 0.2 --concurrency 64
  emitter bench --tool update_profile --concurrency 1 --calls 2000 --json
  emitter bench --tools-file tools.yaml --tool charge --args '{"order":"o{{key}}","note":"{{pad}}"}' --arg-bytes 1024`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, g, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.tenant, "tenant", "bench", "tenant of the calls")
	f.StringVar(&o.tool, "tool", "book", "tool to call")
	f.StringVar(&o.args, "args", "", "arguments template, a JSON object with placeholders (default: the demo tool's)")
	f.StringVar(&o.toolsFile, "tools-file", "", "the executors' tools file, to learn the tool's kind and key arguments")
	f.IntVar(&o.calls, "calls", 10000, "calls to make and measure")
	f.IntVar(&o.warmup, "warmup", 100, "calls made first, with keys of their own, and not measured")
	f.IntVar(&o.concurrency, "concurrency", 64, "calls in flight at once")
	f.IntVar(&o.argBytes, "arg-bytes", 0, "size of each call's arguments, filled up by the {{pad}} placeholder")
	f.Float64Var(&o.duplicates, "duplicates", 0.2, "share of calls that repeat another call's key, 0 to below 1")
	f.Uint64Var(&o.seed, "seed", 0, "seed of the order of keys (default: random)")
	f.BoolVar(&o.binary, "binary", false, "publish calls in CloudEvents binary mode")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) of this process during the measured run to `file`")
	return cmd
}

// benchInput checks the flags and returns the argument template and the tool's
// declaration (nil when unknown). Every error is bad input.
func benchInput(g *globalOptions, o *benchOptions) (*benchSpec, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	switch {
	case o.calls < 1:
		return nil, badInput(fmt.Errorf("--calls %d: must be at least 1", o.calls))
	case o.concurrency < 1:
		return nil, badInput(fmt.Errorf("--concurrency %d: must be at least 1", o.concurrency))
	case o.warmup < 0:
		return nil, badInput(fmt.Errorf("--warmup %d: must not be negative", o.warmup))
	case o.argBytes < 0:
		return nil, badInput(fmt.Errorf("--arg-bytes %d: must not be negative", o.argBytes))
	case !(o.duplicates >= 0 && o.duplicates < 1):
		return nil, badInput(fmt.Errorf("--duplicates %v: must be at least 0 and below 1", o.duplicates))
	}
	for _, f := range []struct{ name, v string }{{"--tenant", o.tenant}, {"--tool", o.tool}} {
		if !events.ValidToken(f.v) {
			return nil, badInput(fmt.Errorf("%s %q: must be 1 to 128 characters of A-Z a-z 0-9 _ -", f.name, f.v))
		}
	}
	decl, err := benchTool(o.tool, o.toolsFile)
	if err != nil {
		return nil, badInput(err)
	}
	src := o.args
	if src == "" {
		src = demoTemplates[o.tool]
		if src == "" {
			return nil, badInput(fmt.Errorf("--args is required for %s: bench has templates for the demo tools only (%s)", o.tool, benchToolNames()))
		}
	}
	tmpl, err := parseArgsTemplate(src, o.argBytes)
	if err != nil {
		return nil, badInput(err)
	}
	if tmpl.hasFlt && o.calls+o.warmup > maxFlightKeys {
		return nil, badInput(fmt.Errorf("{{flight}} makes at most %d distinct flights", maxFlightKeys))
	}
	// The first call's arguments stand for all: refuse what an executor would.
	first := tmpl.render(0, 0)
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(first, &obj); err != nil {
		return nil, badInput(fmt.Errorf("--args: the arguments %s are not a JSON object: %w", first, err))
	}
	if decl != nil {
		if err := decl.Validate(first); err != nil {
			return nil, badInput(fmt.Errorf("--args: the arguments %s do not suit %s: %w", first, o.tool, err))
		}
	}
	return &benchSpec{tenant: o.tenant, tool: o.tool, concurrency: o.concurrency, args: tmpl, decl: decl, timeout: g.timeout}, nil
}

func runBench(cmd *cobra.Command, g *globalOptions, o *benchOptions) error {
	spec, err := benchInput(g, o)
	if err != nil {
		return err
	}
	seed := o.seed
	if seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:])
	}
	var opts []toolexec.ClientOption
	if o.binary {
		opts = append(opts, toolexec.WithBinaryMode())
	}
	s, err := g.connect(cmd, opts...)
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	show := !g.json && isTerminal(out)

	if o.warmup > 0 {
		w := *spec
		w.runID = newID("warmup")
		w.plan, _ = planKeys(o.warmup, 0, seed)
		r := &benchRun{spec: w, client: s.client, nc: s.nc}
		var p *progress
		if show {
			p = startProgress(out, r, "warm-up")
		}
		_, err := r.run(ctx)
		if p != nil {
			p.Stop()
		}
		if err != nil {
			return fmt.Errorf("warm-up: %w", noStreamHint(err))
		}
		if rep := summarize(r, 0, 0); rep.Answered < rep.Calls {
			return fmt.Errorf("warm-up: %d of %d calls answered (%s): are executors running, serving %s?",
				rep.Answered, rep.Calls, rep.Check.Verdict, o.tool)
		}
	}

	spec.runID = newID("bench")
	var distinct int
	spec.plan, distinct = planKeys(o.calls, o.duplicates, seed)
	r := &benchRun{spec: *spec, client: s.client, nc: s.nc}
	var p *progress
	if show {
		p = startProgress(out, r, "bench")
	}
	stopProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	elapsed, runErr := r.run(ctx)
	if err := stopProfile(); err != nil && runErr == nil {
		runErr = err
	}
	if p != nil {
		p.Stop()
	}
	if runErr != nil && ctx.Err() == nil {
		return noStreamHint(runErr)
	}
	rep := summarize(r, elapsed, distinct)
	rep.Duplicates, rep.Warmup = o.duplicates, o.warmup
	if runErr != nil {
		rep.Interrupted = true
		rep.Check.OK, rep.Check.Verdict = verdict(rep)
	}
	if g.json {
		err = writeBenchJSON(out, rep)
	} else {
		err = writeBenchText(out, rep, describeTool(spec.decl))
	}
	if err != nil {
		return err
	}
	if !rep.Check.OK {
		return fmt.Errorf("%w: %s", errBenchCheck, rep.Check.Verdict)
	}
	return nil
}

// startCPUProfile writes a CPU profile to path until the returned function is
// called; with no path it does nothing.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		return nil
	}, nil
}

// benchToolNames lists the tools bench has argument templates for.
func benchToolNames() string {
	names := make([]string, 0, len(demoTemplates))
	for n := range demoTemplates {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
