package api_test

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/internal/buildinfo"
	"github.com/tesserix/toolexec/internal/testkit/keyvectors"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

const modulePath = buildinfo.ModulePath

// apidiffFix says how to get apidiff.
const apidiffFix = "make api-check builds it (scripts/tools.sh apidiff, into ~/.cache/toolexec/tools) and runs this test; " +
	".ci/run builds it with the other tools; or name it in TOOLEXEC_APIDIFF"

// apidiffPath returns the apidiff to run: TOOLEXEC_APIDIFF, else the one
// scripts/tools.sh builds at the version it pins, else apidiff on PATH.
// Without one the test skips, but under CI=true it fails.
func apidiffPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TOOLEXEC_APIDIFF"); p != "" {
		return p
	}
	script, err := os.ReadFile(filepath.Join(root, "scripts", "tools.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^APIDIFF_VERSION=(\S+)`).FindSubmatch(script)
	if m == nil {
		t.Fatal("scripts/tools.sh pins no APIDIFF_VERSION")
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	built := filepath.Join(cache, "toolexec", "tools", "apidiff-"+string(m[1]), "apidiff")
	if _, err := os.Stat(built); err == nil {
		return built
	}
	if p, err := exec.LookPath("apidiff"); err == nil {
		return p
	}
	if testenv.InCI() {
		t.Fatalf("apidiff is not installed (CI=true): %s", apidiffFix)
	}
	t.Skipf("apidiff is not installed: %s", apidiffFix)
	return ""
}

// runAPIDiff runs apidiff in the module at dir and returns its standard
// output.
func runAPIDiff(t *testing.T, apidiff, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(apidiff, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("apidiff %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, quiet(stderr.String()))
	}
	return stdout.String()
}

// quiet drops apidiff's line for each internal package it leaves out.
func quiet(stderr string) string {
	var keep []string
	for _, l := range strings.Split(stderr, "\n") {
		if l != "" && !strings.HasPrefix(l, "Ignoring internal package ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// publicPackages returns the module-relative paths ("" for the root) of the
// packages of the module at dir whose API users may import: not main
// packages, and none under internal/ or tests/.
func publicPackages(t *testing.T, dir string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Name}}", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./... (in %s): %v", dir, err)
	}
	var pkgs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, name, _ := strings.Cut(line, " ")
		rel := strings.TrimPrefix(strings.TrimPrefix(path, modulePath), "/")
		top, _, _ := strings.Cut(rel, "/")
		if name == "main" || top == "tests" || top == "internal" || strings.Contains(rel, "/internal") {
			continue
		}
		pkgs = append(pkgs, rel)
	}
	return pkgs
}

// writeGoBaseline writes the export data of the public packages of the
// module at dir to file: apidiff's module export (a zip of the module path
// and each package's export data), less the packages that are not public.
func writeGoBaseline(t *testing.T, apidiff, dir, file string) {
	t.Helper()
	all := filepath.Join(t.TempDir(), "module.zip")
	runAPIDiff(t, apidiff, dir, "-m", "-w", all, modulePath)
	public := map[string]bool{}
	for _, rel := range publicPackages(t, dir) {
		public[importPath(rel)+".x"] = true
	}
	r, err := zip.OpenReader(all)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, f := range r.File {
		if f.Name != "module" && !public[f.Name] {
			continue
		}
		data, err := readEntry(f)
		if err != nil {
			t.Fatal(err)
		}
		out, err := w.CreateHeader(&zip.FileHeader{Name: f.Name, Method: zip.Deflate})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := out.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readEntry(f *zip.File) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// importPath returns the import path of the package at rel.
func importPath(rel string) string {
	if rel == "" {
		return modulePath
	}
	return modulePath + "/" + rel
}

// baselinePackages returns the module-relative paths of the packages a Go
// baseline holds.
func baselinePackages(t *testing.T, file string) []string {
	t.Helper()
	r, err := zip.OpenReader(file)
	if err != nil {
		t.Fatalf("the Go baseline: %v", err)
	}
	defer r.Close()
	var pkgs []string
	for _, f := range r.File {
		if p, ok := strings.CutSuffix(f.Name, ".x"); ok {
			pkgs = append(pkgs, strings.TrimPrefix(strings.TrimPrefix(p, modulePath), "/"))
		}
	}
	return pkgs
}

// goChanges returns the incompatible changes apidiff finds between the Go
// baseline in file and the module at dir.
func goChanges(t *testing.T, apidiff, dir, file string) []change {
	t.Helper()
	abs, err := filepath.Abs(file) // apidiff runs in dir
	if err != nil {
		t.Fatal(err)
	}
	out := runAPIDiff(t, apidiff, dir, "-m", "-incompatible", abs, modulePath)
	return parseAPIDiff(out, baselinePackages(t, file))
}

// parseAPIDiff reads apidiff -m -incompatible's lines ("- ./events.Answer.Tool:
// removed", "- Version: removed" for the root package, "- package
// github.com/…/x: removed"), given the module-relative paths of the
// baseline's packages.
func parseAPIDiff(out string, pkgs []string) []change {
	// The longest path first, so that kvstore/natsstore wins over kvstore.
	pkgs = slices.Clone(pkgs)
	slices.SortFunc(pkgs, func(a, b string) int { return len(b) - len(a) })
	var changes []change
	for _, line := range strings.Split(out, "\n") {
		msg, ok := strings.CutPrefix(line, "- ")
		if !ok || strings.HasPrefix(msg, "Version: value changed from ") {
			continue // toolexec.Version is the release: each one changes it
		}
		c := change{surface: "Go", what: msg}
		subject, _, _ := strings.Cut(msg, ": ")
		subject, _, _ = strings.Cut(subject, ", ") // "T, method set of *T"
		switch {
		case strings.HasPrefix(msg, "package "):
			path := strings.TrimPrefix(subject, "package ")
			c.names = qualifiers(strings.TrimPrefix(strings.TrimPrefix(path, modulePath), "/"))
		case strings.HasPrefix(subject, "./"):
			rel, ident := "", subject[2:]
			for _, p := range pkgs {
				if p != "" && strings.HasPrefix(ident, p+".") {
					rel, ident = p, ident[len(p)+1:]
					break
				}
			}
			c.names = qualified(rel, ident)
		case strings.Contains(subject, "/"): // a type of another module, reported where it is used
			c.names = []string{normalName(subject)}
		default:
			c.names = qualified("", subject)
		}
		changes = append(changes, c)
	}
	return changes
}

// qualifiers returns the ways to name the package at rel: its path from the
// module's root, its import path and its name ("toolexec" for the root).
func qualifiers(rel string) []string {
	if rel == "" {
		return []string{"toolexec", modulePath}
	}
	if name := rel[strings.LastIndex(rel, "/")+1:]; name != rel {
		return []string{rel, importPath(rel), name}
	}
	return []string{rel, importPath(rel)}
}

// qualified returns the names of ident in the package at rel.
func qualified(rel, ident string) []string {
	var out []string
	for _, q := range qualifiers(rel) {
		out = append(out, q+"."+normalName(ident))
	}
	return out
}

// pythonLines returns the lines of a public_api.txt that describe names.
func pythonLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

var pythonKeyEnd = regexp.MustCompile(`[:(= ]`)

// pythonKey is what a line of public_api.txt is about, as
// python/tests/test_public_api.py reads it: the qualified name before its
// description; a module's line is about the module.
func pythonKey(line string) string {
	if m, ok := strings.CutPrefix(line, "module "); ok {
		return m
	}
	if loc := pythonKeyEnd.FindStringIndex(line); loc != nil {
		return line[:loc[0]]
	}
	return line
}

// pythonChanges returns the names whose lines the baseline has and the
// current list lacks or says otherwise.
func pythonChanges(base, cur []string) []change {
	now := map[string]string{}
	for _, l := range cur {
		now[pythonKey(l)] = l
	}
	var changes []change
	for _, l := range base {
		k := pythonKey(l)
		switch n, ok := now[k]; {
		case !ok:
			changes = append(changes, change{surface: "Python", what: "removed: " + l, names: []string{k}})
		case n != l:
			changes = append(changes, change{surface: "Python", what: "changed: " + l + "\n      now: " + n, names: []string{k}})
		}
	}
	return changes
}

// wireChanges returns the change of the wire version, if any.
func wireChanges(base, cur string) []change {
	if base == cur {
		return nil
	}
	return []change{{surface: "wire", what: fmt.Sprintf("wire version %s is now wire version %s", base, cur), phrase: "wire version " + cur}}
}

// keyChanges derives each vector's key with the code and returns the ones
// that come out otherwise than the vectors say.
func keyChanges(t *testing.T, data []byte) []change {
	t.Helper()
	f := keyvectors.Parse(t, "the baseline's key vectors", data)
	var changes []change
	for _, v := range f.Vectors {
		key, err := idemkey.Derive(v.Tenant, v.RunID, v.Tool, []byte(v.ArgumentsJSON), v.KeyArguments)
		was, now := "key "+v.Key, "key "+key.Hex
		if v.Error != "" {
			was = "error " + v.Error
		}
		if err != nil {
			now = "error " + idemkey.Code(err)
		}
		if was != now || (err == nil && string(key.Canonical) != v.Canonical) {
			changes = append(changes, change{surface: "key derivation", what: fmt.Sprintf("vector %q: was %s, is now %s", v.Name, was, now),
				phrase: "key derivation", major: true})
		}
	}
	return changes
}
