package console

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/kvstore"
)

// Operator lists and settles idempotency records. *admin.Service does it in
// the executor's process; *admin.Client does it over the admin subjects. Either way
// a resolution is the admin path's: the same checks and the resolved audit
// event.
type Operator interface {
	List(ctx context.Context, req admin.ListRequest) (*admin.ListResponse, error)
	Resolve(ctx context.Context, req admin.ResolveRequest) (*admin.RecordInfo, error)
}

// Watcher delivers the events of TOOLEXEC_EVENTS under a subject filter.
// *bus.Client is one.
type Watcher interface {
	Watch(ctx context.Context, filter string, opts ...bus.WatchOption) (<-chan events.Answer, error)
}

var (
	_ Operator = (*admin.Service)(nil)
	_ Operator = (*admin.Client)(nil)
	_ Watcher  = (*bus.Client)(nil)
)

// Defaults for [Config].
const (
	DefaultHistory         = 200
	DefaultSince           = time.Hour
	DefaultOperator        = "console"
	DefaultSessionIdle     = 30 * time.Minute
	DefaultSessionLifetime = 12 * time.Hour
	DefaultMaxSessions     = 1000
)

// ErrNoToken is returned by [New] without a token: the console is never open.
var ErrNoToken = errors.New("console: a token is required (--console-token or TOOLEXEC_CONSOLE_TOKEN)")

// Config configures a [Console].
type Config struct {
	// Token is the secret an operator signs in with (or sends as a bearer
	// token). Required.
	Token string
	// Operator lists and resolves records. Required.
	Operator Operator
	// Watcher feeds the live feed. Required.
	Watcher Watcher
	// History is how many feed events the console keeps for pages that open
	// later; default DefaultHistory.
	History int
	// Since is how far back the feed starts when the console starts; default
	// DefaultSince.
	Since time.Duration
	// SessionIdle ends a signed-in browser's session after this long without
	// a request; default DefaultSessionIdle. An open live feed is not a
	// request: it ends with its session.
	SessionIdle time.Duration
	// SessionLifetime ends a session this long after its sign-in, however
	// busy; default DefaultSessionLifetime.
	SessionLifetime time.Duration
	// MaxSessions is how many sessions the console keeps at once: a sign-in
	// beyond it ends the oldest; default DefaultMaxSessions.
	MaxSessions int
	// Logger receives a line per sign-in, sign-out, resolution and failure;
	// default slog.Default().
	Logger *slog.Logger
}

// Console is the operators' web console: a live feed of deduplicated,
// indeterminate and resolved events, a tenant's indeterminate records, and the
// actions that resolve them. Create it with [New], start its feed with
// [Console.Start] and serve [Console.Handler].
type Console struct {
	cfg      Config
	log      *slog.Logger
	hub      *hub
	sessions *sessions
	gate     *throttle        // of token checks
	now      func() time.Time // the clock sessions and the throttle read; tests set it
	pages    *template.Template
	wg       sync.WaitGroup // the feed's goroutines
	stopped  chan struct{}  // closed when Start's context ends: event streams end
}

//go:embed assets/templates/*.html
var templates embed.FS

// New returns a console, or ErrNoToken without Config.Token, or an error when
// Operator or Watcher is missing.
func New(cfg Config) (*Console, error) {
	if cfg.Token == "" {
		return nil, ErrNoToken
	}
	if cfg.Operator == nil || cfg.Watcher == nil {
		return nil, errors.New("console: Config.Operator and Config.Watcher are required")
	}
	if cfg.History <= 0 {
		cfg.History = DefaultHistory
	}
	if cfg.Since <= 0 {
		cfg.Since = DefaultSince
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	if cfg.SessionLifetime <= 0 {
		cfg.SessionLifetime = DefaultSessionLifetime
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	pages, err := template.New("").Funcs(template.FuncMap{
		"short": shortKey,
		"age":   formatAge,
		"clock": func(t time.Time) string { return t.UTC().Format("15:04:05") },
	}).ParseFS(templates, "assets/templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	return &Console{
		cfg: cfg, log: cfg.Logger, hub: newHub(cfg.History), pages: pages,
		sessions: newSessions(cfg.SessionIdle, cfg.SessionLifetime, cfg.MaxSessions),
		gate:     newThrottle(defaultLimits, cfg.Logger),
		now:      time.Now, stopped: make(chan struct{}),
	}, nil
}

// Start opens the watches that feed the live feed, from Config.Since ago, and
// follows them until ctx ends; then the pages' event streams end too (so that
// an HTTP server's Shutdown need not wait for them). It returns the watch's
// error if one cannot be opened. Call it once.
func (c *Console) Start(ctx context.Context) error {
	context.AfterFunc(ctx, func() { close(c.stopped) })
	var chans []<-chan events.Answer
	for _, k := range feedKinds {
		ch, err := c.cfg.Watcher.Watch(ctx, wire.KindSubjects(k), bus.WatchSince(time.Now().Add(-c.cfg.Since)))
		if err != nil {
			return fmt.Errorf("console: watching %s events: %w", k, err)
		}
		chans = append(chans, ch)
	}
	c.hub.follow(ctx, chans, &c.wg)
	return nil
}

// Wait returns once the feed has stopped (after Start's ctx ended).
func (c *Console) Wait() { c.wg.Wait() }

// sessionCookie holds a signed-in browser's session id.
const sessionCookie = "toolexec_console"

// Handler serves the console: the page at /, the feed's event stream at
// /events, the resolve action at /resolve, sign-in at /login, sign-out at
// /logout and the page's stylesheet and script at /static/. Everything but
// those last three needs the session cookie sign-in sets, or
// "Authorization: Bearer <token>". Wrong tokens, signing in or bearer, are
// throttled by remote address and all together; a refused one is answered
// 429 with Retry-After. State-changing requests from other origins are
// refused.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /static/{name}", static)
	mux.HandleFunc("GET /login", c.loginPage)
	mux.HandleFunc("POST /login", c.login)
	mux.HandleFunc("POST /logout", c.logout)
	mux.Handle("GET /{$}", c.authorized(http.HandlerFunc(c.page)))
	mux.Handle("GET /events", c.authorized(http.HandlerFunc(c.stream)))
	mux.Handle("POST /resolve", c.authorized(http.HandlerFunc(c.resolve)))
	return securityHeaders(http.NewCrossOriginProtection().Handler(mux))
}

func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// equal compares two secrets in constant time.
func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// caller is who an authorized request comes from.
type caller struct {
	session  string // the session id; "" for a bearer token
	operator string // the name the audit events carry
}

type callerKey struct{}

// callerOf returns who an authorized request comes from.
func callerOf(r *http.Request) caller {
	if who, ok := r.Context().Value(callerKey{}).(caller); ok {
		return who
	}
	return caller{operator: DefaultOperator}
}

// authorized lets through requests with a live session's cookie or the
// bearer token; it sends browsers to sign in and answers 401 to others, or
// 429 to an address whose wrong bearer tokens have it locked out.
func (c *Console) authorized(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := c.now()
		if ck, err := r.Cookie(sessionCookie); err == nil {
			if name, ok := c.sessions.use(ck.Value, now); ok {
				h.ServeHTTP(w, withCaller(r, caller{session: ck.Value, operator: name}))
				return
			}
		}
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			right, retry := c.gate.check(r.RemoteAddr, now, func() bool { return equal(tok, c.cfg.Token) })
			if right {
				h.ServeHTTP(w, withCaller(r, caller{operator: DefaultOperator}))
				return
			}
			if retry > 0 {
				setRetryAfter(w, retry)
				http.Error(w, "too many wrong tokens: try again later", http.StatusTooManyRequests)
				return
			}
		}
		if r.Method == http.MethodGet && r.URL.Path == "/" {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		http.Error(w, "sign in first", http.StatusUnauthorized)
	})
}

func withCaller(r *http.Request, who caller) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, who))
}

// setRetryAfter tells a refused client how many seconds to wait (at least 1).
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(d)))
}

func retrySeconds(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }

func (c *Console) render(w http.ResponseWriter, status int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := c.pages.ExecuteTemplate(w, name, data); err != nil {
		c.log.Error("console: rendering a page", "page", name, "error", err)
	}
}

// loginData is what login.html shows.
type loginData struct {
	Failed bool // the last token was wrong
	Wait   int  // seconds before a token from this address is checked again
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, http.StatusOK, "login.html", loginData{Failed: r.URL.Query().Has("failed")})
}

var operatorRE = regexp.MustCompile(`^[\p{L}\p{N} ._@-]{1,64}$`)

// login checks the token, through the throttle, and starts a session: its id
// goes into the cookie, the operator's name (else DefaultOperator) stays with
// the session for the audit events. A session the browser held before ends.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	now := c.now()
	right, retry := c.gate.check(r.RemoteAddr, now, func() bool { return equal(r.PostForm.Get("token"), c.cfg.Token) })
	switch {
	case retry > 0:
		setRetryAfter(w, retry)
		c.render(w, http.StatusTooManyRequests, "login.html", loginData{Wait: retrySeconds(retry)})
		return
	case !right:
		http.Redirect(w, r, "/login?failed", http.StatusSeeOther)
		return
	}
	if ck, err := r.Cookie(sessionCookie); err == nil {
		c.sessions.end(ck.Value)
	}
	name := strings.TrimSpace(r.PostForm.Get("operator"))
	if !operatorRE.MatchString(name) {
		name = DefaultOperator
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: c.sessions.create(name, now), Path: "/",
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	c.log.Info("console: signed in", "operator", name, "remote", r.RemoteAddr)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logout ends the browser's session, so that its cookie opens nothing any
// more, wherever a copy of it is, and drops the cookie.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		if name, ok := c.sessions.end(ck.Value); ok {
			c.log.Info("console: signed out", "operator", name, "remote", r.RemoteAddr)
		}
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

var keyRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// record is a row of the indeterminate records table.
type record struct {
	*admin.RecordInfo
	Age time.Duration
}

// pageData is what page.html shows.
type pageData struct {
	Tenant   string
	Operator string
	Records  []record
	More     bool
	ListErr  string
	Flash    string
	FlashBad bool
	Focus    string // the key the page was opened for
	Feed     []Item // newest first
	LastID   uint64
	Tenants  []string
}

// page renders the console: the feed so far and, for ?tenant=, its
// indeterminate records.
func (c *Console) page(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := pageData{Operator: callerOf(r).operator, Focus: q.Get("key")}
	items := c.hub.since(0)
	seen := map[string]bool{}
	for i := len(items) - 1; i >= 0; i-- {
		d.Feed = append(d.Feed, items[i])
		if t := items[i].Tenant; !seen[t] && len(d.Tenants) < 20 {
			seen[t] = true
			d.Tenants = append(d.Tenants, t)
		}
	}
	if len(items) > 0 {
		d.LastID = items[len(items)-1].ID
	}
	d.Flash, d.FlashBad = flash(q)
	if t := q.Get("tenant"); t != "" {
		d.Tenant = t
		if err := events.CheckToken("tenant", t); err != nil {
			d.ListErr = err.Error()
		} else if resp, err := c.cfg.Operator.List(r.Context(), admin.ListRequest{Tenant: t}); err != nil {
			d.ListErr = err.Error()
		} else {
			d.More = resp.More
			for _, ri := range resp.Records {
				rec := record{RecordInfo: ri}
				if ri.UpdatedAt != nil {
					rec.Age = resp.Now.Sub(*ri.UpdatedAt)
				}
				d.Records = append(d.Records, rec)
			}
		}
	}
	c.render(w, http.StatusOK, "page.html", d)
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

// resolve applies a resolution from the page's form and sends the browser
// back to the tenant's records with the result.
func (c *Console) resolve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	f := r.PostForm
	req := admin.ResolveRequest{
		Tenant: f.Get("tenant"), Key: f.Get("key"), Action: events.Action(f.Get("action")), Operator: callerOf(r).operator,
	}
	if req.Action == events.ActionComplete {
		req.Outcome = f.Get("outcome")
		if !utf8.ValidString(req.Outcome) {
			http.Error(w, "the outcome is not valid UTF-8", http.StatusBadRequest)
			return
		}
	}
	back := url.Values{"tenant": {req.Tenant}, "key": {req.Key}}
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
	http.Redirect(w, r, "/?"+back.Encode(), http.StatusSeeOther)
}

// heartbeat keeps idle event streams open through proxies.
const heartbeat = 20 * time.Second

// stream serves the feed as Server-Sent Events: the kept items after
// ?after= (or the Last-Event-ID a reconnecting browser sends), then each new
// one, until the client goes away or, for a browser, its session ends (signed
// out or expired: the stream ends at the next item or keep-alive).
func (c *Console) stream(w http.ResponseWriter, r *http.Request) {
	who := callerOf(r)
	live := func() bool { return who.session == "" || c.sessions.alive(who.session, c.now()) }
	rc := http.NewResponseController(w)
	after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	if id, err := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64); err == nil {
		after = id
	}
	backlog, ch, cancel := c.hub.subscribe(after)
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(it Item) bool {
		if !live() {
			return false
		}
		b, _ := json.Marshal(it)
		if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", it.ID, b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	for _, it := range backlog {
		if !send(it) {
			return
		}
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case it, ok := <-ch:
			if !ok || !send(it) {
				return // dropped as too slow (the browser reconnects and catches up), or signed out
			}
		case <-tick.C:
			if !live() {
				return
			}
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-c.stopped:
			return
		}
	}
}

func shortKey(k string) string {
	if len(k) > 12 {
		return k[:12] + "…"
	}
	return k
}

// formatAge renders a duration for people: 42s, 3m12s, 5h03m, 2d04h.
func formatAge(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}
