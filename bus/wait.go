package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/internal/backoff"
)

// Default pauses of [ConnectWait] between attempts.
const (
	DefaultFirstConnectPause = 250 * time.Millisecond
	DefaultMaxConnectPause   = 5 * time.Second
)

// WaitConfig says how [ConnectWait] waits for a NATS server that cannot be
// reached yet.
type WaitConfig struct {
	// FirstPause is the pause after the first failed attempt; default
	// DefaultFirstConnectPause. Each later pause is twice the one before, up to
	// MaxPause (default DefaultMaxConnectPause), and is drawn at random from the
	// upper half of that value, so that processes started together do not knock in
	// step.
	FirstPause time.Duration
	MaxPause   time.Duration
	// Failed, if set, hears of each attempt that found no server: the attempts
	// made so far (from 1) and the attempt's error. It is called on ConnectWait's
	// goroutine, before the pause.
	Failed func(attempts int, err error)
}

// ConnectWait is [Connect] for a server that may not be up yet. While no server
// can be reached ([Unreachable]) it tries again, pausing longer after each
// failure, until it connects or ctx ends. Any other error (refused credentials,
// a malformed URL, a credentials or TLS file that cannot be read, those of
// [ConnectConfig.Options]) comes back at once, as Connect returns it.
//
// When ctx ends first, the error matches both ctx.Err() and the last attempt's
// error (nats.ErrNoServers, say); no connection is returned once ctx has ended.
// An attempt under way is not interrupted: it ends within the connect timeout
// of nats.go (2s a server).
func ConnectWait(ctx context.Context, cfg ConnectConfig, wait WaitConfig) (*nats.Conn, error) {
	pauses := backoff.Backoff{
		Initial: cmp.Or(wait.FirstPause, DefaultFirstConnectPause),
		Max:     cmp.Or(wait.MaxPause, DefaultMaxConnectPause),
		Jitter:  0.5,
	}
	for attempts := 1; ; attempts++ {
		nc, err := Connect(cfg)
		if err == nil && ctx.Err() != nil {
			nc.Close()
			return nil, fmt.Errorf("bus: connect: %w", ctx.Err())
		}
		if err == nil || !Unreachable(err) {
			return nc, err
		}
		if wait.Failed != nil {
			wait.Failed(attempts, err)
		}
		if !backoff.Sleep(ctx, pauses.Delay(attempts)) {
			return nil, fmt.Errorf("bus: connect: gave up after %d attempts: %w (last error: %w)", attempts, ctx.Err(), err)
		}
	}
}

// unreachableErrnos are the system errors of a server that is not there (yet):
// nothing listens, the connection was cut, or there is no route to it.
var unreachableErrnos = []syscall.Errno{
	syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
	syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ETIMEDOUT,
}

// Unreachable reports whether err, from [Connect], says that no server could be
// reached: nothing listens (nats.ErrNoServers), a connection was reset, cut
// short or timed out, there is no route to the host, or its name does not
// resolve (yet). Waiting may cure these. It reports false for every other
// error, among them refused credentials (nats.ErrAuthorization,
// nats.ErrAuthExpired), a malformed URL, credentials or TLS files that cannot
// be read and failed TLS handshakes: trying again would give the same answer.
func Unreachable(err error) bool {
	var dns *net.DNSError
	if errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrTimeout) || errors.As(err, &dns) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	for _, errno := range unreachableErrnos {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}
