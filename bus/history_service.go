package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/accountcheck"
	"github.com/tesserix/toolexec/internal/jsapi"
)

// Defaults of [HistoryConfig].
const (
	// DefaultHistoryQueue is the queue group the executors' history responders
	// share, so that one executor answers each request.
	DefaultHistoryQueue = "toolexec-history"
	// DefaultHistoryConcurrency is how many history requests one responder
	// answers at once.
	DefaultHistoryConcurrency = 4
	// DefaultHistoryTimeout bounds the work for one history request, and a
	// toolexec.Client's history or catalog request whose context has no
	// deadline.
	DefaultHistoryTimeout = 10 * time.Second
)

// historyReserve is what a page leaves free of the connection's maximum
// payload, for the reply's own members.
const historyReserve = 4 << 10

// HistoryConfig configures a [HistoryService]. The zero value is usable.
type HistoryConfig struct {
	// Queue is the queue group shared by the executors' responders; default
	// DefaultHistoryQueue.
	Queue string
	// Concurrency bounds the requests answered at once; default
	// DefaultHistoryConcurrency. Further requests wait in the subscription.
	Concurrency int
	// Timeout bounds the work for one request; default DefaultHistoryTimeout.
	Timeout time.Duration
	// Logger receives requests that could not be answered; default
	// slog.Default().
	Logger *slog.Logger
	// AdminAccount, when set, is the one NATS account whose requests on
	// toolexec.admin.history (the operators' history of every tenant) are
	// served, by the Nats-Request-Info header nats-server writes where a request
	// crosses a service import: the rule, and the value, of
	// admin.Config.Account (ADMIN in deploy/accounts.conf). A request without the
	// header or naming another account is answered HistoryForbidden. Empty, the
	// default, serves every request that reaches the subject, as a server with
	// one account needs (the embedded one). Requests on toolexec.history.<tenant>
	// are not checked: the subject names the tenant they may read.
	AdminAccount string
}

// HistoryService answers history requests ([HistoryRequest]) from
// TOOLEXEC_EVENTS, for clients that cannot read the stream themselves.
//
//   - Tenants in accounts of their own, which import the service
//     toolexec.history.<tenant> and no JetStream API: it serves
//     toolexec.history.* and takes the tenant from the subject's third token,
//     which the server binds to the importing account (an export with
//     account_token_position: 3), so that a tenant is answered about its own
//     events only, whatever its request says.
//   - The operators, whose account imports the admin subjects
//     (toolexec.admin.>) and no JetStream API: it serves
//     toolexec.admin.history, where a filter may reach any tenant's events, to
//     the admin account only (HistoryConfig.AdminAccount).
//
// Every executor may run one: they share a queue group.
type HistoryService struct {
	js       jetstream.JetStream
	nc       *nats.Conn
	cfg      HistoryConfig
	log      *slog.Logger
	api      string                // the JetStream API prefix, "$JS.API." by default
	maxBytes int                   // what one page's events may add up to in JSON
	account  *accountcheck.Checker // admits requests on toolexec.admin.history
	subs     []*nats.Subscription  // toolexec.history.* and toolexec.admin.history
	sem      chan struct{}         // one slot per request being answered

	mu       sync.Mutex     // protects closed, and wg's Add against Close's Wait
	closed   bool           // set by Close: requests still arriving are answered unavailable
	inFlight sync.WaitGroup // requests being answered
}

// ServeHistory subscribes to toolexec.history.* and toolexec.admin.history on
// js's connection and answers history requests until Close. It returns an
// error matching ErrInvalidConfig if js is nil, and a subscription's error if
// the connection refuses it.
func ServeHistory(js jetstream.JetStream, cfg HistoryConfig) (*HistoryService, error) {
	if js == nil {
		return nil, invalidConfig("history: a JetStream context is required")
	}
	if cfg.Queue == "" {
		cfg.Queue = DefaultHistoryQueue
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultHistoryConcurrency
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultHistoryTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	nc := js.Conn()
	s := &HistoryService{
		js: js, nc: nc, cfg: cfg, log: cfg.Logger, api: jsapi.APIPrefix(js),
		maxBytes: max(int(nc.MaxPayload())-historyReserve, historyReserve),
		sem:      make(chan struct{}, cfg.Concurrency),
		account:  accountcheck.New(cfg.AdminAccount, "history", cfg.Logger),
	}
	for _, subject := range []string{wire.HistorySubjects, wire.AdminHistorySubject} {
		sub, err := nc.QueueSubscribe(subject, cfg.Queue, s.handle)
		if err != nil {
			s.unsubscribe()
			return nil, fmt.Errorf("bus: subscribing to %s: %w", subject, err)
		}
		s.subs = append(s.subs, sub)
	}
	if err := nc.Flush(); err != nil {
		s.unsubscribe()
		return nil, fmt.Errorf("bus: subscribing to the history subjects: %w", err)
	}
	return s, nil
}

// unsubscribe drops the subscriptions made so far, for a ServeHistory that
// fails.
func (s *HistoryService) unsubscribe() {
	for _, sub := range s.subs {
		_ = sub.Unsubscribe()
	}
}

// Close stops answering: requests being answered finish, those still waiting
// in the subscriptions are answered unavailable, new ones go to other
// executors. It returns once the subscriptions are gone (or after the request
// timeout, if the server does not confirm) and no request is being answered.
func (s *HistoryService) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	var errs []error
	for _, sub := range s.subs {
		errs = append(errs, s.drain(sub))
	}
	s.inFlight.Wait()
	return errors.Join(errs...)
}

// drain drains sub and waits until it is gone, or for the request timeout.
func (s *HistoryService) drain(sub *nats.Subscription) error {
	gone := sub.StatusChanged(nats.SubscriptionClosed)
	err := sub.Drain()
	if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrBadSubscription) {
		return nil
	}
	if err != nil {
		return err
	}
	t := time.NewTimer(s.cfg.Timeout)
	defer t.Stop()
	select {
	case <-gone:
	case <-t.C:
	}
	return nil
}

// handle answers one request on its own goroutine, once a slot is free.
func (s *HistoryService) handle(m *nats.Msg) {
	if m.Reply == "" {
		s.log.Warn("history request without a reply subject: not answered", "subject", m.Subject)
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.respond(m, HistoryResponse{Error: historyError(HistoryUnavailable, "this executor is stopping")})
		return
	}
	s.inFlight.Add(1)
	s.mu.Unlock()
	s.sem <- struct{}{}
	go func() {
		defer func() {
			<-s.sem
			s.inFlight.Done()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
		defer cancel()
		s.respond(m, s.answer(ctx, m))
	}()
}

func (s *HistoryService) respond(m *nats.Msg, resp HistoryResponse) {
	data, err := json.Marshal(resp)
	if err != nil {
		data = []byte(`{"events":[],"more":false,"last_seq":0,"error":{"code":"unavailable","message":"encoding the reply failed"}}`)
	}
	if err := m.Respond(data); err != nil {
		s.log.Warn("history reply failed", "subject", m.Subject, "error", err)
	}
}

// answer reads what the request m asks for.
func (s *HistoryService) answer(ctx context.Context, m *nats.Msg) HistoryResponse {
	tenant, herr := s.scope(m)
	if herr != nil {
		return HistoryResponse{Error: herr}
	}
	req, herr := parseHistoryRequest(m.Data)
	if herr != nil {
		return HistoryResponse{Error: herr}
	}
	filter, herr := scopeFilter(tenant, req.Filter)
	if herr != nil {
		return HistoryResponse{Error: herr}
	}
	resp, err := s.read(ctx, filter, req)
	if err != nil {
		s.log.Warn("history request: reading the events stream failed", "subject", m.Subject, "error", err)
		return HistoryResponse{Error: historyError(HistoryUnavailable, "reading %s: %v", wire.EventStream, err)}
	}
	return resp
}

// scope returns whose events the request m may read: the tenant its subject
// toolexec.history.<tenant> names, or "" (every tenant's) for a request on
// toolexec.admin.history that passes the admin account check.
func (s *HistoryService) scope(m *nats.Msg) (tenant string, herr *HistoryError) {
	if m.Subject == wire.AdminHistorySubject {
		if err := s.account.Check(m.Subject, m.Header); err != nil {
			return "", historyError(HistoryForbidden, "%v", err)
		}
		return "", nil
	}
	tenant, _ = strings.CutPrefix(m.Subject, wire.HistoryPrefix)
	if err := events.CheckToken("tenant", tenant); err != nil {
		return "", historyError(HistoryBadRequest, "subject %q: %v", m.Subject, err)
	}
	return tenant, nil
}

// read returns the page req asks for of the events under filter: from its
// start, in stream order, until req.Limit events, the byte budget or the end
// of the stream.
func (s *HistoryService) read(ctx context.Context, filter string, req HistoryRequest) (HistoryResponse, error) {
	stream, err := s.js.Stream(ctx, wire.EventStream)
	if err != nil {
		return HistoryResponse{}, err
	}
	resp := HistoryResponse{Events: []HistoryEvent{}, LastSeq: stream.CachedInfo().State.LastSeq}
	seq := req.AfterSeq + 1
	if !req.Since.IsZero() {
		var found bool
		if seq, found, err = s.seqSince(ctx, filter, req.Since); err != nil || !found {
			return resp, err
		}
	}
	if seq == 0 { // AfterSeq was the largest sequence there is
		return resp, nil
	}
	size := 0
	for {
		m, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return resp, nil
		}
		if err != nil {
			return HistoryResponse{}, err
		}
		if len(resp.Events) == req.Limit {
			resp.More = true
			return resp, nil
		}
		ev := HistoryEvent{Seq: m.Sequence, Subject: m.Subject, Time: m.Time, Header: m.Header, Data: m.Data}
		n, err := jsonSize(ev)
		if err != nil {
			return HistoryResponse{}, err
		}
		if size+n > s.maxBytes {
			if len(resp.Events) > 0 {
				resp.More = true
				return resp, nil
			}
			ev.Header, ev.Data, ev.Omitted = nil, nil, true
			s.log.Warn("history: an event is larger than a reply may be; sent without its headers and data",
				"subject", m.Subject, "seq", m.Sequence)
		}
		resp.Events = append(resp.Events, ev)
		size += n + 1
		seq = m.Sequence + 1
	}
}

// jsonSize returns how many bytes ev takes in a reply.
func jsonSize(ev HistoryEvent) (int, error) {
	b, err := json.Marshal(ev)
	return len(b), err
}

// seqSince returns the sequence of the first event under filter stored at or
// after t, through the stream's message-get API with start_time (which
// jetstream.Stream.GetMsg does not offer); found is false when there is none.
func (s *HistoryService) seqSince(ctx context.Context, filter string, t time.Time) (seq uint64, found bool, err error) {
	req, err := json.Marshal(struct {
		StartTime time.Time `json:"start_time"`
		NextFor   string    `json:"next_by_subj"`
	}{t, filter})
	if err != nil {
		return 0, false, err
	}
	m, err := s.nc.RequestWithContext(ctx, s.api+"STREAM.MSG.GET."+wire.EventStream, req)
	if err != nil {
		return 0, false, err
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Seq  uint64    `json:"seq"`
			Time time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return 0, false, fmt.Errorf("message-get reply: %w", err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return 0, false, nil
	case resp.Error != nil:
		return 0, false, resp.Error
	case resp.Message == nil:
		return 0, false, errors.New("message-get reply without a message")
	case resp.Message.Time.Before(t):
		// A server older than 2.11 ignores start_time and answers from the start.
		return 0, false, errors.New("the server ignored start_time: reading since a time needs nats-server 2.11 or later")
	}
	return resp.Message.Seq, true, nil
}
