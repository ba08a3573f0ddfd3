package toolexec_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEPackageMap holds the README's package map to `go list ./...`:
// every package of the module stands in a row, and every package a row names
// exists.
func TestREADMEPackageMap(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "| package | job |")
	if !ok {
		t.Fatal("README.md has no package map (a table headed | package | job |)")
	}
	named := map[string]bool{} // package paths below the module, "" for the root
	prefixes := []string{}     // rows naming a folder with …
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(first, -1) {
			switch p := m[1]; {
			case p == "toolexec":
				named[""] = true
			case strings.HasSuffix(p, "/…"):
				prefixes = append(prefixes, strings.TrimSuffix(p, "…"))
			default:
				named[p] = true
			}
		}
	}
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	const module = "github.com/tesserix/toolexec"
	listed := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		listed[rel] = true
		covered := named[rel]
		for _, pre := range prefixes {
			covered = covered || strings.HasPrefix(rel, pre)
		}
		if !covered {
			t.Errorf("package %s is missing from README.md's package map", p)
		}
	}
	for p := range named {
		if !listed[p] && p != "bench" { // bench is a module of its own
			t.Errorf("README.md's package map names %q, which go list ./... does not list", p)
		}
	}
}
