package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// profileRun is a CPU profile written during one configuration: of this
// process (the executor and its NATS server), or of emitter bench (client).
type profileRun struct {
	id, path string
	client   bool
}

// profileSummary is what the report shows of a profile.
type profileSummary struct {
	ID       string
	Client   bool // emitter bench's profile
	Path     string
	Header   string        // pprof's duration and sample total
	Total    float64       // seconds of samples
	Flat     []profileLine // the top functions by own time
	Areas    []profileArea // own time summed by area
	Entry    []profileLine // toolexec and nats-server functions by cumulative time
	Duration float64
}

// profileLine is one function of pprof -top.
type profileLine struct {
	Func           string
	Flat, Cum      float64 // seconds
	FlatPC, CumPC  float64 // percent of all samples
	FlatSum, CumSm float64
}

// profileArea sums the own time of the functions of one area.
type profileArea struct {
	Name    string
	Seconds float64
	Percent float64
}

// summarizeProfile reads a profile with go tool pprof.
func summarizeProfile(ctx context.Context, p profileRun) (profileSummary, error) {
	s := profileSummary{ID: p.id, Path: p.path, Client: p.client}
	flat, header, err := pprofTop(ctx, p.path, false)
	if err != nil {
		return s, err
	}
	cum, _, err := pprofTop(ctx, p.path, true)
	if err != nil {
		return s, err
	}
	s.Header = header
	for _, l := range flat {
		s.Total += l.Flat
	}
	s.Flat = flat[:min(len(flat), 20)]
	byArea := map[string]float64{}
	for _, l := range flat {
		byArea[area(l.Func)] += l.Flat
	}
	for name, sec := range byArea {
		s.Areas = append(s.Areas, profileArea{Name: name, Seconds: sec, Percent: 100 * sec / max(s.Total, 1e-9)})
	}
	slices.SortFunc(s.Areas, func(a, b profileArea) int { return int((b.Seconds - a.Seconds) * 1e6) })
	ours, server := 0, 0
	for _, l := range cum {
		switch {
		case strings.HasPrefix(l.Func, "github.com/tesserix/toolexec/") && ours < 18:
			ours++
			s.Entry = append(s.Entry, l)
		case strings.HasPrefix(l.Func, "github.com/nats-io/nats-server/") && server < 8:
			server++
			s.Entry = append(s.Entry, l)
		case l.Func == "runtime.gcBgMarkWorker" || l.Func == "runtime.mallocgc":
			s.Entry = append(s.Entry, l)
		}
	}
	return s, nil
}

// pprofTop runs go tool pprof -top (sorted by cumulative time with cum) over
// every function of the profile.
func pprofTop(ctx context.Context, path string, cum bool) ([]profileLine, string, error) {
	args := []string{"tool", "pprof", "-top", "-nodecount=100000", "-nodefraction=0", "-edgefraction=0"}
	if cum {
		args = append(args, "-cum")
	}
	args = append(args, path)
	out, err := exec.CommandContext(ctx, "go", args...).Output()
	if err != nil {
		return nil, "", fmt.Errorf("go tool pprof: %w", err)
	}
	return parsePprofTop(string(out))
}

// parsePprofTop reads the text of go tool pprof -top.
func parsePprofTop(text string) ([]profileLine, string, error) {
	var lines []profileLine
	header := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		t := sc.Text()
		if strings.HasPrefix(t, "Duration:") {
			header = strings.TrimSpace(t)
			continue
		}
		f := strings.Fields(t)
		if len(f) < 6 {
			continue
		}
		flat, ok1 := seconds(f[0])
		flatPC, ok2 := percent(f[1])
		sum, ok3 := percent(f[2])
		c, ok4 := seconds(f[3])
		cumPC, ok5 := percent(f[4])
		if !(ok1 && ok2 && ok3 && ok4 && ok5) {
			continue
		}
		lines = append(lines, profileLine{Func: shortenGeneric(strings.Join(f[5:], " ")), Flat: flat, FlatPC: flatPC, FlatSum: sum, Cum: c, CumPC: cumPC})
	}
	return lines, header, sc.Err()
}

// seconds parses a pprof duration: "1.25s", "350ms", "0".
func seconds(s string) (float64, bool) {
	unit := 1.0
	switch {
	case strings.HasSuffix(s, "mins"):
		unit, s = 60, strings.TrimSuffix(s, "mins")
	case strings.HasSuffix(s, "hrs"):
		unit, s = 3600, strings.TrimSuffix(s, "hrs")
	case strings.HasSuffix(s, "ms"):
		unit, s = 1e-3, strings.TrimSuffix(s, "ms")
	case strings.HasSuffix(s, "us"):
		unit, s = 1e-6, strings.TrimSuffix(s, "us")
	case strings.HasSuffix(s, "µs"):
		unit, s = 1e-6, strings.TrimSuffix(s, "µs")
	case strings.HasSuffix(s, "ns"):
		unit, s = 1e-9, strings.TrimSuffix(s, "ns")
	case strings.HasSuffix(s, "s"):
		s = strings.TrimSuffix(s, "s")
	}
	v, err := strconv.ParseFloat(s, 64)
	return v * unit, err == nil
}

func percent(s string) (float64, bool) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	return v, err == nil && strings.HasSuffix(s, "%")
}

// area sorts a function into the part of the process it belongs to.
func area(fn string) string {
	fn = strings.TrimSuffix(fn, " (inline)")
	switch {
	case strings.HasPrefix(fn, "github.com/nats-io/nats-server/"):
		return "nats-server (embedded)"
	case strings.HasPrefix(fn, "github.com/nats-io/nats.go"), strings.HasPrefix(fn, "github.com/nats-io/nats%2ego"):
		return "nats.go client"
	case strings.HasPrefix(fn, "github.com/tesserix/toolexec/"):
		return "toolexec"
	case strings.HasPrefix(fn, "github.com/cloudevents/"):
		return "CloudEvents sdk-go"
	case strings.HasPrefix(fn, "github.com/santhosh-tekuri/jsonschema"):
		return "JSON Schema validation"
	case strings.HasPrefix(fn, "encoding/json"):
		return "encoding/json"
	case strings.HasPrefix(fn, "github.com/jackc/"), strings.HasPrefix(fn, "github.com/redis/"):
		return "store clients"
	case strings.HasPrefix(fn, "crypto/"), strings.HasPrefix(fn, "github.com/minio/highwayhash"):
		return "crypto and hashing"
	case strings.HasPrefix(fn, "syscall."), strings.HasPrefix(fn, "internal/runtime/syscall"),
		strings.HasPrefix(fn, "runtime/internal/syscall"), strings.HasPrefix(fn, "internal/poll."):
		return "system calls (network, disk, fsync)"
	case strings.HasPrefix(fn, "runtime."), strings.HasPrefix(fn, "internal/runtime/"), !strings.Contains(fn, "."):
		return runtimeArea(fn)
	case isStdlib(fn):
		return "Go standard library (time, context, sync, strings, …)"
	}
	return "other"
}

// isStdlib reports whether fn belongs to a package of the standard library:
// one whose import path does not start with a domain name.
func isStdlib(fn string) bool {
	slash := strings.LastIndexByte(fn, '/')
	dot := strings.IndexByte(fn[slash+1:], '.')
	if dot < 0 {
		return false
	}
	pkg := fn[:slash+1+dot]
	first, _, _ := strings.Cut(pkg, "/")
	return !strings.Contains(first, ".")
}

// runtimeArea tells the garbage collector and the allocator apart from the
// scheduler in runtime functions.
func runtimeArea(fn string) string {
	if strings.Contains(fn, "memmove") || strings.Contains(fn, "memclr") {
		return "Go runtime: copying and zeroing memory"
	}
	if strings.HasPrefix(fn, "internal/runtime/gc") {
		return "Go runtime: allocation and GC"
	}
	for _, k := range []string{"internal/runtime/maps", "runtime.map", "aeshash", "memeqbody", "typehash", "ifaceeq", "efaceeq", "strhash", "memhash"} {
		if strings.Contains(fn, k) {
			return "Go runtime: maps and hashing"
		}
	}
	for _, k := range []string{"unwinder", "runtime.step", "getStackMap", "readvarint", "adjustframe", "copystack", "morestack",
		"newstack", "pcvalue", "funcInfo", "findfunc", "Callers", "gentraceback", "adjustpointers"} {
		if strings.Contains(fn, k) {
			return "Go runtime: stack growth and unwinding"
		}
	}
	for _, k := range []string{"gc", "malloc", "scanobject", "greyobject", "mark", "sweep", "mspan", "mheap", "mcache",
		"heap", "wbBuf", "Barrier", "findObject", "newobject", "makeslice", "growslice", "spanOf", "pageAlloc",
		"scanblock", "scanstack", "nextFreeFast", "mallocgc", "scan", "span", "Span", "sizeclass", "bgsweep", "madvise"} {
		if strings.Contains(fn, k) {
			return "Go runtime: allocation and GC"
		}
	}
	for _, k := range []string{"futex", "schedule", "findRunnable", "stealWork", "netpoll", "park", "mcall", "usleep",
		"runqgrab", "notesleep", "notewakeup", "ready", "goready", "wakep", "startm", "stopm", "lock", "unlock", "semacquire",
		"semrelease", "selectgo", "chansend", "chanrecv", "gopark", "casgstatus", "procyield", "osyield", "nanotime", "execute"} {
		if strings.Contains(fn, k) {
			return "Go runtime: scheduling, channels, locks"
		}
	}
	return "Go runtime: other"
}

// shortenGeneric replaces the type arguments of a generic function's name
// (go.shape.…, often a whole struct) with "[…]".
func shortenGeneric(fn string) string {
	var b strings.Builder
	depth := 0
	for _, r := range fn {
		switch {
		case r == '[':
			if depth == 0 {
				b.WriteString("[…]")
			}
			depth++
		case r == ']' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}
