package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/natstool"
)

// DefaultConcurrency bounds the bodies a worker runs at once unless
// [Config.Concurrency] says otherwise.
const DefaultConcurrency = 64

// CodeToolError is the error code of a body that failed with an effect the
// worker cannot rule out.
const CodeToolError = "tool_error"

// maxDescription bounds an error reply's description, which travels in a
// header.
const maxDescription = 1024

// flushTimeout bounds Serve's wait for the server to have its subscriptions.
const flushTimeout = 10 * time.Second

// ErrInvalidConfig is matched by the errors that refuse a worker's
// configuration.
var ErrInvalidConfig = errors.New("worker: invalid configuration")

// Config configures a [Worker]. The zero value is usable.
type Config struct {
	// Version is the service's version, a SemVer string; default "0.0.0".
	Version string
	// Description says what the worker is, in its service info.
	Description string
	// Subjects serves the tools they name on another subject than
	// toolexec.body.<tool>; the executors must then be told that subject (a
	// tools file's nats.subject).
	Subjects map[string]string
	// Concurrency bounds the bodies running at once; default
	// DefaultConcurrency. A request that finds no room waits for it.
	Concurrency int
	// Logger receives what could not be replied, never arguments; default
	// slog.Default().
	Logger *slog.Logger
}

// Worker serves tool bodies. It is safe for concurrent use.
type Worker struct {
	nc   *nats.Conn
	svc  micro.Service
	sem  chan struct{}
	log  *slog.Logger
	quit chan struct{} // closed by Stop: no new body starts

	ctx    context.Context // the bodies' parent; cancelled when Stop gives up waiting
	cancel context.CancelFunc

	mu      sync.Mutex // protects stopped, and orders running.Add before Wait
	stopped bool
	running sync.WaitGroup
}

// Serve adds the service toolexec-worker to nc with an endpoint for each of
// tools, and serves their bodies until Stop; it returns once the server has
// the endpoints' subscriptions. It returns an error matching
// ErrInvalidConfig for a nil connection, no tools, a tool given twice, a
// subject of Config.Subjects one cannot serve on (or naming no tool) or a
// Version that is not SemVer, and the service API's error if it refuses an
// endpoint.
func Serve(nc *nats.Conn, cfg Config, tools ...*tool.Tool) (*Worker, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: a connection is required", ErrInvalidConfig)
	}
	if len(tools) == 0 {
		return nil, fmt.Errorf("%w: no tools", ErrInvalidConfig)
	}
	if cfg.Version == "" {
		cfg.Version = "0.0.0"
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	names := map[string]bool{}
	for _, t := range tools {
		if t == nil {
			return nil, fmt.Errorf("%w: a nil tool", ErrInvalidConfig)
		}
		if names[t.Name()] {
			return nil, fmt.Errorf("%w: tool %q is given twice", ErrInvalidConfig, t.Name())
		}
		names[t.Name()] = true
	}
	for name, subject := range cfg.Subjects {
		if !names[name] {
			return nil, fmt.Errorf("%w: Subjects names %q, which is not among the tools", ErrInvalidConfig, name)
		}
		if err := natstool.CheckSubject(subject); err != nil {
			return nil, fmt.Errorf("%w: the subject of tool %q %v", ErrInvalidConfig, name, err)
		}
	}
	w := &Worker{nc: nc, sem: make(chan struct{}, cfg.Concurrency), log: cfg.Logger, quit: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	svc, err := micro.AddService(nc, micro.Config{
		Name: wire.WorkerService, Version: cfg.Version, Description: cfg.Description,
		ErrorHandler: func(_ micro.Service, e *micro.NATSError) {
			w.log.Error("worker: the service met an error", "subject", e.Subject, "error", e.Description)
		},
	})
	if err != nil {
		w.cancel()
		if errors.Is(err, micro.ErrConfigValidation) {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		return nil, fmt.Errorf("worker: %w", err)
	}
	w.svc = svc
	for _, t := range tools {
		decl, err := natstool.Declaration(t)
		if err == nil {
			subject := cfg.Subjects[t.Name()]
			if subject == "" {
				subject = wire.BodySubject(t.Name())
			}
			err = svc.AddEndpoint(t.Name(), w.handler(t),
				micro.WithEndpointSubject(subject),
				micro.WithEndpointQueueGroup(wire.BodyQueue),
				micro.WithEndpointMetadata(map[string]string{wire.DeclarationMetadata: string(decl)}))
		}
		if err != nil {
			_ = svc.Stop()
			w.cancel()
			return nil, fmt.Errorf("worker: serving tool %q: %w", t.Name(), err)
		}
	}
	// Once the server has the subscriptions, requests reach this worker.
	if err := nc.FlushTimeout(flushTimeout); err != nil {
		_ = svc.Stop()
		w.cancel()
		return nil, fmt.Errorf("worker: %w", err)
	}
	return w, nil
}

// ID returns the service instance's id, which executors name the worker by.
func (w *Worker) ID() string { return w.svc.Info().ID }

// Stop stops taking requests and waits for the bodies running to reply. Once
// the server has dropped the worker's subscriptions no request reaches it; one
// that did before but was not yet handed to a body is refused with no_effect,
// its body never entered, so that its caller may call again. When ctx ends
// before the bodies reply, Stop cancels their contexts, waits for them to
// return, and returns ctx's error. It is safe to call more than once.
func (w *Worker) Stop(ctx context.Context) error {
	err := w.svc.Stop()
	fctx, cancel := context.WithTimeout(ctx, flushTimeout)
	if ferr := w.nc.FlushWithContext(fctx); ferr != nil && !errors.Is(ferr, nats.ErrConnectionClosed) && err == nil {
		err = fmt.Errorf("worker: waiting for the server to drop the subscriptions: %w", ferr)
	}
	cancel()
	w.mu.Lock()
	if !w.stopped {
		w.stopped = true
		close(w.quit)
	}
	w.mu.Unlock()
	done := make(chan struct{})
	go func() { w.running.Wait(); close(done) }()
	select {
	case <-done:
		w.cancel()
		return err
	case <-ctx.Done():
		w.cancel()
		<-done
		return ctx.Err()
	}
}

// handler serves one tool's requests: each body in a goroutine of its own,
// at most Concurrency at once.
func (w *Worker) handler(t *tool.Tool) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		select {
		case w.sem <- struct{}{}:
		case <-w.quit:
			w.reply(req, t, "", tool.NoEffect(errors.New("the worker is stopping")))
			return
		}
		w.mu.Lock()
		if w.stopped {
			w.mu.Unlock()
			<-w.sem
			w.reply(req, t, "", tool.NoEffect(errors.New("the worker is stopping")))
			return
		}
		w.running.Add(1)
		w.mu.Unlock()
		go func() {
			defer w.running.Done()
			defer func() { <-w.sem }()
			out, err := w.run(t, req)
			w.reply(req, t, out, err)
		}()
	})
}

// run enters t's body once for req, under t's timeout.
func (w *Worker) run(t *tool.Tool, req micro.Request) (out string, err error) {
	timeout := t.Timeout()
	if timeout <= 0 {
		timeout = natstool.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(w.ctx, timeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			out, err = "", fmt.Errorf("tool %s panicked: %v", t.Name(), p)
		}
	}()
	return t.Call(ctx, contextOf(req.Headers(), t.Name()), req.Data())
}

// reply sends the outcome, or err as an error reply in the service API's
// form. It publishes to the request's reply subject itself rather than
// through req: a body's reply comes from a goroutine of its own, after the
// service's handler returned, and the service reads req's state then (its
// error statistics), so that answering through req would race with it.
func (w *Worker) reply(req micro.Request, t *tool.Tool, out string, err error) {
	msg := &nats.Msg{Subject: req.Reply(), Data: []byte(out)}
	if err != nil {
		code := CodeToolError
		if tool.IsNoEffect(err) {
			code = natstool.CodeNoEffect
		}
		msg.Data = nil
		msg.Header = nats.Header{micro.ErrorHeader: []string{describe(err)}, micro.ErrorCodeHeader: []string{code}}
	}
	rerr := nats.ErrMsgNoReply
	if msg.Subject != "" {
		rerr = w.nc.PublishMsg(msg)
	}
	if rerr != nil {
		w.log.Error("worker: the reply could not be sent; the executor will not learn the outcome",
			"tool", t.Name(), "call_id", req.Headers().Get(tool.HeaderCallID), "error", rerr)
	}
}

// contextOf reads the call's context from a request's headers.
func contextOf(h micro.Headers, name string) tool.Context {
	tc := tool.ContextFromHeaders(h.Get)
	if tc.Tool == "" {
		tc.Tool = name
	}
	return tc
}

// describe renders err for the Nats-Service-Error header: one line, no
// control characters, at most maxDescription bytes, never empty.
func describe(err error) string {
	s := strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, err.Error())
	if len(s) > maxDescription {
		s = strings.ToValidUTF8(s[:maxDescription], "")
	}
	if strings.TrimSpace(s) == "" {
		s = "failed"
	}
	return s
}
