package workerset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/natstool"
)

// Defaults of a [Config].
const (
	DefaultInterval = 5 * time.Second
	DefaultWindow   = 500 * time.Millisecond
	DefaultAbsent   = 3
)

// maxReplies bounds the replies one round reads.
const maxReplies = 10_000

// ErrInvalidConfig is matched by the errors that refuse a Set's
// configuration.
var ErrInvalidConfig = errors.New("workerset: invalid configuration")

// Config configures a [Set]. The zero value is usable.
type Config struct {
	// Interval is how often Run asks the workers; default DefaultInterval.
	Interval time.Duration
	// Window is how long a round gathers replies; default DefaultWindow.
	Window time.Duration
	// Absent is how many rounds in a row a worker may go unheard before it is
	// forgotten; default DefaultAbsent.
	Absent int
	// Served names the registry's tools whose bodies workers serve, declared
	// by the executor itself (a tools file's nats: tools), each with the
	// subject its requests go to (empty: toolexec.body.<tool>).
	Served map[string]string
	// MaxReplyBytes bounds the replies of the tools learned from workers;
	// zero means natstool's default.
	MaxReplyBytes int64
	// Logger receives the tools learned and forgotten, the refusals and the
	// conflicts; default slog.Default().
	Logger *slog.Logger
	// Observer is told what each round found, for metrics; default none.
	Observer Observer
	// OnExtraReply is the learned tools' natstool.Endpoint.OnExtraReply:
	// told of a request that more than one worker answered.
	OnExtraReply func(subject string)
}

// Observer hears what a Set finds.
type Observer interface {
	// Refreshed is told, after each round, what the Set knows.
	Refreshed(Round)
	// ConflictBegan is told when a tool enters conflict.
	ConflictBegan(tool string)
}

// Round is what a Set knows after a round of discovery.
type Round struct {
	// Failed says that the round's request could not be sent: nothing
	// changed.
	Failed bool
	// Workers is how many workers are remembered.
	Workers int
	// Tools is how many tools workers serve without conflict.
	Tools int
	// Conflicts is how many tools are in conflict.
	Conflicts int
	// Refused is how many endpoints' declarations are refused.
	Refused int
}

// Set learns the tools of workers into a registry. Its methods are safe for
// concurrent use.
type Set struct {
	nc       *nats.Conn
	reg      *tool.Registry
	interval time.Duration
	window   time.Duration
	absent   int
	maxReply int64
	log      *slog.Logger
	obs      Observer
	onExtra  func(subject string)

	own    map[string]bool         // tools whose bodies the executor runs itself
	served map[string]*declaration // tools the executor declares and workers serve

	mu        sync.Mutex // serialises rounds; protects the fields below
	round     int
	workers   map[string]*workerInfo // by service id
	learned   map[string]string      // tool → the key of the declaration put in the registry
	conflicts map[string]string      // tool → the conflict set on the registry
	problems  map[string]bool        // refusals and unreadable replies logged, while they last
}

// workerInfo is what a worker said when last heard from.
type workerInfo struct {
	label  string // "worker <id> (<version>)", for messages
	heard  int    // the round it was last heard in
	claims []claim
}

// claim is one endpoint of a worker: a tool it serves, and its declaration or
// why that is refused.
type claim struct {
	worker string // the worker's label
	tool   string
	decl   *declaration // nil when refused
	err    error
}

// New returns a Set that keeps reg in step with the workers reached on nc.
// The tools reg holds now are the executor's own; those of cfg.Served must be
// among them, and are held to what workers declare. It returns an error
// matching ErrInvalidConfig for a nil connection or registry, a served tool
// the registry lacks, a served subject one cannot publish to, or a negative
// setting.
func New(nc *nats.Conn, reg *tool.Registry, cfg Config) (*Set, error) {
	if nc == nil || reg == nil {
		return nil, fmt.Errorf("%w: a connection and a registry are required", ErrInvalidConfig)
	}
	if cfg.Interval < 0 || cfg.Window < 0 || cfg.Absent < 0 || cfg.MaxReplyBytes < 0 {
		return nil, fmt.Errorf("%w: Interval, Window, Absent and MaxReplyBytes must not be negative", ErrInvalidConfig)
	}
	s := &Set{
		nc: nc, reg: reg, interval: cfg.Interval, window: cfg.Window, absent: cfg.Absent, maxReply: cfg.MaxReplyBytes,
		log: cfg.Logger, obs: cfg.Observer, onExtra: cfg.OnExtraReply, own: map[string]bool{}, served: map[string]*declaration{},
		workers: map[string]*workerInfo{}, learned: map[string]string{}, conflicts: map[string]string{}, problems: map[string]bool{},
	}
	if s.interval == 0 {
		s.interval = DefaultInterval
	}
	if s.window == 0 {
		s.window = DefaultWindow
	}
	if s.absent == 0 {
		s.absent = DefaultAbsent
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.obs == nil {
		s.obs = nopObserver{}
	}
	for _, t := range reg.Tools() {
		s.own[t.Name()] = true
	}
	for name, subject := range cfg.Served {
		t, ok := reg.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("%w: served tool %q is not in the registry", ErrInvalidConfig, name)
		}
		if subject == "" {
			subject = wire.BodySubject(name)
		} else if err := natstool.CheckSubject(subject); err != nil {
			return nil, fmt.Errorf("%w: the subject of served tool %q %v", ErrInvalidConfig, name, err)
		}
		s.served[name] = declare(t.Spec(), subject)
		delete(s.own, name)
	}
	return s, nil
}

// Run refreshes the Set every Interval until ctx ends. A round that fails is
// logged; the next is tried all the same.
func (s *Set) Run(ctx context.Context) {
	t := time.NewTimer(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("asking the workers for their tools failed; the tools known stay as they are", "error", err)
		}
		t.Reset(s.interval)
	}
}

// Refresh runs one round: it asks the workers, gathers their replies for the
// Window, and brings the registry in step. It returns the error that kept the
// request from being sent, or ctx's when ctx ended during the round; either
// way nothing changed.
func (s *Set) Refresh(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	replies, err := s.gather(ctx)
	if err != nil {
		s.obs.Refreshed(Round{Failed: true, Workers: len(s.workers), Conflicts: len(s.conflicts)})
		return err
	}
	s.round++
	s.hear(replies)
	s.obs.Refreshed(s.apply())
	return nil
}

// gather asks the workers and returns the replies of the Window.
func (s *Set) gather(ctx context.Context) ([]*nats.Msg, error) {
	inbox := s.nc.NewInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("workerset: subscribing to the replies: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.PublishRequest(wire.WorkerInfoSubject, inbox, nil); err != nil {
		return nil, fmt.Errorf("workerset: asking %s: %w", wire.WorkerInfoSubject, err)
	}
	wctx, cancel := context.WithTimeout(ctx, s.window)
	defer cancel()
	var replies []*nats.Msg
	for len(replies) < maxReplies {
		m, err := sub.NextMsgWithContext(wctx)
		if err != nil {
			break
		}
		if m.Header.Get("Status") == "503" && len(m.Data) == 0 {
			// The server's no-responders: nothing anywhere received the request
			// (a service import counts only if the exporting account delivered
			// it), so no reply will come.
			break
		}
		if m.Header.Get("Status") != "" {
			continue
		}
		replies = append(replies, m)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return replies, nil
}

// hear records the workers that replied, and forgets those unheard for
// Absent rounds.
func (s *Set) hear(replies []*nats.Msg) {
	unreadable := false
	for _, m := range replies {
		var info micro.Info
		err := json.Unmarshal(m.Data, &info)
		switch {
		case err != nil:
			err = fmt.Errorf("not the JSON of a service's info: %v", err)
		case info.Type != micro.InfoResponseType || info.Name != wire.WorkerService || info.ID == "":
			err = fmt.Errorf("the info of service %q, type %q, id %q: not a worker's", info.Name, info.Type, info.ID)
		}
		if err != nil {
			s.problem("unreadable", "a reply to "+wire.WorkerInfoSubject+" is not read", "error", err)
			unreadable = true
			continue
		}
		w := &workerInfo{label: label(info.ServiceIdentity), heard: s.round}
		for _, ep := range info.Endpoints {
			w.claims = append(w.claims, readClaim(w.label, ep))
		}
		s.workers[info.ID] = w
	}
	for id, w := range s.workers {
		if s.round-w.heard >= s.absent {
			delete(s.workers, id)
			s.log.Info("a worker went unheard and is forgotten", "worker", w.label, "rounds", s.absent)
		}
	}
	if !unreadable {
		delete(s.problems, "unreadable")
	}
}

// label names a worker in messages: its id and version, quoted when they are
// not plain.
func label(id micro.ServiceIdentity) string {
	plain := func(s string) string {
		if s != "" && !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' || r == '"' }) {
			return s
		}
		return strconv.Quote(s)
	}
	return fmt.Sprintf("worker %s (version %s)", plain(id.ID), plain(id.Version))
}

// readClaim reads an endpoint's claim to a tool.
func readClaim(worker string, ep micro.EndpointInfo) claim {
	c := claim{worker: worker, tool: ep.Name}
	raw, ok := ep.Metadata[wire.DeclarationMetadata]
	if !ok {
		c.err = fmt.Errorf("the endpoint has no %s metadata", wire.DeclarationMetadata)
		return c
	}
	spec, err := natstool.ParseDeclaration([]byte(raw))
	switch {
	case err != nil:
		c.err = err
	case spec.Name != ep.Name:
		c.err = fmt.Errorf("the endpoint %q declares the tool %q: an endpoint is named as its tool", ep.Name, spec.Name)
	case ep.QueueGroup != wire.BodyQueue:
		c.err = fmt.Errorf(
			"the endpoint is in the queue group %q, not %s: every request for the tool would reach it besides the worker that takes it",
			ep.QueueGroup, wire.BodyQueue)
	default:
		if err := natstool.CheckSubject(ep.Subject); err != nil {
			c.err = fmt.Errorf("the endpoint's subject %v", err)
		} else {
			c.decl = declare(spec, ep.Subject)
		}
	}
	return c
}

// problem logs a problem at error level the first round it is seen, keyed by
// key.
func (s *Set) problem(key, msg string, attrs ...any) {
	if s.problems[key] {
		return
	}
	s.problems[key] = true
	s.log.Error(msg, attrs...)
}

// apply brings the registry in step with the workers remembered.
func (s *Set) apply() Round {
	// A tool put in the registry since, by someone else (the tools of an MCP
	// server imported once it is reached), is the executor's own too.
	for _, t := range s.reg.Tools() {
		n := t.Name()
		if _, learned := s.learned[n]; !learned && s.served[n] == nil {
			s.own[n] = true
		}
	}
	claims := map[string][]claim{}
	for _, id := range slices.Sorted(maps.Keys(s.workers)) {
		for _, c := range s.workers[id].claims {
			claims[c.tool] = append(claims[c.tool], c)
		}
	}
	var r Round
	r.Workers = len(s.workers)
	refusals := map[string]bool{}
	names := map[string]bool{}
	for n := range claims {
		names[n] = true
	}
	for n := range s.learned {
		names[n] = true
	}
	for n := range s.conflicts {
		names[n] = true
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		cs := claims[name]
		var valid []claim
		for _, c := range cs {
			if c.err == nil {
				valid = append(valid, c)
				continue
			}
			r.Refused++
			key := "refused\x00" + c.worker + "\x00" + name + "\x00" + c.err.Error()
			refusals[key] = true
			s.problem(key, "a worker's declaration of a tool is refused; the tool is not served from that worker",
				"worker", c.worker, "tool", name, "error", c.err)
		}
		conflict := s.judge(name, cs, valid)
		s.setConflict(name, conflict)
		switch {
		case conflict != "":
			r.Conflicts++
		case len(valid) == 0 || s.own[name]:
			s.forget(name)
		default:
			r.Tools++
			if s.served[name] == nil {
				s.learn(name, valid[0].decl)
			}
		}
	}
	for key := range s.problems {
		if strings.HasPrefix(key, "refused\x00") && !refusals[key] {
			delete(s.problems, key)
		}
	}
	return r
}

// judge returns what conflicts about the tool called name, which cs claim
// (valid of them with a declaration that was read), or "" when nothing does.
func (s *Set) judge(name string, cs, valid []claim) string {
	if len(cs) == 0 {
		return ""
	}
	if s.own[name] {
		return fmt.Sprintf("the executor runs its body itself, and %s %s it too", workersOf(cs), declareVerb(cs))
	}
	served := s.served[name]
	if len(valid) < len(cs) && (len(valid) > 0 || served != nil) {
		var parts []string
		for _, c := range cs {
			if c.err != nil {
				parts = append(parts, fmt.Sprintf("%s's declaration is refused (%v)", c.worker, c.err))
			}
		}
		return strings.Join(parts, "; ") + ": its endpoint shares the tool's subject and queue group, so it would take a share of the calls"
	}
	// Group the declarers by what they declare, the executor first.
	type group struct {
		decl *declaration
		by   []string
	}
	var groups []*group
	index := map[string]*group{}
	add := func(d *declaration, who string) {
		g := index[d.key()]
		if g == nil {
			g = &group{decl: d}
			index[d.key()] = g
			groups = append(groups, g)
		}
		g.by = append(g.by, who)
	}
	if served != nil {
		add(served, "the executor")
	}
	for _, c := range valid {
		add(c.decl, c.worker)
	}
	if len(groups) < 2 {
		return ""
	}
	decls, sides := make([]*declaration, len(groups)), make([]string, len(groups))
	for i, g := range groups {
		decls[i], sides[i] = g.decl, "["+strings.Join(g.by, ", ")+"]"
	}
	return fmt.Sprintf("declared differently by %s: they differ in %s", strings.Join(sides, " and "), strings.Join(differ(decls), ", "))
}

// workersOf names the workers of cs.
func workersOf(cs []claim) string {
	var ws []string
	for _, c := range cs {
		if !slices.Contains(ws, c.worker) {
			ws = append(ws, c.worker)
		}
	}
	return strings.Join(ws, ", ")
}

// declareVerb agrees with workersOf(cs).
func declareVerb(cs []claim) string {
	for _, c := range cs[1:] {
		if c.worker != cs[0].worker {
			return "declare"
		}
	}
	return "declares"
}

// setConflict sets the tool's conflict on the registry, or clears it for "",
// logging the change.
func (s *Set) setConflict(name, conflict string) {
	prev, was := s.conflicts[name]
	switch {
	case conflict == "" && was:
		delete(s.conflicts, name)
		s.reg.ClearConflict(name)
		s.log.Info("a tool's declarations agree again: it is served", "tool", name)
	case conflict != "" && conflict != prev:
		s.conflicts[name] = conflict
		s.reg.SetConflict(name, conflict)
		s.log.Error("a tool's declarations conflict: it is not run until they agree (calls are rejected tool_conflict)",
			"tool", name, "conflict", conflict)
		if !was {
			s.obs.ConflictBegan(name)
		}
	}
}

// learn puts the tool declared by d in the registry, unless it is there
// already.
func (s *Set) learn(name string, d *declaration) {
	if s.learned[name] == d.key() {
		return
	}
	t, err := natstool.New(d.spec, natstool.Endpoint{Conn: s.nc, Subject: d.subject, MaxReplyBytes: s.maxReply, OnExtraReply: s.onExtra})
	if err != nil { // the declaration was checked as natstool checks it
		s.log.Error("a tool declared by workers cannot be built", "tool", name, "error", err)
		return
	}
	_, changed := s.learned[name]
	if _, err := s.reg.Put(t); err != nil {
		s.log.Error("a tool declared by workers cannot be registered", "tool", name, "error", err)
		return
	}
	s.learned[name] = d.key()
	if changed {
		s.log.Info("a tool's declaration changed: served as the workers now declare it", "tool", name, "subject", d.subject)
	} else {
		s.log.Info("a tool is learned from the workers that serve it", "tool", name, "subject", d.subject)
	}
}

// forget removes a learned tool no valid worker declares.
func (s *Set) forget(name string) {
	if _, ok := s.learned[name]; !ok {
		return
	}
	delete(s.learned, name)
	s.reg.Remove(name)
	s.log.Info("no worker declares a tool learned from workers: it is no longer served", "tool", name)
}

// nopObserver is the default Observer.
type nopObserver struct{}

func (nopObserver) Refreshed(Round)      {}
func (nopObserver) ConflictBegan(string) {}
