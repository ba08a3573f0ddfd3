package main

import (
	"os"
	"testing"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// TestMain keeps the developer's own nats CLI setup out of the tests: the
// emitter reads NATS_* variables and the context the nats CLI has selected,
// so a machine with a context selected would otherwise connect the tests with
// its credentials. Tests that need either set them themselves.
func TestMain(m *testing.M) { os.Exit(testenv.RunIsolated(m)) }
