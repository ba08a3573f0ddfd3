package testenv

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"
)

// LogVariable names the environment variable that makes Logger's loggers
// write, at debug level, to standard error.
const LogVariable = "TOOLEXEC_TEST_LOG"

// Logger returns a logger for the code under test: silent unless LogVariable
// is set.
func Logger() *slog.Logger {
	if os.Getenv(LogVariable) != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Context returns a context that ends with the test, or after d.
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// LogBuffer collects what a logger writes, for tests that read the lines. It
// is safe for concurrent use.
type LogBuffer struct {
	mu  sync.Mutex // protects buf
	buf []byte
}

// Write appends p.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
