package httptool_test

import (
	"context"
	"io"
	"log"
	"net/http/httptrace"
)

// discardLog silences a test server's log of expected handshake failures.
func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }

// httptraceReused returns ctx with a client trace that sets *reused when a call
// gets a connection that served a request before.
func httptraceReused(ctx context.Context, reused *bool) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if info.Reused {
				*reused = true
			}
		},
	})
}
