package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// temporalModule is the directory, relative to the bench module, of the
// Temporal row's program: a module of its own, so that Temporal's dependency
// tree (Kubernetes client packages among them) stays out of this module's
// and toolexec's.
const temporalModule = "temporal"

// temporalPlan is the key plan handed to the Temporal program on stdin.
type temporalPlan struct {
	Warmup []int `json:"warmup"`
	Run    []int `json:"run"`
}

// runTemporal measures Temporal as a peer: its program (built once into
// -work) embeds a Temporal server on a SQLite file, a worker and 64 callers,
// runs the warm-up and the measured calls of the same plan shape as River's
// row, and prints the row as JSON.
func (h *harness) runTemporal(ctx context.Context, id string) Result {
	n, conc := h.cfg.temporalCalls, h.cfg.concurrency
	r := Result{ID: id, Group: groupPeer, Name: "Temporal workflows (id = key, reject duplicate), one activity", Concurrency: conc, Duplicates: h.cfg.duplicates}
	bin, err := h.buildTemporal(ctx)
	if err != nil {
		return failed(r, err)
	}
	seed := uint64(time.Now().UnixNano())
	warm, _ := planKeys(h.cfg.warmup, 0, seed)
	run, _ := planKeys(n, h.cfg.duplicates, seed+1)
	plan, err := json.Marshal(temporalPlan{Warmup: warm, Run: run})
	if err != nil {
		return failed(r, err)
	}
	dir := h.storeDir(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return failed(r, err)
	}
	args := []string{"-id", id, "-dir", dir, "-concurrency", strconv.Itoa(conc), "-duplicates", strconv.FormatFloat(h.cfg.duplicates, 'f', -1, 64)}
	if slices.Contains(strings.Split(h.cfg.profile, ","), id) {
		path := h.profilePath(id)
		args = append(args, "-cpuprofile", path)
		h.profiles = append(h.profiles, profileRun{id: id, path: path})
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(plan), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return failed(r, fmt.Errorf("%s: %w: %s", filepath.Base(bin), err, lastLines(stderr.String(), 5)))
	}
	return decodeTemporalRow(r, stdout.Bytes())
}

// decodeTemporalRow fills r with the row the Temporal program printed,
// keeping r's group.
func decodeTemporalRow(r Result, out []byte) Result {
	group := r.Group
	if err := json.Unmarshal(out, &r); err != nil {
		return failed(r, fmt.Errorf("reading the Temporal program's row: %w", err))
	}
	r.Group = group
	return r
}

// buildTemporal builds the Temporal program into -work, once a run (the
// first build of its dependencies takes minutes; later ones are cached).
func (h *harness) buildTemporal(ctx context.Context) (string, error) {
	if h.temporalBin != "" {
		return h.temporalBin, nil
	}
	bin, err := filepath.Abs(filepath.Join(h.cfg.work, "temporal-bench"))
	if err != nil {
		return "", err
	}
	fmt.Fprintln(os.Stderr, "    building the Temporal program (minutes the first time) ...")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = temporalModule
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w: %s", temporalModule, err, lastLines(string(out), 10))
	}
	h.temporalBin = bin
	return bin, nil
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
