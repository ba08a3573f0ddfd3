package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// The attributes LogHandler adds.
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// LogHandler returns a handler that passes every record to h, adding
// trace_id and span_id (lower-case hex, as OTLP backends show them) when the
// record was logged with a context carrying a valid span context: a span of
// this process, or a remote parent taken from a traceparent. Records logged
// without one pass unchanged.
//
// The ids go at the top level of the record even below a WithGroup, so that
// a log search finds them under one name.
func LogHandler(h slog.Handler) slog.Handler {
	if lh, ok := h.(*logHandler); ok {
		return lh
	}
	return &logHandler{inner: h, base: h}
}

// logHandler is LogHandler's handler. inner is base with the attributes and
// groups given to WithAttrs and WithGroup; while there are groups, the ids are
// added through a base that has only the attributes added before the first
// group, so they are not nested.
type logHandler struct {
	inner slog.Handler
	// base is the wrapped handler with the attributes given before the first
	// group; groups are the steps since, replayed by Handle after the ids.
	base   slog.Handler
	groups []groupStep
}

// groupStep is a WithGroup or WithAttrs call made after the first group, kept
// to be replayed after the ids are added.
type groupStep struct {
	group string
	attrs []slog.Attr
}

func (l *logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return l.inner.Enabled(ctx, level)
}

func (l *logHandler) Handle(ctx context.Context, r slog.Record) error {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return l.inner.Handle(ctx, r)
	}
	ids := []slog.Attr{slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String())}
	if len(l.groups) == 0 {
		r.AddAttrs(ids...)
		return l.inner.Handle(ctx, r)
	}
	// Below a group: add the ids before the groups open, then the groups.
	h := l.base.WithAttrs(ids)
	for _, g := range l.groups {
		if g.group != "" {
			h = h.WithGroup(g.group)
		} else {
			h = h.WithAttrs(g.attrs)
		}
	}
	return h.Handle(ctx, r)
}

func (l *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return l
	}
	n := &logHandler{inner: l.inner.WithAttrs(attrs), base: l.base}
	if len(l.groups) == 0 {
		n.base = n.inner
		return n
	}
	n.groups = append(append([]groupStep(nil), l.groups...), groupStep{attrs: attrs})
	return n
}

func (l *logHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return l
	}
	return &logHandler{inner: l.inner.WithGroup(name), base: l.base,
		groups: append(append([]groupStep(nil), l.groups...), groupStep{group: name})}
}
