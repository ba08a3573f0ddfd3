package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// natsVariables are the variables the nats CLI, and so the programs, read
// connection options from.
var natsVariables = []string{
	"NATS_URL", "NATS_CREDS", "NATS_NKEY", "NATS_USER", "NATS_PASSWORD",
	"NATS_CERT", "NATS_KEY", "NATS_CA", "NATS_CONTEXT",
}

// IsolateNATSConfig keeps the developer's NATS setup out of a test binary and
// the programs it starts: it unsets the NATS_* variables and points HOME at a
// new empty directory (XDG_CONFIG_HOME unset), so no saved nats CLI context
// is selected. Call it from TestMain before m.Run; the returned function
// removes the directory. Tests that need a variable or a context set it
// themselves.
//
// The go command the tests run to build the programs finds its own settings,
// build cache and module cache from HOME too: they are pinned first, where
// unset, to what they are with the real HOME, so that a build neither starts
// cold nor downloads every module again.
func IsolateNATSConfig() (cleanup func(), err error) {
	if err := pinGoDirs(); err != nil {
		return nil, err
	}
	home, err := os.MkdirTemp("", "toolexec-test-home-")
	if err != nil {
		return nil, fmt.Errorf("testenv: a home for the test: %w", err)
	}
	for _, v := range natsVariables {
		os.Unsetenv(v)
	}
	os.Setenv("HOME", home)
	os.Unsetenv("XDG_CONFIG_HOME")
	return func() { os.RemoveAll(home) }, nil
}

// pinGoDirs sets GOENV, GOCACHE and GOPATH, where unset, to the go command's
// defaults for the current HOME.
func pinGoDirs() error {
	config, err := os.UserConfigDir()
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	for name, def := range map[string]string{
		"GOENV":   filepath.Join(config, "go", "env"),
		"GOCACHE": filepath.Join(cache, "go-build"),
		"GOPATH":  filepath.Join(home, "go"),
	} {
		if os.Getenv(name) == "" {
			os.Setenv(name, def)
		}
	}
	return nil
}

// RunIsolated runs m's tests under IsolateNATSConfig and returns their exit
// code, for a TestMain to pass to os.Exit.
func RunIsolated(m *testing.M) int {
	cleanup, err := IsolateNATSConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	return m.Run()
}
