package console

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/kvstore"
)

var keyRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// record is a row of an indeterminate records table.
type record struct {
	*admin.RecordInfo
	Age time.Duration
}

// recordsData is what the "records" template shows: one tenant's
// indeterminate records, or (All) those of every tenant an admin sees.
type recordsData struct {
	Tenant  string
	All     bool
	Src     string // the URL the page's script reloads the table from
	Records []record
	ListErr string
	More    bool
	Focus   string // the key the page was opened for
}

// pageData is what page.html shows.
type pageData struct {
	List     recordsData // the tenant's records, with ?tenant=
	Tenant   string
	Focus    string
	Operator string
	Admin    bool
	Flash    string
	FlashBad bool
	Feed     []Item // newest first
	LastID   uint64
	Tenants  []string
	Show     map[events.Kind]bool // the kinds the feed shows
}

// feedFor returns the feed items who may see, newest first, those of an
// indeterminate key that a later item resolved marked Settled.
func (c *Console) feedFor(who Identity) []Item {
	items := c.hub.since(0)
	var seen []Item
	for _, it := range items {
		if who.Sees(it.Tenant) {
			seen = append(seen, it)
		}
	}
	settle(seen)
	slices.Reverse(seen)
	return seen
}

// settle marks each indeterminate item with the resolution of its key that
// came after it. After by the events' own times, not by their place in the
// feed: each kind is watched on its own, so a resolution may reach the feed
// before the indeterminate answer it settles.
func settle(items []Item) {
	for _, it := range items {
		if it.Kind != events.KindResolved || it.Key == "" {
			continue
		}
		for j := range items {
			p := &items[j]
			if p.Kind == events.KindIndeterminate && p.Key == it.Key && p.Tenant == it.Tenant && p.Settled == "" && !it.Time.Before(p.Time) {
				p.Settled = settledText(it)
			}
		}
	}
}

func settledText(it Item) string { return "resolved: " + string(it.Action) + " by " + it.Operator }

// shownKinds reads the feed's filter from ?show= (every kind when absent).
func shownKinds(q url.Values) map[events.Kind]bool {
	show := map[events.Kind]bool{}
	for _, k := range q["show"] {
		if events.Kind(k).Valid() {
			show[events.Kind(k)] = true
		}
	}
	if len(show) == 0 {
		for _, k := range events.Kinds() {
			show[k] = true
		}
	}
	return show
}

// page renders the console: the feed so far (what the caller may see) and,
// for ?tenant=, the tenant's indeterminate records.
func (c *Console) page(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	who := callerOf(r).id
	d := pageData{Operator: who.Name, Admin: who.Admin, Show: shownKinds(q)}
	d.Focus, d.Tenant = q.Get("key"), q.Get("tenant")
	all := c.feedFor(who)
	seen := map[string]bool{}
	for _, it := range all {
		if d.Show[it.Kind] {
			d.Feed = append(d.Feed, it)
		}
		if t := it.Tenant; !seen[t] && len(d.Tenants) < 20 {
			seen[t] = true
			d.Tenants = append(d.Tenants, t)
		}
	}
	if !who.Admin {
		d.Tenants = who.Tenants
	}
	if len(all) > 0 {
		d.LastID = all[0].ID
	}
	d.Flash, d.FlashBad = flash(q)
	if t := q.Get("tenant"); t != "" {
		d.List = c.tenantRecords(r, who, t, d.Focus)
	}
	c.render(w, http.StatusOK, "page.html", d)
}

// tenantRecords lists tenant's indeterminate records, if who sees it.
func (c *Console) tenantRecords(r *http.Request, who Identity, tenant, focus string) recordsData {
	d := recordsData{Tenant: tenant, Focus: focus, Src: "/records?" + url.Values{"tenant": {tenant}}.Encode()}
	switch {
	case events.CheckToken("tenant", tenant) != nil:
		d.ListErr = events.CheckToken("tenant", tenant).Error()
	case !who.Sees(tenant):
		d.ListErr = "you may not see tenant " + tenant + ": the operators file gives you " + tenantList(who.Tenants) + "."
	default:
		resp, err := c.cfg.Operator.List(r.Context(), admin.ListRequest{Tenant: tenant})
		if err != nil {
			d.ListErr = err.Error()
			break
		}
		d.More = resp.More
		d.Records = rows(resp)
	}
	return d
}

func tenantList(ts []string) string {
	if len(ts) == 0 {
		return "no tenant"
	}
	return strings.Join(ts, ", ")
}

func rows(resp *admin.ListResponse) []record {
	var out []record
	for _, ri := range resp.Records {
		rec := record{RecordInfo: ri}
		if ri.UpdatedAt != nil {
			rec.Age = resp.Now.Sub(*ri.UpdatedAt)
		}
		out = append(out, rec)
	}
	return out
}

// records serves the records table alone (?tenant=, or ?all for an admin's
// every tenant), for the page's script to reload as the feed shows records
// come and go.
func (c *Console) records(w http.ResponseWriter, r *http.Request) {
	who := callerOf(r).id
	q := r.URL.Query()
	var d recordsData
	if q.Has("all") {
		if !who.Admin {
			http.Error(w, "only an admin sees every tenant", http.StatusForbidden)
			return
		}
		d = c.allRecords(r, q.Get("key"))
		if qq := (query{By: q.Get("by"), Q: q.Get("q")}); qq.Q != "" {
			d.Records = slices.DeleteFunc(d.Records, func(rec record) bool { return !qq.matches(rec) })
		}
	} else {
		t := q.Get("tenant")
		if !who.Sees(t) {
			http.Error(w, "you may not see tenant "+t, http.StatusForbidden)
			return
		}
		d = c.tenantRecords(r, who, t, q.Get("key"))
	}
	c.render(w, http.StatusOK, "records", d)
}

// flash is the message a resolution left in the query: what was done, or why
// it was not. Only known values are shown.
func flash(q url.Values) (string, bool) {
	key := q.Get("key")
	if !keyRE.MatchString(key) {
		return "", false
	}
	switch q.Get("done") {
	case string(events.ActionComplete):
		return "Resolved " + shortKey(key) + ": completed with the outcome given; duplicates of its call are answered with it.", false
	case string(events.ActionRelease):
		return "Resolved " + shortKey(key) + ": released; the next call runs the tool.", false
	}
	if q.Has("kept") {
		return "Not released " + shortKey(key) + ": nothing was changed.", false
	}
	if msg, ok := failures[q.Get("failed")]; ok {
		return "Not resolved " + shortKey(key) + ": " + msg, true
	}
	return "", false
}

// failures explains, by admin error code, why a resolution failed.
var failures = map[string]string{
	admin.CodeNotIndeterminate: "it is no longer indeterminate (resolved already?).",
	admin.CodeNotFound:         "the tenant has no record for it (released, expired or forgotten).",
	admin.CodeInvalid:          "the request was refused as invalid.",
	admin.CodeTooLarge:         "the outcome is too large to record.",
	admin.CodeUnavailable:      "the idempotency store cannot be reached; try again.",
	admin.CodeAuditFailed:      "it WAS resolved, but its audit event could not be stored.",
	admin.CodeInternal:         "the executor could not do it; see its log.",
}

// confirmValue is what the release form's confirm field says once the
// operator has confirmed.
const confirmValue = "release"

// confirmData is what confirm.html shows: the release asked for, and the
// record it would release when it can be found.
type confirmData struct {
	Tenant, Key, Back string
	Record            *admin.RecordInfo
	Operator          string
}

// resolve applies a resolution from a page's form and sends the browser back
// where it came from with the result. A release without confirm=release
// changes nothing: it answers a page that says what releasing allows and asks
// to confirm. The tenant must be one the caller sees.
func (c *Console) resolve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	f := r.PostForm
	who := callerOf(r).id
	req := admin.ResolveRequest{
		Tenant: f.Get("tenant"), Key: f.Get("key"), Action: events.Action(f.Get("action")), Operator: who.Name,
	}
	if !who.Sees(req.Tenant) {
		c.log.Warn("console: a resolution of another tenant was refused", "operator", who.Name, "tenant", req.Tenant, "remote", r.RemoteAddr)
		http.Error(w, "you may not resolve keys of tenant "+req.Tenant, http.StatusForbidden)
		return
	}
	// Back where the form was: the tenant's records, or the admins' view.
	path, back := "/", url.Values{"tenant": {req.Tenant}, "key": {req.Key}}
	if f.Get("from") == "all" && who.Admin {
		path, back = "/all", url.Values{"key": {req.Key}}
	}
	if req.Action == events.ActionRelease && f.Get("confirm") != confirmValue {
		d := confirmData{Tenant: req.Tenant, Key: req.Key, Operator: who.Name, Back: path + "?" + back.Encode() + "&kept"}
		if keyRE.MatchString(req.Key) && events.CheckToken("tenant", req.Tenant) == nil {
			if resp, err := c.cfg.Operator.List(r.Context(), admin.ListRequest{Tenant: req.Tenant, Limit: admin.MaxListLimit}); err == nil {
				for _, ri := range resp.Records {
					if ri.Key == req.Key {
						d.Record = ri
					}
				}
			}
		}
		c.render(w, http.StatusOK, "confirm.html", struct {
			confirmData
			From string
		}{d, f.Get("from")})
		return
	}
	if req.Action == events.ActionComplete {
		req.Outcome = f.Get("outcome")
		if !utf8.ValidString(req.Outcome) {
			http.Error(w, "the outcome is not valid UTF-8", http.StatusBadRequest)
			return
		}
	}
	_, err := c.cfg.Operator.Resolve(r.Context(), req)
	var ae *admin.Error
	switch {
	case err == nil:
		back.Set("done", string(req.Action))
		c.log.Info("console: key resolved", "tenant", req.Tenant, "key", req.Key, "action", req.Action, "operator", req.Operator)
	case errors.As(err, &ae):
		back.Set("failed", ae.Code)
		c.log.Warn("console: resolution failed", "tenant", req.Tenant, "key", req.Key, "action", req.Action, "error", err)
	case errors.Is(err, kvstore.ErrInvalid):
		back.Set("failed", admin.CodeInvalid)
	default:
		back.Set("failed", admin.CodeInternal)
		c.log.Error("console: resolution failed", "tenant", req.Tenant, "key", req.Key, "action", req.Action, "error", err)
	}
	if events.CheckToken("tenant", req.Tenant) != nil {
		back.Del("tenant")
	}
	http.Redirect(w, r, path+"?"+back.Encode(), http.StatusSeeOther)
}

// sortRecords orders records oldest first by their last write.
func sortRecords(recs []record) {
	slices.SortStableFunc(recs, func(a, b record) int { return cmp.Compare(b.Age, a.Age) })
}
