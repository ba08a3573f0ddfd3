package bus

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/tool"
)

// DefaultCatalogQueue is the queue group the executors' catalog responders
// share, so that one executor answers each request.
const DefaultCatalogQueue = "toolexec-tools"

// MaxCatalogRequestBytes bounds a catalog request's JSON.
const MaxCatalogRequestBytes = 1024

// catalogReserve is what a catalog page leaves free of the connection's
// maximum payload, for the reply's own members.
const catalogReserve = 1 << 10

// Codes of a [CatalogError].
const (
	// CatalogBadRequest: the request is not what the service reads (not a JSON
	// object, an unknown member, more than MaxCatalogRequestBytes), or the
	// subject's tenant is not a valid token.
	CatalogBadRequest = "bad_request"
	// CatalogTooLarge: one tool's declaration does not fit in a reply (a
	// parameters schema near the server's maximum payload).
	CatalogTooLarge = "too_large"
)

// ToolDecl is what the executors say about one tool they serve: what a
// gateway lists for agents, and what they need to call it. It travels as JSON.
type ToolDecl struct {
	// Name is the tool's name, the last token of its call subject.
	Name string `json:"name"`
	// Description says what the tool does, for people and models.
	Description string `json:"description,omitzero"`
	// Parameters is the JSON Schema of the arguments object; {"type":"object"}
	// for a tool that declares none.
	Parameters jsontext.Value `json:"parameters"`
	// Kind is the tool's idempotency kind; empty for a tool without a policy.
	Kind tool.Kind `json:"kind,omitzero"`
	// KeyArguments are the arguments that identify the effect: absent (nil)
	// means every argument, [] none. Meaningful only with a Kind.
	KeyArguments []string `json:"key_arguments,omitzero"`
	// CheckArguments must not change between a call and its duplicates.
	CheckArguments []string `json:"check_arguments,omitzero"`
	// TimeoutMillis bounds one attempt of the body; 0 means no bound of its own.
	TimeoutMillis int64 `json:"timeout_ms,omitzero"`
	// Unavailable says that the tool is listed but not run now: the server
	// its body calls cannot be reached, and its calls are rejected
	// upstream_unavailable (tool.Registry.SetUnavailable). Absent otherwise,
	// so readers that do not know it see the tool as before.
	Unavailable bool `json:"unavailable,omitzero"`
}

// DeclOf returns t's declaration as the catalog publishes it.
func DeclOf(t *tool.Tool) ToolDecl {
	s := t.Spec()
	d := ToolDecl{Name: s.Name, Description: s.Description, TimeoutMillis: s.Timeout.Milliseconds()}
	d.Parameters = jsontext.Value(`{"type":"object"}`)
	if p := bytes.TrimSpace(s.Parameters); len(p) > 0 {
		v := jsontext.Value(bytes.Clone(p))
		if err := v.Compact(); err == nil {
			d.Parameters = v
		}
	}
	if p := s.Idempotency; p != nil {
		d.Kind, d.KeyArguments, d.CheckArguments = p.Kind, p.KeyArguments, p.CheckArguments
	}
	return d
}

// CatalogRequest asks for a page of the tools the executors serve, on
// toolexec.tools.<tenant> ([wire.CatalogSubject]). It travels as JSON and is
// read strictly.
type CatalogRequest struct {
	// After starts the page after the tool of this name (the last of the page
	// before); empty starts at the first. Tools come sorted by name.
	After string `json:"after,omitzero"`
}

// CatalogResponse is a page of tool declarations, sorted by name, or the
// error.
type CatalogResponse struct {
	Tools []ToolDecl `json:"tools"`
	// More says that tools follow the last of this page: ask again with After
	// set to its name.
	More  bool          `json:"more"`
	Error *CatalogError `json:"error,omitzero"`
}

// CatalogError is a catalog request's failure as it travels in a reply. A
// toolexec.Client returns it as it came.
type CatalogError struct {
	// Code is CatalogBadRequest or CatalogTooLarge.
	Code string `json:"code"`
	// Message says what went wrong, for people.
	Message string `json:"message"`
}

// Error returns the message with its code.
func (e *CatalogError) Error() string {
	return fmt.Sprintf("bus: catalog request: %s: %s", e.Code, e.Message)
}

// CatalogService answers catalog requests on toolexec.tools.*: the
// declarations of the tools this executor serves, for any gateway that has a
// NATS connection (an MCP gateway in another process has no registry of its
// own). Every executor serving the same tools may run one: they share a queue
// group. The tenant in the subject is checked as a token and otherwise not
// used: every tenant may call every tool, so every tenant is told of every
// tool. In a deployment with accounts, the export of toolexec.tools.* with
// account_token_position 3 lets each tenant ask on its own subject only.
//
// It answers from the registry as it stands at each request (a tool learned
// from a worker is listed from then on, a tool in conflict is not, a tool
// marked unavailable is listed with Unavailable set), encoding
// the declarations again only after the registry changed.
type CatalogService struct {
	tools    *tool.Registry
	maxBytes int // what one page's declarations may add up to
	log      *slog.Logger
	sub      *nats.Subscription

	mu      sync.Mutex // protects the fields below
	version uint64     // the registry's version the declarations were read at
	decls   []ToolDecl // sorted by name
	encoded [][]byte   // each declaration's JSON, in step with decls

	closeOnce sync.Once
}

// CatalogConfig configures a [CatalogService]. The zero value is usable.
type CatalogConfig struct {
	// Queue is the queue group shared by the executors' responders; default
	// DefaultCatalogQueue.
	Queue string
	// Logger receives requests that could not be answered; default
	// slog.Default().
	Logger *slog.Logger
}

// ServeCatalog subscribes to toolexec.tools.* on nc and answers with the
// declarations of the tools the registry serves at each request, until Close. It returns an error matching
// ErrInvalidConfig for a nil connection or registry, and the subscription's
// error if the connection refuses it.
func ServeCatalog(nc *nats.Conn, tools *tool.Registry, cfg CatalogConfig) (*CatalogService, error) {
	if nc == nil || tools == nil {
		return nil, invalidConfig("catalog: a connection and a registry are required")
	}
	if cfg.Queue == "" {
		cfg.Queue = DefaultCatalogQueue
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &CatalogService{tools: tools, log: cfg.Logger, maxBytes: max(int(nc.MaxPayload())-catalogReserve, catalogReserve)}
	if err := s.read(); err != nil {
		return nil, err
	}
	sub, err := nc.QueueSubscribe(wire.CatalogSubjects, cfg.Queue, s.handle)
	if err != nil {
		return nil, fmt.Errorf("bus: subscribing to %s: %w", wire.CatalogSubjects, err)
	}
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("bus: subscribing to %s: %w", wire.CatalogSubjects, err)
	}
	s.sub = sub
	return s, nil
}

// Close stops answering; requests go to other executors.
func (s *CatalogService) Close() error {
	var err error
	s.closeOnce.Do(func() {
		err = s.sub.Unsubscribe()
		if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrBadSubscription) {
			err = nil
		}
	})
	return err
}

func (s *CatalogService) handle(m *nats.Msg) {
	if m.Reply == "" {
		s.log.Warn("catalog request without a reply subject: not answered", "subject", m.Subject)
		return
	}
	data, err := json.Marshal(s.answer(m))
	if err != nil { // declarations were encoded once already: not expected
		data = []byte(`{"tools":[],"more":false,"error":{"code":"too_large","message":"encoding the reply failed"}}`)
	}
	if err := m.Respond(data); err != nil {
		s.log.Warn("catalog reply failed", "subject", m.Subject, "error", err)
	}
}

// read encodes the declarations of the registry's tools. s.mu is held, or s
// not yet shared.
func (s *CatalogService) read() error {
	version := s.tools.Version()
	tools := s.tools.Tools()
	decls, encoded := make([]ToolDecl, 0, len(tools)), make([][]byte, 0, len(tools))
	var errs []error
	for _, t := range tools {
		d := DeclOf(t)
		_, d.Unavailable = s.tools.Unavailable(d.Name)
		b, err := json.Marshal(d)
		if err != nil {
			errs = append(errs, fmt.Errorf("bus: encoding the declaration of tool %q: %w", d.Name, err))
			continue
		}
		decls, encoded = append(decls, d), append(encoded, b)
	}
	s.version, s.decls, s.encoded = version, decls, encoded
	return errors.Join(errs...)
}

// current returns the declarations of the registry as it stands, read again
// if it changed since they were last read.
func (s *CatalogService) current() ([]ToolDecl, [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tools.Version() != s.version {
		if err := s.read(); err != nil {
			s.log.Error("catalog: a declaration cannot be encoded; the tool is not listed", "error", err)
		}
	}
	return s.decls, s.encoded
}

// answer returns the page the request m asks for.
func (s *CatalogService) answer(m *nats.Msg) CatalogResponse {
	tenant, _ := strings.CutPrefix(m.Subject, wire.CatalogPrefix)
	if err := events.CheckToken("tenant", tenant); err != nil {
		return CatalogResponse{Tools: []ToolDecl{}, Error: &CatalogError{Code: CatalogBadRequest, Message: err.Error()}}
	}
	req, cerr := parseCatalogRequest(m.Data)
	if cerr != nil {
		return CatalogResponse{Tools: []ToolDecl{}, Error: cerr}
	}
	return s.page(req.After)
}

// page returns the declarations after the tool named after, as many as fit.
func (s *CatalogService) page(after string) CatalogResponse {
	decls, encoded := s.current()
	i := 0
	if after != "" {
		for i < len(decls) && decls[i].Name <= after {
			i++
		}
	}
	resp := CatalogResponse{Tools: []ToolDecl{}}
	size := 0
	for ; i < len(decls); i++ {
		n := len(encoded[i]) + 1
		if size+n > s.maxBytes {
			if len(resp.Tools) == 0 {
				resp.Error = &CatalogError{Code: CatalogTooLarge, Message: fmt.Sprintf(
					"the declaration of tool %q is %d bytes, more than a reply can carry (%d)", decls[i].Name, n, s.maxBytes)}
				return resp
			}
			resp.More = true
			return resp
		}
		size += n
		resp.Tools = append(resp.Tools, decls[i])
	}
	return resp
}

// parseCatalogRequest reads a request strictly: empty (the first page), or one
// JSON object of at most MaxCatalogRequestBytes with no unknown member.
func parseCatalogRequest(data []byte) (CatalogRequest, *CatalogError) {
	var req CatalogRequest
	if len(bytes.TrimSpace(data)) == 0 {
		return req, nil
	}
	if len(data) > MaxCatalogRequestBytes {
		return req,
			&CatalogError{Code: CatalogBadRequest, Message: fmt.Sprintf("the request is %d bytes, more than %d", len(data), MaxCatalogRequestBytes)}
	}
	if err := json.Unmarshal(data, &req, json.RejectUnknownMembers(true)); err != nil {
		return CatalogRequest{}, &CatalogError{Code: CatalogBadRequest, Message: fmt.Sprintf("the request is not the JSON expected: %v", err)}
	}
	return req, nil
}
