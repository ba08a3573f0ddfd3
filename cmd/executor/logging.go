package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/tesserix/toolexec/internal/app/tracing"
)

// newLogger returns the executor's logger: text or JSON lines on w, at
// --log-level, each line logged with a traced call's context carrying its
// trace_id and span_id.
func newLogger(cfg config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", cfg.logLevel, err)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if cfg.logFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(tracing.LogHandler(h)), nil
}

// serverLogger is the embedded server's logger: its start-up banner and notices
// only at --log-level debug, its warnings and errors always.
func serverLogger(cfg config, log *slog.Logger, logOut io.Writer) *slog.Logger {
	if cfg.logLevel == "debug" {
		return log.With("component", "nats-server")
	}
	quiet := cfg
	quiet.logLevel = "warn"
	l, err := newLogger(quiet, logOut)
	if err != nil {
		return log
	}
	return l.With("component", "nats-server")
}
