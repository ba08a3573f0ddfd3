package mcptool

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The standalone stream of a Streamable HTTP session: the GET on which a
// server sends what belongs to no request of its client's (or that it did
// not relate to one), kept open by listen rather than by the SDK's
// transport (whose connection is a probeConn around it, so that it never
// opens one; and when it does, a GET that fails or ends too often ends the
// whole session, leaving the calls in flight without their answers).
const (
	// standaloneRetry is the first delay before the GET is tried again
	// after it failed, doubling up to standaloneMaxRetry; and the delay
	// before a stream that ended is opened again, unless the server gave
	// one (retry field).
	standaloneRetry    = 500 * time.Millisecond
	standaloneMaxRetry = 30 * time.Second
	// standaloneTries is how many GETs in a row may fail before the
	// session does without its standalone stream.
	standaloneTries = 5
	// standaloneLived is how long a stream must have lasted, when it gave
	// no event, for its end not to count as a failed GET.
	standaloneLived = 5 * time.Second
	// standaloneWait bounds how long a start waits for the first GET to be
	// answered: a call made at once must find the stream open, for the
	// server to have somewhere to send what belongs to no request.
	standaloneWait = 5 * time.Second
)

// listen holds the standalone stream of HTTP session s open while s lasts,
// and hands what comes on it to s.conn.offStream. It never ends the
// session: a server that refuses the GET (405, or any other 4xx) has no such
// stream, and one whose GETs fail standaloneTries times in a row without an
// event in between is left without; the calls go on on their own streams
// either way, and whatever ends the session is found by them and the ping.
// ready is closed once the first GET was answered or failed.
func (u *Upstream) listen(s *session, ready chan<- struct{}) {
	defer u.wg.Done()
	var once sync.Once
	opened := func() { once.Do(func() { close(ready) }) }
	defer opened()
	ctx, cancel := context.WithCancel(u.life)
	defer cancel()
	go func() {
		select {
		case <-s.ended:
			cancel()
		case <-ctx.Done():
		}
	}()
	var (
		parser sseParser
		failed int
		delay  time.Duration
	)
	for {
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return
			}
		}
		resp, err := u.openStandalone(ctx, s.cs.ID(), parser.id)
		opened()
		switch {
		case ctx.Err() != nil:
			if err == nil {
				resp.Body.Close()
			}
			return
		case err != nil || transientStatus(resp.StatusCode):
			if err == nil {
				resp.Body.Close()
				err = errors.New(resp.Status)
			}
			failed++
			if failed >= standaloneTries {
				u.log.Info("mcp server's standalone stream cannot be opened; going on without it", "error", u.redact(err), "tries", failed)
				return
			}
			delay = min(standaloneRetry<<(failed-1), standaloneMaxRetry)
			continue
		case resp.StatusCode < 200 || resp.StatusCode >= 300 || !isEventStream(resp.Header):
			resp.Body.Close()
			u.log.Debug("mcp server offers no standalone stream", "status", resp.StatusCode, "content_type", resp.Header.Get("Content-Type"))
			return
		}
		events, started := 0, time.Now()
		readStream(resp.Body, &parser, func(data []byte) {
			events++
			if msg, err := jsonrpc.DecodeMessage(data); err == nil {
				s.conn.offStream(msg)
			}
		})
		resp.Body.Close()
		if events > 0 || time.Since(started) >= standaloneLived {
			failed = 0
		} else {
			failed++ // a stream that ends at once, empty, is a failed GET
			if failed >= standaloneTries {
				u.log.Info("mcp server's standalone stream keeps ending at once; going on without it", "tries", failed)
				return
			}
		}
		delay = standaloneRetry
		if parser.retry > 0 {
			delay = parser.retry
		}
		parser = sseParser{id: parser.id, retry: parser.retry}
	}
}

// openStandalone sends the GET of the standalone stream of session id,
// resuming after the event lastID when it is not empty.
func (u *Upstream) openStandalone(ctx context.Context, id, lastID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.cfg.URL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if id != "" {
		req.Header.Set("Mcp-Session-Id", id)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	return u.http.Do(req)
}

// readStream feeds body to parser until it ends or fails.
func readStream(body io.Reader, parser *sseParser, event func(data []byte)) {
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			parser.feed(buf[:n], event)
		}
		if err != nil {
			return
		}
	}
}

// transientStatus reports whether a GET answered with status may succeed
// later: a server error, too many requests, and a conflict (the TypeScript
// SDK's server allows one standalone stream per session, and answers 409
// until it noticed that the last one ended).
func transientStatus(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests || status == http.StatusConflict || status == http.StatusRequestTimeout
}

// isEventStream reports whether h says the body is a server-sent event
// stream.
func isEventStream(h http.Header) bool {
	t, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && t == "text/event-stream"
}
