package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/internal/clock"
)

// errStopped is what waitForNATS returns when the executor is told to stop
// before NATS could be reached: nothing has started, and run ends quietly.
var errStopped = errors.New("stopped while waiting for NATS")

// waitLogInterval is the least time between two "still waiting for NATS" lines.
const waitLogInterval = 30 * time.Second

// waitForNATS connects to the server at cfg.conn.Server, waiting for it while it
// cannot be reached, for at most cfg.natsWait (0: until ctx ends). It returns
// errStopped when ctx ends first, and an error naming --nats-wait when the bound
// passes; other errors (refused credentials, a bad URL, unreadable files) come
// back at once.
func waitForNATS(ctx context.Context, cfg config, cc bus.ConnectConfig, ready *readiness, log *slog.Logger) (*nats.Conn, error) {
	wctx := ctx
	if cfg.natsWait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, cfg.natsWait)
		defer cancel()
	}
	report := &waitReport{url: redactNATSURL(cfg.conn.Server), log: log, ready: ready, clock: clock.Real{}}
	report.start = report.clock.Now()
	nc, err := bus.ConnectWait(wctx, cc, bus.WaitConfig{Failed: report.failed})
	switch {
	case err == nil:
		report.connected()
		return nc, nil
	case ctx.Err() != nil:
		return nil, errStopped
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("NATS at %s not reachable within --nats-wait %v: %w", report.url, cfg.natsWait, err)
	default:
		return nil, fmt.Errorf("connecting to NATS at %s: %w", report.url, err)
	}
}

// waitReport tells the log and /readyz how the wait for the first NATS
// connection goes: the first failure at once, then a line at most every
// waitLogInterval, and the connection when it comes.
type waitReport struct {
	url   string // redacted
	log   *slog.Logger
	ready *readiness
	clock clock.Clock
	start time.Time

	attempts int       // failed so far
	logged   time.Time // when the last line was written
}

// failed records the failed attempt n and its error.
func (w *waitReport) failed(n int, err error) {
	w.attempts = n
	w.ready.waiting(fmt.Sprintf("waiting for first connection to %s (%d attempts; last error: %v)", w.url, n, err))
	now := w.clock.Now()
	switch {
	case n == 1:
		w.log.Warn("NATS not reachable; waiting for it", "url", w.url, "error", err)
	case now.Sub(w.logged) >= waitLogInterval:
		w.log.Warn("still waiting for NATS", "url", w.url, "attempts", n,
			"waited", now.Sub(w.start).Round(time.Second).String(), "last_error", err)
	default:
		return
	}
	w.logged = now
}

// connected logs the end of a wait, if there was one.
func (w *waitReport) connected() {
	if w.attempts == 0 {
		return
	}
	waited := w.clock.Now().Sub(w.start).Round(time.Millisecond)
	w.log.Info(fmt.Sprintf("connected to NATS after %d attempts, waited %v", w.attempts+1, waited), "url", w.url)
}

// redactNATSURL hides the credentials a list of NATS URLs may carry: passwords,
// and tokens (to NATS, a user name without a password is a token).
func redactNATSURL(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		parts[i] = p
		if !strings.Contains(p, "@") {
			continue
		}
		if !strings.Contains(p, "://") {
			p = "nats://" + p
		}
		u, err := url.Parse(p)
		if err != nil {
			parts[i] = "(unparsable URL)"
			continue
		}
		if _, ok := u.User.Password(); !ok {
			u.User = url.User("xxxxx")
		}
		parts[i] = u.Redacted()
	}
	return strings.Join(parts, ",")
}
