package embedded_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// testLogger discards logs unless TOOLEXEC_TEST_LOG is set.
func testLogger() *slog.Logger { return testenv.Logger() }

// ctxT returns a context that ends with the test or after a minute.
func ctxT(t *testing.T) context.Context { return testenv.Context(t, time.Minute) }

// logBuffer is a slog handler target that tests can read.
type logBuffer = testenv.LogBuffer
