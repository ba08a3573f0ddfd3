package main

import (
	"fmt"
	"os"
	"testing"
)

// TestMain keeps the developer's own nats CLI setup out of the tests: the
// emitter reads NATS_* variables and the context the nats CLI has selected,
// so a machine with a context selected would otherwise connect the tests with
// its credentials. Tests that need either set them themselves.
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "emitter-test-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, v := range []string{"NATS_URL", "NATS_CREDS", "NATS_NKEY", "NATS_USER", "NATS_PASSWORD", "NATS_CERT", "NATS_KEY", "NATS_CA", "NATS_CONTEXT"} {
		os.Unsetenv(v)
	}
	os.Setenv("HOME", home)
	os.Setenv("XDG_CONFIG_HOME", "")
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}
