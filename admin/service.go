package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/accountcheck"
	"github.com/tesserix/toolexec/internal/backoff"
	"github.com/tesserix/toolexec/internal/retry"
	"github.com/tesserix/toolexec/kvstore"
)

// Defaults of [Config].
const (
	// DefaultQueue is the queue group the executors' admin responders share, so
	// that one executor answers each request.
	DefaultQueue = "toolexec-admin"
	// DefaultTimeout bounds the work for one admin request, and a Client's
	// request whose context has no deadline.
	DefaultTimeout = 30 * time.Second
	// DefaultSource is the CloudEvents source of resolved events: the executors'
	// (bus.DefaultAnswerSource).
	DefaultSource = "/toolexec/executor"
)

// Config configures a [Service]. The zero value is usable.
type Config struct {
	// Queue is the queue group shared by the executors' responders; default
	// DefaultQueue.
	Queue string
	// Source is the CloudEvents source of resolved events; default
	// DefaultSource.
	Source string
	// Timeout bounds the work for one request; default DefaultTimeout.
	Timeout time.Duration
	// Logger receives one line per request; default slog.Default().
	Logger *slog.Logger
	// Account, when set, is the one NATS account admin requests are accepted
	// from. nats-server names the account a request comes from in its
	// Nats-Request-Info header where the request crosses a service import, and
	// writes that header itself, replacing any the client sent. A request without
	// it (one published inside the executors' own account) or naming another
	// account is answered with CodeForbidden and never acted on. Set it to the
	// admin account of an account layout: ADMIN in deploy/accounts.conf; with
	// operator (JWT) accounts, the account's public key, which is its name to the
	// server. Empty, the default, accepts every request that reaches the admin
	// subjects, as a server with one account needs (the embedded one). The
	// Service's methods called in process (the console's) are not checked. The
	// executors' history service checks requests on toolexec.admin.history the
	// same way (bus.HistoryConfig.AdminAccount, set from the same flag).
	Account string
}

// Service answers admin requests from a kvstore.Store. Every executor may run
// one: they share a queue group, so each request is answered once.
type Service struct {
	js      jetstream.JetStream
	store   kvstore.Store
	cfg     Config
	log     *slog.Logger
	subs    []*nats.Subscription
	account *accountcheck.Checker // admits requests from cfg.Account
}

// Serve subscribes to the admin subjects on js's connection and answers
// requests from store until Close. It returns an error matching
// ErrInvalidConfig if js or store is nil, and the subscription's error if the
// server refuses it.
func Serve(js jetstream.JetStream, store kvstore.Store, cfg Config) (*Service, error) {
	if js == nil || store == nil {
		return nil, invalidConfig("a JetStream context and a store are required")
	}
	a, err := New(js, store, cfg)
	if err != nil {
		return nil, err
	}
	nc := js.Conn()
	for subject, h := range map[string]func(context.Context, []byte) any{
		ForgetSubject:  a.forget,
		InspectSubject: a.inspect,
		ResolveSubject: a.resolve,
		ListSubject:    a.list,
	} {
		sub, err := nc.QueueSubscribe(subject, a.cfg.Queue, a.handler(h))
		if err != nil {
			a.Close()
			return nil, fmt.Errorf("admin: subscribing to %s: %w", subject, err)
		}
		a.subs = append(a.subs, sub)
	}
	if err := nc.Flush(); err != nil {
		a.Close()
		return nil, fmt.Errorf("admin: %w", err)
	}
	return a, nil
}

// handler answers each request on a subject with h's reply, once the request
// has passed the account check.
func (a *Service) handler(h func(context.Context, []byte) any) nats.MsgHandler {
	return func(m *nats.Msg) {
		var resp any
		if e := a.checkAccount(m); e != nil {
			resp = refusal{Error: e}
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Timeout)
			defer cancel()
			resp = h(ctx, m.Data)
		}
		reply, err := json.Marshal(resp)
		if err != nil {
			reply = []byte(`{"error":{"code":"internal","message":"encoding the reply failed"}}`)
		}
		if err := m.Respond(reply); err != nil {
			a.log.Warn("admin reply failed", "subject", m.Subject, "error", err)
		}
	}
}

// refusal is the reply to a request refused before it was read. Every response
// type has the same error member, so each client reads it as its own.
type refusal struct {
	Error *Error `json:"error"`
}

// checkAccount refuses m unless it comes from the configured admin account (or
// none is configured), as accountcheck.Checker.Check says.
func (a *Service) checkAccount(m *nats.Msg) *Error {
	if err := a.account.Check(m.Subject, m.Header); err != nil {
		return &Error{Code: CodeForbidden, Message: "admin requests: " + err.Error()}
	}
	return nil
}

// errNoJetStream is why a Service made by New without a JetStream context
// publishes no resolved event and purges no stream.
var errNoJetStream = errors.New("no NATS connection")

// New returns a Service on store for callers in its own process (an operator's
// tool working on the store directly): unlike Serve's, it answers nothing from
// the bus. js publishes the resolved events of Resolve and purges the streams
// for Forget; it may be nil when NATS cannot be reached, and then Resolve and
// Forget still change the store and report that the event was not published
// (ErrAuditNotPublished) or the streams were not purged. It returns an error
// matching ErrInvalidConfig if store is nil.
func New(js jetstream.JetStream, store kvstore.Store, cfg Config) (*Service, error) {
	if store == nil {
		return nil, invalidConfig("a store is required")
	}
	if cfg.Queue == "" {
		cfg.Queue = DefaultQueue
	}
	if cfg.Source == "" {
		cfg.Source = DefaultSource
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{js: js, store: store, cfg: cfg, log: cfg.Logger,
		account: accountcheck.New(cfg.Account, "admin", cfg.Logger)}, nil
}

// Close stops answering: requests being answered finish, new ones go to other
// executors.
func (a *Service) Close() error {
	var errs []error
	for _, s := range a.subs {
		if err := s.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			errs = append(errs, err)
		}
	}
	a.subs = nil
	return errors.Join(errs...)
}

var hexKey = regexp.MustCompile(`^[0-9a-f]{64}$`)

func badRequest(format string, args ...any) *Error {
	return &Error{Code: CodeInvalid, Message: fmt.Sprintf(format, args...)}
}

// replyErr translates a store error for the reply.
func replyErr(err error) *Error {
	code := CodeInternal
	switch {
	case errors.Is(err, kvstore.ErrNotFound):
		code = CodeNotFound
	case errors.Is(err, kvstore.ErrNotIndeterminate):
		code = CodeNotIndeterminate
	case errors.Is(err, kvstore.ErrInvalid):
		code = CodeInvalid
	case errors.Is(err, kvstore.ErrTooLarge):
		code = CodeTooLarge
	case errors.Is(err, kvstore.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		code = CodeUnavailable
	}
	return &Error{Code: code, Message: err.Error()}
}

// decodeRequest reads one JSON request into v, strictly: a member v does not
// have, or anything after the request's value, makes it a bad request. So a
// message that is not an admin request (a CloudEvent, which has a tenant member
// too) is refused rather than read for the members it shares with one.
func decodeRequest(data []byte, v any) *Error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("the request is not the JSON expected: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("the request is not the JSON expected: data after its value")
	}
	return nil
}

func checkTenantKey(tenant, key string) *Error {
	if err := events.CheckToken("tenant", tenant); err != nil {
		return badRequest("%v", err)
	}
	if !hexKey.MatchString(key) {
		return badRequest("key must be 64 lower-case hex digits")
	}
	return nil
}

func (a *Service) forget(ctx context.Context, data []byte) any {
	var req ForgetRequest
	if e := decodeRequest(data, &req); e != nil {
		return ForgetResponse{Error: e}
	}
	return a.forgetRequest(ctx, req)
}

// Forget erases a tenant exactly as a request on ForgetSubject does — its
// records, then its calls and events in both streams — for callers in the
// Service's own process. It returns what Client.Forget returns: how many
// records were erased, and an *Error when that or the purge failed.
func (a *Service) Forget(ctx context.Context, tenant string) (int64, error) {
	resp := a.forgetRequest(ctx, ForgetRequest{Tenant: tenant})
	if resp.Error != nil {
		return resp.Records, resp.Error
	}
	return resp.Records, nil
}

func (a *Service) forgetRequest(ctx context.Context, req ForgetRequest) ForgetResponse {
	resp := ForgetResponse{Tenant: req.Tenant}
	if err := events.CheckToken("tenant", req.Tenant); err != nil {
		resp.Error = badRequest("%v", err)
		return resp
	}
	n, err := a.store.Forget(ctx, req.Tenant)
	if err != nil {
		resp.Error = replyErr(err)
		return resp
	}
	resp.Records = n
	for _, p := range []struct {
		stream, subject string
		optional        bool // the stream may not exist
	}{
		{wire.CallStream, wire.TenantCallSubjects(req.Tenant), false},
		{wire.LegacyCallStream, wire.TenantCallSubjects(req.Tenant), true},
		{wire.EventStream, wire.TenantEventSubjects(req.Tenant), false},
	} {
		err := a.purge(ctx, p.stream, p.subject)
		if p.optional && errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			resp.Error = &Error{Code: CodeUnavailable,
				Message: fmt.Sprintf("%d records erased, but purging %s from %s failed: %v", n, p.subject, p.stream, err)}
			return resp
		}
	}
	a.log.Info("admin: tenant forgotten", "tenant", req.Tenant, "records", n)
	return resp
}

func (a *Service) purge(ctx context.Context, stream, subject string) error {
	if a.js == nil {
		return errNoJetStream
	}
	s, err := a.js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	return s.Purge(ctx, jetstream.WithPurgeSubject(subject))
}

func (a *Service) inspect(ctx context.Context, data []byte) any {
	var req InspectRequest
	if e := decodeRequest(data, &req); e != nil {
		return InspectResponse{Error: e}
	}
	if e := checkTenantKey(req.Tenant, req.Key); e != nil {
		return InspectResponse{Error: e}
	}
	rec, err := a.store.Get(ctx, req.Tenant, req.Key)
	if err != nil {
		return InspectResponse{Error: replyErr(err)}
	}
	return InspectResponse{Record: NewRecordInfo(rec)}
}

func (a *Service) resolve(ctx context.Context, data []byte) any {
	var req ResolveRequest
	if e := decodeRequest(data, &req); e != nil {
		return ResolveResponse{Error: e}
	}
	return a.resolveRequest(ctx, req)
}

// Resolve settles an indeterminate key exactly as a request on ResolveSubject
// does — the same checks, the store's resolution, the resolved audit event —
// for callers inside the executor's process (the web console). It returns what
// Client.Resolve returns: the record, and an *Error (matching
// kvstore.ErrNotIndeterminate, ErrAuditNotPublished, ...) when the resolution
// failed or its audit event was not stored.
func (a *Service) Resolve(ctx context.Context, req ResolveRequest) (*RecordInfo, error) {
	resp := a.resolveRequest(ctx, req)
	if resp.Error != nil {
		return resp.Record, resp.Error
	}
	return resp.Record, nil
}

func (a *Service) resolveRequest(ctx context.Context, req ResolveRequest) ResolveResponse {
	if e := checkTenantKey(req.Tenant, req.Key); e != nil {
		return ResolveResponse{Error: e}
	}
	if !req.Action.Valid() {
		return ResolveResponse{Error: badRequest("action must be %q or %q", events.ActionComplete, events.ActionRelease)}
	}
	if req.Action == events.ActionRelease && req.Outcome != "" {
		return ResolveResponse{Error: badRequest("an outcome is recorded only by %q", events.ActionComplete)}
	}
	if req.Operator == "" {
		req.Operator = DefaultOperator
	}
	// Refuse what the audit event could not carry before anything is resolved: a
	// resolution must never be applied without its audit event.
	if !utf8.ValidString(req.Operator) || utf8.RuneCountInString(req.Operator) > events.MaxOperatorLen {
		return ResolveResponse{Error: badRequest("operator must be valid UTF-8 of at most %d characters", events.MaxOperatorLen)}
	}
	rec, err := a.store.Resolve(ctx, req.Tenant, req.Key, kvstore.Resolution{
		Release: req.Action == events.ActionRelease, Outcome: req.Outcome,
	})
	if err != nil {
		return ResolveResponse{Error: replyErr(err)}
	}
	a.log.Info("admin: key resolved", "tenant", req.Tenant, "key", req.Key, "action", req.Action, "operator", req.Operator)
	resp := ResolveResponse{Record: NewRecordInfo(rec)}
	audit := events.Answer{
		Kind: events.KindResolved, Tenant: req.Tenant, Key: req.Key, Action: req.Action,
		Operator: req.Operator, Tool: rec.Tool, RunID: rec.RunID, CallID: rec.CallID, Time: time.Now().UTC(),
	}
	if req.Action == events.ActionComplete {
		audit.Outcome = req.Outcome
	}
	if err := a.publishAudit(ctx, audit); err != nil {
		a.log.Error("admin: the resolved event was not published", "tenant", req.Tenant, "key", req.Key, "error", err)
		resp.Error = &Error{Code: CodeAuditFailed, Message: err.Error()}
	}
	return resp
}

// Publishing a resolved event: this many attempts, the first pause 50ms and
// doubling (at most a second).
const auditAttempts = 3

var auditBackoff = backoff.Backoff{Initial: 50 * time.Millisecond, Max: time.Second}

// publishAudit stores a resolved event (in structured mode, as the executors
// answer by default), trying a few times.
func (a *Service) publishAudit(ctx context.Context, ev events.Answer) error {
	if a.js == nil {
		return errNoJetStream
	}
	msg, err := wire.AnswerMsg(ev, a.cfg.Source, wire.Structured)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		_, err = a.js.PublishMsg(ctx, msg)
		if err == nil || attempt == auditAttempts || retry.Permanent(err) || !backoff.Sleep(ctx, auditBackoff.Delay(attempt)) {
			return err
		}
	}
}

func (a *Service) list(ctx context.Context, data []byte) any {
	var req ListRequest
	if e := decodeRequest(data, &req); e != nil {
		return ListResponse{Error: e}
	}
	return a.listRequest(ctx, req, int(a.js.Conn().MaxPayload()))
}

// List returns the records a request on ListSubject would, for callers inside
// the executor's process (the web console). Errors are *Error, as
// Client.List's.
func (a *Service) List(ctx context.Context, req ListRequest) (*ListResponse, error) {
	resp := a.listRequest(ctx, req, 0)
	if resp.Error != nil {
		return nil, resp.Error
	}
	return &resp, nil
}

// listReplySlack is room left in a list reply for what surrounds the records.
const listReplySlack = 4 << 10

// listRequest lists the records req asks for. With maxBytes > 0 it returns no
// more records than fit a reply of that size, saying More if it left some out.
func (a *Service) listRequest(ctx context.Context, req ListRequest, maxBytes int) ListResponse {
	if err := events.CheckToken("tenant", req.Tenant); err != nil {
		return ListResponse{Error: badRequest("%v", err)}
	}
	if req.State == "" {
		req.State = kvstore.StateIndeterminate
	}
	if !req.State.Valid() {
		return ListResponse{Error: badRequest("state must be %q, %q or %q", kvstore.StateIndeterminate, kvstore.StateClaimed,
			kvstore.StateCompleted)}
	}
	switch {
	case req.Limit < 0:
		return ListResponse{Error: badRequest("limit must not be negative")}
	case req.Limit == 0:
		req.Limit = DefaultListLimit
	case req.Limit > MaxListLimit:
		req.Limit = MaxListLimit
	}
	lister, ok := a.store.(kvstore.Lister)
	if !ok {
		return ListResponse{Error: &Error{Code: CodeUnsupported, Message: "the executor's store cannot list records"}}
	}
	recs, err := lister.List(ctx, req.Tenant, req.State, req.Limit+1)
	if err != nil {
		return ListResponse{Error: replyErr(err)}
	}
	resp := ListResponse{Records: []*RecordInfo{}, Now: time.Now().UTC()}
	if len(recs) > req.Limit {
		recs, resp.More = recs[:req.Limit], true
	}
	size := 0
	for _, r := range recs {
		ri := NewRecordInfo(r)
		if maxBytes > 0 {
			b, _ := json.Marshal(ri)
			if size += len(b) + 1; size > maxBytes-listReplySlack {
				resp.More = true
				break
			}
		}
		resp.Records = append(resp.Records, ri)
	}
	return resp
}
