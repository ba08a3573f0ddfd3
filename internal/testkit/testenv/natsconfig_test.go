package testenv_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// TestIsolateNATSConfig: no NATS_* variable survives, HOME is a new empty
// directory, and the go command still finds the caches and settings it had.
func TestIsolateNATSConfig(t *testing.T) {
	goEnv := func(names ...string) []string {
		out, err := exec.Command("go", append([]string{"env"}, names...)...).Output()
		if err != nil {
			t.Fatalf("go env: %v", err)
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	names := []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOENV", "GOFLAGS", "GOTOOLCHAIN"}
	before := goEnv(names...)
	for _, v := range []string{"HOME", "XDG_CONFIG_HOME", "GOENV", "GOCACHE", "GOPATH", "NATS_URL", "NATS_CONTEXT", "NATS_USER"} {
		t.Setenv(v, os.Getenv(v)) // restored after the test
	}
	t.Setenv("NATS_URL", "nats://elsewhere:4222")
	t.Setenv("NATS_CONTEXT", "prod")
	cleanup, err := testenv.IsolateNATSConfig()
	if err != nil {
		t.Fatal(err)
	}
	home := os.Getenv("HOME")
	t.Cleanup(cleanup)
	for _, v := range []string{"NATS_URL", "NATS_CONTEXT", "XDG_CONFIG_HOME"} {
		if got, ok := os.LookupEnv(v); ok {
			t.Errorf("%s=%q survived", v, got)
		}
	}
	if entries, err := os.ReadDir(home); err != nil || len(entries) != 0 || !strings.Contains(filepath.Base(home), "toolexec-test-home-") {
		t.Errorf("HOME %s: %d entries, %v; want a new empty directory", home, len(entries), err)
	}
	if after := goEnv(names...); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("the go command's settings moved with HOME:\nbefore %q\nafter  %q", before, after)
	}
}
