package main

import (
	"bufio"
	"cmp"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// goBenchmark is one line of go test -bench output.
type goBenchmark struct {
	Pkg         string
	Name        string // without the -GOMAXPROCS suffix
	Iterations  int64
	NsPerOp     float64
	BytesPerOp  float64 // -1 when not reported
	AllocsPerOp float64 // -1 when not reported
	MBPerSec    float64 // 0 when not reported
	Runs        int     // how many runs the figures are the median of
}

func parseGoBenchFile(path string) ([]goBenchmark, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseGoBench(f)
}

// parseGoBench reads the output of go test -bench -benchmem.
func parseGoBench(r io.Reader) ([]goBenchmark, error) {
	var out []goBenchmark
	pkg := ""
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		iters, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		b := goBenchmark{Pkg: pkg, Name: trimProcs(f[0]), Iterations: iters, BytesPerOp: -1, AllocsPerOp: -1}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			switch f[i+1] {
			case "ns/op":
				b.NsPerOp = v
			case "B/op":
				b.BytesPerOp = v
			case "allocs/op":
				b.AllocsPerOp = v
			case "MB/s":
				b.MBPerSec = v
			}
		}
		out = append(out, b)
	}
	return medianRuns(out), sc.Err()
}

// medianRuns folds the runs of each benchmark (go test -count N prints one
// line per run) into its median run by ns/op, in the order the benchmarks
// first appeared; Runs says how many there were.
func medianRuns(bs []goBenchmark) []goBenchmark {
	type key struct{ pkg, name string }
	runs := map[key][]goBenchmark{}
	var order []key
	for _, b := range bs {
		k := key{b.Pkg, b.Name}
		if _, seen := runs[k]; !seen {
			order = append(order, k)
		}
		runs[k] = append(runs[k], b)
	}
	out := make([]goBenchmark, 0, len(order))
	for _, k := range order {
		rs := runs[k]
		slices.SortStableFunc(rs, func(a, b goBenchmark) int { return cmp.Compare(a.NsPerOp, b.NsPerOp) })
		m := rs[(len(rs)-1)/2]
		m.Runs = len(rs)
		out = append(out, m)
	}
	return out
}

// trimProcs drops the "-N" GOMAXPROCS suffix go test appends to names.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}

// findGoBench returns the benchmark of pkg (a suffix of its import path) and
// name.
func findGoBench(bs []goBenchmark, pkgSuffix, name string) (goBenchmark, bool) {
	for _, b := range bs {
		if strings.HasSuffix(b.Pkg, pkgSuffix) && b.Name == name {
			return b, true
		}
	}
	return goBenchmark{}, false
}
