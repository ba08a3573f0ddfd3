package bus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/time/rate"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/tool"
)

// Defaults of [RelayLimits].
const (
	DefaultMaxAsks        = 16
	DefaultMaxAskBytes    = 64 << 10
	DefaultMaxAnswerBytes = 512 << 10
	DefaultTakeWait       = 5 * time.Second
	DefaultAskWait        = 10 * time.Minute
	DefaultNoteEvery      = 250 * time.Millisecond
	DefaultMaxNotes       = 100
	DefaultMaxNoteBytes   = 4 << 10
	// logBurst is how many log notes may come at once before NoteEvery
	// spaces them.
	logBurst = 10
)

// RelayLimits bound what the body of one call may send its caller
// (docs/PROTOCOL.md §13). Zero fields take the defaults.
type RelayLimits struct {
	// MaxAsks bounds the requests (elicitation, sampling) one call may make;
	// default DefaultMaxAsks. Further ones are refused at once.
	MaxAsks int
	// MaxAskBytes bounds a request's params; default DefaultMaxAskBytes.
	MaxAskBytes int
	// MaxAnswerBytes bounds a caller's answer; default DefaultMaxAnswerBytes.
	MaxAnswerBytes int
	// TakeWait is how long a request waits for a caller to take it before it
	// is refused; default DefaultTakeWait.
	TakeWait time.Duration
	// AskWait bounds the wait for an answer once taken, within the body's own
	// deadline (the tool's timeout); default DefaultAskWait.
	AskWait time.Duration
	// NoteEvery is the least time between two progress notes of a call (the
	// latest wins meanwhile), and the pace of log notes after a burst of ten;
	// default DefaultNoteEvery.
	NoteEvery time.Duration
	// MaxNotes bounds the notes (progress and log) recorded for one call;
	// default DefaultMaxNotes. What comes after is dropped, and one last log
	// note says how many were.
	MaxNotes int
	// MaxNoteBytes bounds a log notification's params; a larger one is
	// dropped. Default DefaultMaxNoteBytes.
	MaxNoteBytes int
}

func (l RelayLimits) withDefaults() RelayLimits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxAsks, DefaultMaxAsks)
	def(&l.MaxAskBytes, DefaultMaxAskBytes)
	def(&l.MaxAnswerBytes, DefaultMaxAnswerBytes)
	defd(&l.TakeWait, DefaultTakeWait)
	defd(&l.AskWait, DefaultAskWait)
	defd(&l.NoteEvery, DefaultNoteEvery)
	def(&l.MaxNotes, DefaultMaxNotes)
	def(&l.MaxNoteBytes, DefaultMaxNoteBytes)
	return l
}

// relaying is the dispatch.Runner a worker's settler runs calls with: each
// call runs with a relay between its body and its caller (see relay), closed
// once the call is run, so that its last notes go out before its answer.
type relaying struct {
	r      dispatch.Runner
	nc     *nats.Conn
	log    *slog.Logger
	lim    RelayLimits
	source string
}

// Run runs c with r, its body given a relay to its caller.
func (rr *relaying) Run(ctx context.Context, c events.Call) (dispatch.Result, error) {
	rl := newRelay(rr.nc, rr.log, rr.lim, rr.source, c)
	defer rl.close()
	return rr.r.Run(tool.WithCaller(ctx, rl), c)
}

// relay is the tool.Caller of one call an executor runs: it sends the
// call's caller what the body asks on the call's interaction subject, takes
// the caller's answers on its respond subject, and records the body's
// notifications as notes. Every subject is derived from the call's own
// tenant, tool and call id.
type relay struct {
	nc     *nats.Conn
	log    *slog.Logger
	lim    RelayLimits
	source string
	call   events.Call
	nonce  string // tells this run's notes from those of another delivery of the call

	subMu sync.Mutex         // held while the respond subscription is made
	sub   *nats.Subscription // on the respond subject, from the first ask; set under subMu and mu

	mu       sync.Mutex // protects the fields below
	closed   bool
	asks     int
	pending  map[string]*pendingAsk
	seq      int             // notes published
	dropped  int             // notes dropped
	progress json.RawMessage // the latest progress not yet published
	lastProg time.Time       // when the last progress note was published
	timer    *time.Timer     // publishes progress when it is due
	logs     *rate.Limiter
}

// pendingAsk is a request waiting for its caller.
type pendingAsk struct {
	taken    chan struct{} // closed when a caller took it
	isTaken  bool
	answered bool
	answer   chan wire.Respond // one answer
}

var _ tool.Caller = (*relay)(nil)

func newRelay(nc *nats.Conn, log *slog.Logger, lim RelayLimits, source string, c events.Call) *relay {
	lim = lim.withDefaults()
	return &relay{
		nc: nc, log: log, lim: lim, source: source, call: c, nonce: newInteractionID(), pending: map[string]*pendingAsk{},
		logs: rate.NewLimiter(rate.Every(lim.NoteEvery), logBurst),
	}
}

func refuse(code int, msg string) error { return &tool.CallerError{Code: code, Message: msg} }

// Ask sends the caller method and waits for its answer: see tool.Caller.
func (r *relay) Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	capability := wire.Capability(method)
	if capability == "" || !slices.Contains(r.call.Interactions, capability) {
		return nil, refuse(tool.CallerCodeMethodNotFound, "the caller of this call cannot answer "+method)
	}
	if len(params) > r.lim.MaxAskBytes {
		return nil, refuse(tool.CallerCodeInvalidParams, "the request is too large to relay to the caller")
	}
	id, p, err := r.open()
	if err != nil {
		return nil, err
	}
	defer r.forget(id)

	deadline := time.Now().Add(r.lim.AskWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	body, err := json.Marshal(wire.Ask{JSONRPC: "2.0", ID: id, Method: method, Params: params})
	if err != nil {
		return nil, refuse(tool.CallerCodeInvalidParams, "the request is not JSON: "+err.Error())
	}
	msg := nats.NewMsg(wire.InteractSubject(r.call.Tenant, r.call.Tool, r.call.CallID))
	msg.Header.Set(wire.DeadlineHeader, deadline.UTC().Format(time.RFC3339Nano))
	msg.Data = body
	if err := r.nc.PublishMsg(msg); err != nil {
		return nil, refuse(tool.CallerCodeInternal, "the request could not be sent to the caller: "+err.Error())
	}
	take := time.NewTimer(r.lim.TakeWait)
	defer take.Stop()
	wait := time.NewTimer(time.Until(deadline))
	defer wait.Stop()
	taken, takeBy := p.taken, take.C
	for {
		select {
		case <-taken:
			taken, takeBy = nil, nil // taken: wait for the answer only
		case <-takeBy:
			return nil, refuse(tool.CallerCodeInternal, "no client took the request")
		case a := <-p.answer:
			if a.Error != nil {
				return nil, &tool.CallerError{Code: a.Error.Code, Message: a.Error.Message, Data: a.Error.Data}
			}
			return a.Result, nil
		case <-wait.C:
			return nil, refuse(tool.CallerCodeInternal, "the caller did not answer in time")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// open registers a new request, subscribing to the respond subject first if
// this is the call's first. It refuses once MaxAsks were made.
func (r *relay) open() (string, *pendingAsk, error) {
	if err := r.listen(); err != nil {
		return "", nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return "", nil, refuse(tool.CallerCodeInternal, "the call is over")
	case r.asks >= r.lim.MaxAsks:
		return "", nil, refuse(tool.CallerCodeInvalidParams, "the call made as many requests of its caller as it may")
	}
	r.asks++
	id := newInteractionID()
	p := &pendingAsk{taken: make(chan struct{}), answer: make(chan wire.Respond, 1)}
	r.pending[id] = p
	return id, p, nil
}

// listen subscribes to the respond subject once, without holding r.mu
// (notifications go on meanwhile). The subscription reaches the server
// before any request does, or a fast take would find no one.
func (r *relay) listen() error {
	r.subMu.Lock()
	defer r.subMu.Unlock()
	r.mu.Lock()
	done, closed := r.sub != nil, r.closed
	r.mu.Unlock()
	if done || closed {
		return nil // closed: open refuses
	}
	sub, err := r.nc.Subscribe(wire.RespondSubject(r.call.Tenant, r.call.Tool, r.call.CallID), r.onRespond)
	if err == nil {
		if err = r.nc.Flush(); err != nil {
			_ = sub.Unsubscribe()
		}
	}
	if err != nil {
		return refuse(tool.CallerCodeInternal, "cannot hear the caller: "+err.Error())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		_ = sub.Unsubscribe()
		return nil
	}
	r.sub = sub
	return nil
}

func (r *relay) forget(id string) {
	r.mu.Lock()
	delete(r.pending, id)
	r.mu.Unlock()
}

// onRespond handles a take or an answer. One naming no request of this
// executor's is left unanswered: another executor may have sent it.
func (r *relay) onRespond(m *nats.Msg) {
	reply := func(code, msg string) {
		var b []byte
		if code == "" {
			b = []byte("{}")
		} else {
			b, _ = json.Marshal(wire.RespondReply{Error: &wire.RespondError{Code: code, Message: msg}})
		}
		if m.Reply != "" {
			_ = m.Respond(b)
		}
	}
	if len(m.Data) > r.lim.MaxAnswerBytes {
		reply(wire.RespondBadRequest, "the answer is too large")
		return
	}
	var a wire.Respond
	if err := json.Unmarshal(m.Data, &a); err != nil {
		reply(wire.RespondBadRequest, "not a response: "+err.Error())
		return
	}
	if err := wire.CheckRespond(a); err != nil {
		reply(wire.RespondBadRequest, err.Error())
		return
	}
	r.mu.Lock()
	p := r.pending[a.ID]
	switch {
	case p == nil:
		r.mu.Unlock()
		return
	case a.Take && p.isTaken, !a.Take && p.answered:
		r.mu.Unlock()
		reply(wire.RespondTaken, "another caller took the request")
		return
	case a.Take:
		p.isTaken = true
		close(p.taken)
	default:
		p.answered = true
		p.answer <- a
	}
	r.mu.Unlock()
	reply("", "")
}

// Notify records a progress or log notification as a note: see tool.Caller.
func (r *relay) Notify(method string, params json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	switch method {
	case "notifications/progress":
		if r.seq >= r.lim.MaxNotes {
			r.dropped++
			return
		}
		r.progress = params // the latest wins
		if due := r.lastProg.Add(r.lim.NoteEvery); time.Now().Before(due) {
			if r.timer == nil {
				r.timer = time.AfterFunc(time.Until(due), r.flushProgress)
			}
			return
		}
		r.publishProgress()
	case "notifications/message":
		if len(params) > r.lim.MaxNoteBytes || r.seq >= r.lim.MaxNotes || !r.logs.Allow() {
			r.dropped++
			return
		}
		var p struct {
			Level  string          `json:"level"`
			Logger string          `json:"logger"`
			Data   json.RawMessage `json:"data"`
		}
		if json.Unmarshal(params, &p) != nil {
			r.dropped++
			return
		}
		r.publish(wire.Note{Kind: wire.NoteLog, Level: p.Level, Logger: p.Logger, Data: p.Data})
	}
}

func (r *relay) flushProgress() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timer = nil
	if !r.closed {
		r.publishProgress()
	}
}

// publishProgress publishes the latest progress, if any; r.mu is held.
func (r *relay) publishProgress() {
	if r.progress == nil {
		return
	}
	var p struct {
		Progress float64 `json:"progress"`
		Total    float64 `json:"total"`
		Message  string  `json:"message"`
	}
	raw := r.progress
	r.progress = nil
	if json.Unmarshal(raw, &p) != nil {
		r.dropped++
		return
	}
	r.lastProg = time.Now()
	r.publish(wire.Note{Kind: wire.NoteProgress, Progress: p.Progress, Total: p.Total, Message: p.Message})
}

// publish stores n as the call's next note; r.mu is held. A note is audit,
// not an answer: it is published without waiting for the stream, and one
// that fails is logged and counted as dropped.
func (r *relay) publish(n wire.Note) {
	c := r.call
	r.seq++
	n.Tenant, n.Tool, n.RunID, n.CallID, n.Seq, n.Time, n.Source = c.Tenant, c.Tool, c.RunID, c.CallID, r.seq, time.Now(), r.source
	n.ID = wire.NoteID(c.Tenant, c.Tool, c.CallID, r.nonce, n.Seq)
	b, err := wire.NoteJSON(n)
	if err == nil {
		msg := nats.NewMsg(wire.NoteSubject(n.Kind, c.Tenant, c.Tool, c.RunID, c.CallID, n.Seq))
		msg.Header.Set(nats.MsgIdHdr, n.ID)
		msg.Header.Set("Content-Type", "application/cloudevents+json")
		msg.Data = b
		err = r.nc.PublishMsg(msg)
	}
	if err != nil {
		r.dropped++
		r.log.Debug("a note of a call could not be published", "call_id", c.CallID, "error", err)
	}
}

// close ends the relay when the body is done: requests still waiting are
// refused, the latest progress is published, and a last log note says how
// many notes were dropped, if any were.
func (r *relay) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	if r.progress != nil && r.seq < r.lim.MaxNotes {
		r.publishProgress()
	}
	if r.dropped > 0 {
		data, _ := json.Marshal(map[string]any{"dropped": r.dropped,
			"message": "toolexec: notifications beyond the call's bounds were dropped"})
		r.publish(wire.Note{Kind: wire.NoteLog, Level: "warning", Logger: "toolexec", Data: data})
	}
	r.closed = true
	if r.sub != nil {
		_ = r.sub.Unsubscribe()
	}
}

// newInteractionID returns "ix_" and 32 random hex digits.
func newInteractionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "ix_" + hex.EncodeToString(b[:])
}
