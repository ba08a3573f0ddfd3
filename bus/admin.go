package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/kvstore"
)

// Admin subjects. Requests and replies are JSON; deployments grant publish on
// them to admin credentials only (permissions are the server's job).
const (
	// AdminForgetSubject takes a ForgetRequest: erase a tenant.
	AdminForgetSubject = "toolexec.admin.forget"
	// AdminInspectSubject takes an InspectRequest: read one key's record.
	AdminInspectSubject = "toolexec.admin.inspect"
	// AdminResolveSubject takes a ResolveRequest: settle an indeterminate key.
	AdminResolveSubject = "toolexec.admin.resolve"
	// AdminListSubject takes a ListRequest: a tenant's records in one state
	// (indeterminate unless asked otherwise).
	AdminListSubject = "toolexec.admin.list"
	// AdminSubjects matches every admin subject.
	AdminSubjects = "toolexec.admin.>"

	// DefaultAdminQueue is the queue group the executors' admin responders share,
	// so that one executor answers each request.
	DefaultAdminQueue = "toolexec-admin"
	// DefaultAdminTimeout bounds the work for one admin request.
	DefaultAdminTimeout = 30 * time.Second
	// DefaultOperator names the operator of a resolution that names none.
	DefaultOperator = "admin"
	// DefaultListLimit is how many records a ListRequest without a Limit gets;
	// MaxListLimit is the most one request gets.
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// Codes of an AdminError, each matching a kvstore error (or ErrAuditNotPublished)
// with errors.Is.
const (
	AdminCodeInvalid          = "invalid"           // kvstore.ErrInvalid
	AdminCodeNotFound         = "not_found"         // kvstore.ErrNotFound
	AdminCodeNotIndeterminate = "not_indeterminate" // kvstore.ErrNotIndeterminate
	AdminCodeTooLarge         = "too_large"         // kvstore.ErrTooLarge
	AdminCodeUnavailable      = "unavailable"       // kvstore.ErrUnavailable
	AdminCodeAuditFailed      = "audit_failed"      // ErrAuditNotPublished
	AdminCodeUnsupported      = "unsupported"       // errors.ErrUnsupported
	AdminCodeInternal         = "internal"
)

// AdminError is an admin request's failure as it travels in a reply.
type AdminError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error returns the message with its code.
func (e *AdminError) Error() string { return fmt.Sprintf("bus: admin: %s: %s", e.Code, e.Message) }

// Is matches the kvstore error (or ErrAuditNotPublished) that e's code stands
// for, so that callers branch on errors.Is(err, kvstore.ErrNotFound) whether the
// store was local or behind an admin request.
func (e *AdminError) Is(target error) bool {
	switch e.Code {
	case AdminCodeInvalid:
		return target == kvstore.ErrInvalid
	case AdminCodeNotFound:
		return target == kvstore.ErrNotFound
	case AdminCodeNotIndeterminate:
		return target == kvstore.ErrNotIndeterminate
	case AdminCodeTooLarge:
		return target == kvstore.ErrTooLarge
	case AdminCodeUnavailable:
		return target == kvstore.ErrUnavailable
	case AdminCodeAuditFailed:
		return target == ErrAuditNotPublished
	case AdminCodeUnsupported:
		return target == errors.ErrUnsupported
	}
	return false
}

// ForgetRequest asks to erase every record of Tenant, and its calls and events
// from both streams.
type ForgetRequest struct {
	Tenant string `json:"tenant"`
}

// ForgetResponse says how many records were erased (-1 when the store cannot
// tell).
type ForgetResponse struct {
	Tenant  string      `json:"tenant"`
	Records int64       `json:"records"`
	Error   *AdminError `json:"error,omitempty"`
}

// InspectRequest asks for the record of one key.
type InspectRequest struct {
	Tenant string `json:"tenant"`
	Key    string `json:"key"`
}

// InspectResponse carries the record, or the error.
type InspectResponse struct {
	Record *RecordInfo `json:"record,omitempty"`
	Error  *AdminError `json:"error,omitempty"`
}

// ResolveRequest asks to settle an indeterminate key: complete it with Outcome,
// or release it so that the next call runs the tool.
type ResolveRequest struct {
	Tenant string        `json:"tenant"`
	Key    string        `json:"key"`
	Action events.Action `json:"action"`
	// Outcome is recorded with ActionComplete; it must be empty with
	// ActionRelease.
	Outcome string `json:"outcome,omitempty"`
	// Operator names who decided, for the audit event; default DefaultOperator.
	Operator string `json:"operator,omitempty"`
}

// ResolveResponse carries the record as it now is (for a release, as it was),
// or the error. With AdminCodeAuditFailed the resolution was applied and Record
// is set, but its resolved event was not stored.
type ResolveResponse struct {
	Record *RecordInfo `json:"record,omitempty"`
	Error  *AdminError `json:"error,omitempty"`
}

// ListRequest asks for the live records of Tenant in State, oldest first by
// their last write.
type ListRequest struct {
	Tenant string `json:"tenant"`
	// State is the state listed; default kvstore.StateIndeterminate, the records
	// that wait for an operator.
	State kvstore.State `json:"state,omitempty"`
	// Limit bounds the records returned; default DefaultListLimit, at most
	// MaxListLimit.
	Limit int `json:"limit,omitempty"`
}

// ListResponse carries the records, oldest first, or the error. More says that
// the tenant has more records in the state than were returned (beyond Limit,
// or beyond what one reply can carry). Now is the executor's clock when it
// listed, so that a record's age (Now - UpdatedAt) is judged by one clock.
type ListResponse struct {
	Records []*RecordInfo `json:"records"`
	More    bool          `json:"more,omitempty"`
	Now     time.Time     `json:"now"`
	Error   *AdminError   `json:"error,omitempty"`
}

// RecordInfo is an idempotency record as admin replies show it: kvstore.Record
// in JSON, never the call's arguments (no record holds them).
type RecordInfo struct {
	Tenant       string        `json:"tenant"`
	Key          string        `json:"key"`
	State        kvstore.State `json:"state"`
	Outcome      string        `json:"outcome,omitempty"`
	Reason       string        `json:"reason,omitempty"`
	BodyEntered  bool          `json:"body_entered,omitempty"`
	CheckDigest  string        `json:"check_digest,omitempty"`
	Tool         string        `json:"tool,omitempty"`
	RunID        string        `json:"run_id,omitempty"`
	CallID       string        `json:"call_id,omitempty"`
	Holder       string        `json:"holder,omitempty"`
	Lease        string        `json:"lease,omitempty"`
	LeaseUntil   *time.Time    `json:"lease_until,omitempty"`
	LeaseExpired bool          `json:"lease_expired,omitempty"`
	Revision     uint64        `json:"revision"`
	CreatedAt    *time.Time    `json:"created_at,omitempty"`
	UpdatedAt    *time.Time    `json:"updated_at,omitempty"`
	ExpiresAt    *time.Time    `json:"expires_at,omitempty"`
}

// NewRecordInfo converts a store's record.
func NewRecordInfo(r kvstore.Record) *RecordInfo {
	t := func(v time.Time) *time.Time {
		if v.IsZero() {
			return nil
		}
		return &v
	}
	ri := &RecordInfo{
		Tenant: r.Tenant, Key: r.Digest, State: r.State, Outcome: r.Outcome, Reason: r.Reason,
		BodyEntered: r.BodyEntered, CheckDigest: r.CheckDigest, Tool: r.Tool, RunID: r.RunID, CallID: r.CallID,
		Holder: r.Holder, LeaseUntil: t(r.LeaseUntil), LeaseExpired: r.LeaseExpired, Revision: r.Revision,
		CreatedAt: t(r.CreatedAt), UpdatedAt: t(r.UpdatedAt), ExpiresAt: t(r.ExpiresAt),
	}
	if r.Lease > 0 {
		ri.Lease = r.Lease.String()
	}
	return ri
}

// AdminConfig configures the admin responder. The zero value is usable.
type AdminConfig struct {
	// Queue is the queue group shared by the executors' responders; default
	// DefaultAdminQueue.
	Queue string
	// Source is the CloudEvents source of resolved events; default
	// DefaultAnswerSource.
	Source string
	// Timeout bounds the work for one request; default DefaultAdminTimeout.
	Timeout time.Duration
	// Logger receives one line per request; default slog.Default().
	Logger *slog.Logger
}

// Admin answers admin requests from a kvstore.Store. Every executor may run one:
// they share a queue group, so each request is answered once.
type Admin struct {
	js    jetstream.JetStream
	store kvstore.Store
	cfg   AdminConfig
	log   *slog.Logger
	subs  []*nats.Subscription
}

// ServeAdmin subscribes to the admin subjects on js's connection and answers
// requests from store until Close. It returns an error matching
// ErrInvalidConfig if js or store is nil, and the subscription's error if the
// server refuses it.
func ServeAdmin(js jetstream.JetStream, store kvstore.Store, cfg AdminConfig) (*Admin, error) {
	if js == nil || store == nil {
		return nil, invalidConfig("admin: a JetStream context and a store are required")
	}
	a, err := NewAdmin(js, store, cfg)
	if err != nil {
		return nil, err
	}
	nc := js.Conn()
	for subject, h := range map[string]func(context.Context, []byte) any{
		AdminForgetSubject:  a.forget,
		AdminInspectSubject: a.inspect,
		AdminResolveSubject: a.resolve,
		AdminListSubject:    a.list,
	} {
		sub, err := nc.QueueSubscribe(subject, a.cfg.Queue, func(m *nats.Msg) {
			ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Timeout)
			defer cancel()
			reply, err := json.Marshal(h(ctx, m.Data))
			if err != nil {
				reply = []byte(`{"error":{"code":"internal","message":"encoding the reply failed"}}`)
			}
			if err := m.Respond(reply); err != nil {
				a.log.Warn("admin reply failed", "subject", m.Subject, "error", err)
			}
		})
		if err != nil {
			a.Close()
			return nil, fmt.Errorf("bus: admin: subscribing to %s: %w", subject, err)
		}
		a.subs = append(a.subs, sub)
	}
	if err := nc.Flush(); err != nil {
		a.Close()
		return nil, fmt.Errorf("bus: admin: %w", err)
	}
	return a, nil
}

// errNoJetStream is why an Admin made by NewAdmin without a JetStream context
// publishes no resolved event and purges no stream.
var errNoJetStream = errors.New("no NATS connection")

// NewAdmin returns an Admin on store for callers in its own process (an
// operator's tool working on the store directly): unlike ServeAdmin's, it
// answers nothing from the bus. js publishes the resolved events of Resolve and
// purges the streams for Forget; it may be nil when NATS cannot be reached, and
// then Resolve and Forget still change the store and report that the event was
// not published (ErrAuditNotPublished) or the streams were not purged. It
// returns an error matching ErrInvalidConfig if store is nil.
func NewAdmin(js jetstream.JetStream, store kvstore.Store, cfg AdminConfig) (*Admin, error) {
	if store == nil {
		return nil, invalidConfig("admin: a store is required")
	}
	if cfg.Queue == "" {
		cfg.Queue = DefaultAdminQueue
	}
	if cfg.Source == "" {
		cfg.Source = DefaultAnswerSource
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultAdminTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Admin{js: js, store: store, cfg: cfg, log: cfg.Logger}, nil
}

// Close stops answering: requests being answered finish, new ones go to other
// executors.
func (a *Admin) Close() error {
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

func badRequest(format string, args ...any) *AdminError {
	return &AdminError{Code: AdminCodeInvalid, Message: fmt.Sprintf(format, args...)}
}

// adminErr translates a store error for the reply.
func adminErr(err error) *AdminError {
	code := AdminCodeInternal
	switch {
	case errors.Is(err, kvstore.ErrNotFound):
		code = AdminCodeNotFound
	case errors.Is(err, kvstore.ErrNotIndeterminate):
		code = AdminCodeNotIndeterminate
	case errors.Is(err, kvstore.ErrInvalid):
		code = AdminCodeInvalid
	case errors.Is(err, kvstore.ErrTooLarge):
		code = AdminCodeTooLarge
	case errors.Is(err, kvstore.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		code = AdminCodeUnavailable
	}
	return &AdminError{Code: code, Message: err.Error()}
}

func decodeRequest(data []byte, v any) *AdminError {
	if err := json.Unmarshal(data, v); err != nil {
		return badRequest("the request is not the JSON expected: %v", err)
	}
	return nil
}

func checkTenantKey(tenant, key string) *AdminError {
	if err := events.CheckToken("tenant", tenant); err != nil {
		return badRequest("%v", err)
	}
	if !hexKey.MatchString(key) {
		return badRequest("key must be 64 lower-case hex digits")
	}
	return nil
}

func (a *Admin) forget(ctx context.Context, data []byte) any {
	var req ForgetRequest
	if e := decodeRequest(data, &req); e != nil {
		return ForgetResponse{Error: e}
	}
	return a.forgetRequest(ctx, req)
}

// Forget erases a tenant exactly as a request on AdminForgetSubject does — its
// records, then its calls and events in both streams — for callers in the
// Admin's own process. It returns what Client.Forget returns: how many records
// were erased, and an *AdminError when that or the purge failed.
func (a *Admin) Forget(ctx context.Context, tenant string) (int64, error) {
	resp := a.forgetRequest(ctx, ForgetRequest{Tenant: tenant})
	if resp.Error != nil {
		return resp.Records, resp.Error
	}
	return resp.Records, nil
}

func (a *Admin) forgetRequest(ctx context.Context, req ForgetRequest) ForgetResponse {
	resp := ForgetResponse{Tenant: req.Tenant}
	if err := events.CheckToken("tenant", req.Tenant); err != nil {
		resp.Error = badRequest("%v", err)
		return resp
	}
	n, err := a.store.Forget(ctx, req.Tenant)
	if err != nil {
		resp.Error = adminErr(err)
		return resp
	}
	resp.Records = n
	for _, p := range []struct{ stream, subject string }{
		{wire.CallStream, wire.TenantCallSubjects(req.Tenant)},
		{wire.EventStream, wire.TenantEventSubjects(req.Tenant)},
	} {
		if err := a.purge(ctx, p.stream, p.subject); err != nil {
			resp.Error = &AdminError{Code: AdminCodeUnavailable,
				Message: fmt.Sprintf("%d records erased, but purging %s from %s failed: %v", n, p.subject, p.stream, err)}
			return resp
		}
	}
	a.log.Info("admin: tenant forgotten", "tenant", req.Tenant, "records", n)
	return resp
}

func (a *Admin) purge(ctx context.Context, stream, subject string) error {
	if a.js == nil {
		return errNoJetStream
	}
	s, err := a.js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	return s.Purge(ctx, jetstream.WithPurgeSubject(subject))
}

func (a *Admin) inspect(ctx context.Context, data []byte) any {
	var req InspectRequest
	if e := decodeRequest(data, &req); e != nil {
		return InspectResponse{Error: e}
	}
	if e := checkTenantKey(req.Tenant, req.Key); e != nil {
		return InspectResponse{Error: e}
	}
	rec, err := a.store.Get(ctx, req.Tenant, req.Key)
	if err != nil {
		return InspectResponse{Error: adminErr(err)}
	}
	return InspectResponse{Record: NewRecordInfo(rec)}
}

func (a *Admin) resolve(ctx context.Context, data []byte) any {
	var req ResolveRequest
	if e := decodeRequest(data, &req); e != nil {
		return ResolveResponse{Error: e}
	}
	return a.resolveRequest(ctx, req)
}

// Resolve settles an indeterminate key exactly as a request on
// AdminResolveSubject does — the same checks, the store's resolution, the
// resolved audit event — for callers inside the executor's process (the web
// console). It returns what Client.Resolve returns: the record, and an
// *AdminError (matching kvstore.ErrNotIndeterminate, ErrAuditNotPublished,
// ...) when the resolution failed or its audit event was not stored.
func (a *Admin) Resolve(ctx context.Context, req ResolveRequest) (*RecordInfo, error) {
	resp := a.resolveRequest(ctx, req)
	if resp.Error != nil {
		return resp.Record, resp.Error
	}
	return resp.Record, nil
}

func (a *Admin) resolveRequest(ctx context.Context, req ResolveRequest) ResolveResponse {
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
		return ResolveResponse{Error: adminErr(err)}
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
		resp.Error = &AdminError{Code: AdminCodeAuditFailed, Message: err.Error()}
	}
	return resp
}

// publishAudit stores a resolved event, trying a few times.
func (a *Admin) publishAudit(ctx context.Context, ev events.Answer) error {
	if a.js == nil {
		return errNoJetStream
	}
	msg, err := answerMsg(ev, a.cfg.Source, wire.Structured)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		_, err = a.js.PublishMsg(ctx, msg, jetstream.WithMsgID(wire.MsgID(ev)), jetstream.WithExpectStream(wire.EventStream))
		if err == nil || attempt == 3 || permanentPublishError(err) || !sleep(ctx, backoff(attempt)) {
			return err
		}
	}
}

func (a *Admin) list(ctx context.Context, data []byte) any {
	var req ListRequest
	if e := decodeRequest(data, &req); e != nil {
		return ListResponse{Error: e}
	}
	return a.listRequest(ctx, req, int(a.js.Conn().MaxPayload()))
}

// List returns the records a request on AdminListSubject would, for callers
// inside the executor's process (the web console). Errors are *AdminError, as
// Client.List's.
func (a *Admin) List(ctx context.Context, req ListRequest) (*ListResponse, error) {
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
func (a *Admin) listRequest(ctx context.Context, req ListRequest, maxBytes int) ListResponse {
	if err := events.CheckToken("tenant", req.Tenant); err != nil {
		return ListResponse{Error: badRequest("%v", err)}
	}
	if req.State == "" {
		req.State = kvstore.StateIndeterminate
	}
	if !req.State.Valid() {
		return ListResponse{Error: badRequest("state must be %q, %q or %q", kvstore.StateIndeterminate, kvstore.StateClaimed, kvstore.StateCompleted)}
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
		return ListResponse{Error: &AdminError{Code: AdminCodeUnsupported, Message: "the executor's store cannot list records"}}
	}
	recs, err := lister.List(ctx, req.Tenant, req.State, req.Limit+1)
	if err != nil {
		return ListResponse{Error: adminErr(err)}
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

// List returns the live records of a tenant in one state (indeterminate by
// default), oldest first, with the executor's clock to judge their ages (see
// ListResponse). Errors are as for Forget; a store that cannot list matches
// errors.ErrUnsupported.
func (c *Client) List(ctx context.Context, req ListRequest) (*ListResponse, error) {
	var resp ListResponse
	if err := c.adminRequest(ctx, AdminListSubject, req, &resp); err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	return &resp, nil
}

// Forget asks an executor to erase every record of tenant and purge its calls
// and events from both streams, and returns how many records were erased (-1 if
// the store cannot tell). Errors: ErrNoAdmin when no executor answers, an
// *AdminError (matching kvstore.ErrInvalid, kvstore.ErrUnavailable, ...), or the
// request's error.
func (c *Client) Forget(ctx context.Context, tenant string) (int64, error) {
	var resp ForgetResponse
	if err := c.adminRequest(ctx, AdminForgetSubject, ForgetRequest{Tenant: tenant}, &resp); err != nil {
		return 0, err
	}
	if resp.Error != nil {
		return resp.Records, resp.Error
	}
	return resp.Records, nil
}

// Inspect returns the record of tenant's key (the 64-hex digest). Errors are as
// for Forget; an unknown key matches kvstore.ErrNotFound.
func (c *Client) Inspect(ctx context.Context, tenant, key string) (*RecordInfo, error) {
	var resp InspectResponse
	if err := c.adminRequest(ctx, AdminInspectSubject, InspectRequest{Tenant: tenant, Key: key}, &resp); err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	return resp.Record, nil
}

// Resolve settles an indeterminate key and returns its record (see
// ResolveResponse). A key that is not indeterminate matches
// kvstore.ErrNotIndeterminate; a resolution applied whose audit event was not
// stored returns the record with an error matching ErrAuditNotPublished. Other
// errors are as for Forget.
func (c *Client) Resolve(ctx context.Context, req ResolveRequest) (*RecordInfo, error) {
	var resp ResolveResponse
	if err := c.adminRequest(ctx, AdminResolveSubject, req, &resp); err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return resp.Record, resp.Error
	}
	return resp.Record, nil
}

func (c *Client) adminRequest(ctx context.Context, subject string, req, resp any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("bus: admin: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultAdminTimeout)
		defer cancel()
	}
	m, err := c.nc.RequestWithContext(ctx, subject, data)
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("%w (%s)", ErrNoAdmin, subject)
	}
	if err != nil {
		return fmt.Errorf("bus: admin request %s: %w", subject, err)
	}
	if err := json.Unmarshal(m.Data, resp); err != nil {
		return fmt.Errorf("bus: admin reply on %s is not JSON: %w", subject, err)
	}
	return nil
}
