package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// Searcher finds stored events for the admins' view across tenants.
// [StreamSearcher] reads them from TOOLEXEC_EVENTS.
type Searcher interface {
	// Search returns the latest events (at most limit, oldest first) whose
	// subject matches filter (within toolexec.event.) and for which match, if
	// not nil, is true.
	Search(ctx context.Context, filter string, match func(events.Answer) bool, limit int) ([]events.Answer, error)
}

// DefaultSearchWindow is how many of the latest stored events a
// [StreamSearcher] looks through at most.
const DefaultSearchWindow = 50000

// StreamSearcher searches TOOLEXEC_EVENTS through a JetStream context: the
// last Window events stored (default DefaultSearchWindow), read by a
// short-lived consumer of its own that is deleted when the search ends.
type StreamSearcher struct {
	JS     jetstream.JetStream
	Window uint64
}

var _ Searcher = StreamSearcher{}

// searchFetch is how many events one fetch of a search asks for.
const searchFetch = 512

// Search implements [Searcher]. Events that cannot be decoded are left out.
func (s StreamSearcher) Search(ctx context.Context, filter string, match func(events.Answer) bool, limit int) ([]events.Answer, error) {
	window := s.Window
	if window == 0 {
		window = DefaultSearchWindow
	}
	st, err := s.JS.Stream(ctx, wire.EventStream)
	if err != nil {
		return nil, fmt.Errorf("console: search: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("console: search: %w", err)
	}
	last := info.State.LastSeq
	if last == 0 || info.State.Msgs == 0 {
		return nil, nil
	}
	start := max(info.State.FirstSeq, 1)
	if last >= window && last-window+1 > start {
		start = last - window + 1
	}
	cons, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{
		FilterSubject: filter, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start,
		AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, InactiveThreshold: time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("console: search: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = st.DeleteConsumer(dctx, cons.CachedInfo().Name)
	}()
	ci, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("console: search: %w", err)
	}
	var out []events.Answer
	for pending := ci.NumPending; pending > 0; {
		batch, err := cons.Fetch(int(min(pending, searchFetch)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("console: search: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			pending = meta.NumPending
			if meta.Sequence.Stream > last {
				pending = 0
			}
			a, err := wire.DecodeAnswer(m.Headers(), m.Data())
			if err != nil || (match != nil && !match(a)) {
				continue
			}
			if out = append(out, a); len(out) > limit {
				out = out[1:]
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("console: search: %w", err)
		}
		if n == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// searchLimit bounds the events a search shows.
const searchLimit = 100

// maxAllTenants bounds the tenants whose records the view across tenants
// lists.
const maxAllTenants = 50

// query is a search of the view across tenants: by key, run id or call id.
type query struct {
	By, Q string
}

// filter returns the subject filter and the check of a search, or an error
// for a malformed one.
func (q query) filter() (string, func(events.Answer) bool, error) {
	switch q.By {
	case "key":
		if !keyRE.MatchString(q.Q) {
			return "", nil, errors.New("a key is 64 lowercase hex digits")
		}
		return wire.EventPrefix + ">", func(a events.Answer) bool { return a.Key == q.Q }, nil
	case "run":
		if err := events.CheckToken("run id", q.Q); err != nil {
			return "", nil, err
		}
		return wire.EventPrefix + "*.*.*." + q.Q + ".*", func(a events.Answer) bool { return a.RunID == q.Q }, nil
	case "call":
		if err := events.CheckToken("call id", q.Q); err != nil {
			return "", nil, err
		}
		return wire.EventPrefix + "*.*.*.*." + q.Q, func(a events.Answer) bool { return a.CallID == q.Q }, nil
	}
	return "", nil, fmt.Errorf("search by key, run or call, not %q", q.By)
}

// matches reports whether rec is one the search names.
func (q query) matches(rec record) bool {
	switch q.By {
	case "key":
		return rec.Key == q.Q
	case "run":
		return rec.RunID == q.Q
	case "call":
		return rec.CallID == q.Q
	}
	return true
}

// allData is what all.html shows.
type allData struct {
	List      recordsData
	Tenant    string // none: the header's tenant form starts empty
	Operator  string
	Admin     bool
	Query     query
	Searched  bool
	SearchErr string
	Found     []Item // newest first
	Window    string // what the search looked through
	Flash     string
	FlashBad  bool
}

// all serves the admins' view across tenants: the indeterminate records of
// every tenant with an indeterminate event still stored (or in the live feed),
// and a search of the stored events by key, run id or call id, which narrows
// the records too. Others are answered 403.
func (c *Console) all(w http.ResponseWriter, r *http.Request) {
	who := callerOf(r).id
	if !who.Admin {
		http.Error(w, "only an admin sees every tenant", http.StatusForbidden)
		return
	}
	q := r.URL.Query()
	d := allData{Operator: who.Name, Admin: true, Query: query{By: q.Get("by"), Q: strings.TrimSpace(q.Get("q"))}}
	d.Flash, d.FlashBad = flash(q)
	if d.Query.By == "" {
		d.Query.By = "key"
	}
	if d.Query.Q != "" {
		d.Searched = true
		if found, err := c.search(r.Context(), d.Query); err != nil {
			d.SearchErr = err.Error()
		} else {
			d.Found = found
		}
	}
	d.Window = "the live feed's latest events"
	if c.cfg.Searcher != nil {
		d.Window = "the latest events stored"
	}
	d.List = c.allRecords(r, q.Get("key"))
	if d.Searched && d.SearchErr == "" {
		d.List.Records = slices.DeleteFunc(d.List.Records, func(rec record) bool { return !d.Query.matches(rec) })
	}
	d.List.Src += "&" + url.Values{"by": {d.Query.By}, "q": {d.Query.Q}}.Encode()
	c.render(w, http.StatusOK, "all.html", d)
}

// search runs q over the stored events (or the live feed's, without a
// Searcher), newest first.
func (c *Console) search(ctx context.Context, q query) ([]Item, error) {
	filter, match, err := q.filter()
	if err != nil {
		return nil, err
	}
	var found []Item
	if c.cfg.Searcher == nil {
		for _, it := range c.hub.since(0) {
			if a := (events.Answer{Key: it.Key, RunID: it.RunID, CallID: it.CallID}); match(a) {
				found = append(found, it)
			}
		}
	} else {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		as, err := c.cfg.Searcher.Search(ctx, filter, match, searchLimit)
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			found = append(found, itemOf(a))
		}
	}
	settle(found)
	slices.Reverse(found)
	return found, nil
}

// allRecords lists the indeterminate records of every tenant with an
// indeterminate event stored or in the live feed (at most maxAllTenants),
// oldest first.
func (c *Console) allRecords(r *http.Request, focus string) recordsData {
	d := recordsData{All: true, Focus: focus, Src: "/records?all="}
	tenants := map[string]bool{}
	for _, it := range c.hub.since(0) {
		if it.Kind == events.KindIndeterminate {
			tenants[it.Tenant] = true
		}
	}
	if c.cfg.Searcher != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
		defer cancel()
		seen := func(a events.Answer) bool {
			if tenants[a.Tenant] {
				return false
			}
			tenants[a.Tenant] = true
			return true
		}
		if _, err := c.cfg.Searcher.Search(ctx, wire.KindSubjects(events.KindIndeterminate), seen, maxAllTenants); err != nil {
			d.ListErr = "finding the tenants with indeterminate events: " + err.Error()
		}
	}
	names := make([]string, 0, len(tenants))
	for t := range tenants {
		names = append(names, t)
	}
	slices.Sort(names)
	if len(names) > maxAllTenants {
		names, d.More = names[:maxAllTenants], true
	}
	for _, t := range names {
		resp, err := c.cfg.Operator.List(r.Context(), admin.ListRequest{Tenant: t})
		if err != nil {
			d.ListErr = t + ": " + err.Error()
			continue
		}
		d.More = d.More || resp.More
		d.Records = append(d.Records, rows(resp)...)
	}
	sortRecords(d.Records)
	return d
}
