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
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
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
// *toolexec.Client is one.
type Watcher interface {
	Watch(ctx context.Context, filter string, opts ...toolexec.WatchOption) (<-chan events.Answer, error)
}

var (
	_ Operator = (*admin.Service)(nil)
	_ Operator = (*admin.Client)(nil)
	_ Watcher  = (*toolexec.Client)(nil)
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

// ErrNoToken is returned by [New] with neither operators nor a token: the
// console is never open.
var ErrNoToken = errors.New(
	"console: operators or a token are required (--console-operators-file, or --console-token / TOOLEXEC_CONSOLE_TOKEN)")

// MinTokenLength is the shortest shared Config.Token New accepts: the
// throttle lets the right token in whatever wrong ones it has seen, so a token
// must be too long to guess, not merely slow to.
const MinTokenLength = 24

// Unverified marks the name of an operator who signed in with the shared
// Config.Token: it is whatever they typed, and the audit events say so.
const Unverified = " (unverified)"

// Config configures a [Console].
type Config struct {
	// Operators sign in with their own tokens (or send them as bearer
	// tokens), and the resolved audit events carry their names. Operators or
	// Token is required.
	Operators *Operators
	// Token is a secret shared by whoever signs in with it (or sends it as a
	// bearer token): an admin, named by what they type at sign-in, marked
	// Unverified. Prefer Operators.
	Token string
	// Searcher finds stored events for the admins' view across tenants;
	// without it, that view searches the live feed's events only.
	Searcher Searcher
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
	gate     *throttle        // of wrong tokens
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
	if cfg.Token == "" && cfg.Operators == nil {
		return nil, ErrNoToken
	}
	if n := utf8.RuneCountInString(cfg.Token); cfg.Token != "" && n < MinTokenLength {
		return nil,
			fmt.Errorf("console: the shared token is %d characters; it must have at least %d, so that nobody guesses it", n, MinTokenLength)
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
		"short":  shortKey,
		"kinds":  events.Kinds,
		"millis": func(t time.Time) int64 { return t.UnixMilli() },
		"age":    FormatAge,
		"clock":  func(t time.Time) string { return t.UTC().Format("15:04:05") },
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

// Start opens the watches that feed the live feed, from Config.Since ago (the
// routine kinds — completed, deduplicated, failed, rejected — from at most
// routineSince ago, so that a busy hour's answers are not replayed), and
// follows them until ctx ends; then the pages' event streams end too (so that
// an HTTP server's Shutdown need not wait for them). It returns the watch's
// error if one cannot be opened. Call it once.
func (c *Console) Start(ctx context.Context) error {
	context.AfterFunc(ctx, func() { close(c.stopped) })
	var chans []<-chan events.Answer
	for _, k := range feedKinds {
		since := c.cfg.Since
		if !actionable(k) {
			since = min(since, routineSince)
		}
		ch, err := c.cfg.Watcher.Watch(ctx, wire.KindSubjects(k), toolexec.WatchSince(time.Now().Add(-since)))
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

// Handler serves the console: the page at / (a tenant's records with
// ?tenant=), the records alone at /records (which the page's script reloads
// as the feed shows records come and go), the admins' view across tenants
// with its search at /all, the feed's event stream at /events, the resolve
// action at /resolve (a release first answers a page that asks to confirm
// it), sign-in at /login, sign-out at
// /logout and the page's stylesheet and script at /static/. Everything but
// those last three needs the session cookie sign-in sets, or
// "Authorization: Bearer <token>". Wrong tokens, signing in or bearer, are
// throttled by remote address and all together; a refused one is answered
// 429 with Retry-After. The right token gets in whatever the throttle holds
// (see throttle). State-changing requests from other origins are
// refused.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /static/{name}", static)
	mux.HandleFunc("GET /login", c.loginPage)
	mux.HandleFunc("POST /login", c.login)
	mux.HandleFunc("POST /logout", c.logout)
	mux.Handle("GET /{$}", c.authorized(http.HandlerFunc(c.page)))
	mux.Handle("GET /events", c.authorized(http.HandlerFunc(c.stream)))
	mux.Handle("GET /records", c.authorized(http.HandlerFunc(c.records)))
	mux.Handle("GET /all", c.authorized(http.HandlerFunc(c.all)))
	mux.Handle("POST /resolve", c.authorized(http.HandlerFunc(c.resolve)))
	return securityHeaders(http.NewCrossOriginProtection().Handler(mux))
}

func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy",
			"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors "+
				"'none'; base-uri 'none'")
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
	session string // the session id; "" for a bearer token
	id      Identity
}

type callerKey struct{}

// callerOf returns who an authorized request comes from.
func callerOf(r *http.Request) caller {
	if who, ok := r.Context().Value(callerKey{}).(caller); ok {
		return who
	}
	return caller{}
}

// identify returns who token signs in as: an operator of the operators file,
// or, with the shared token, an admin named name (else DefaultOperator),
// marked Unverified. Both are checked, whatever the first finds, in constant
// time.
func (c *Console) identify(token, name string) (Identity, bool) {
	var id Identity
	ok := false
	if c.cfg.Operators != nil {
		id, ok = c.cfg.Operators.Lookup(token)
	}
	shared := c.cfg.Token != "" && equal(token, c.cfg.Token)
	if !ok && shared {
		name = strings.TrimSpace(name)
		if !operatorRE.MatchString(name) {
			name = DefaultOperator
		}
		id, ok = Identity{Name: name + Unverified, Admin: true}, true
	}
	return id, ok
}

// authorized lets through requests with a live session's cookie or the
// bearer token; it sends browsers to sign in and answers 401 to others, or
// 429 to a wrong bearer token from an address locked out by its wrong tokens.
func (c *Console) authorized(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := c.now()
		if ck, err := r.Cookie(sessionCookie); err == nil {
			if id, ok := c.sessions.use(ck.Value, now); ok {
				h.ServeHTTP(w, withCaller(r, caller{session: ck.Value, id: id}))
				return
			}
		}
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			if id, right := c.identify(tok, ""); right {
				h.ServeHTTP(w, withCaller(r, caller{id: id}))
				return
			}
			if retry := c.gate.wrong(r.RemoteAddr, now); retry > 0 {
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
	Failed    bool // the last token was wrong
	Wait      int  // seconds before a wrong token from this address is counted again
	Shared    bool // the shared token is accepted: ask for a name
	Operators bool // operators sign in with their own tokens
}

func (c *Console) loginData() loginData {
	return loginData{Shared: c.cfg.Token != "", Operators: c.cfg.Operators != nil}
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	d := c.loginData()
	d.Failed = r.URL.Query().Has("failed")
	c.render(w, http.StatusOK, "login.html", d)
}

var operatorRE = regexp.MustCompile(`^[\p{L}\p{N} ._@-]{1,64}$`)

// login checks the token, telling the throttle of a wrong one, and with a
// right one starts a session, whatever the throttle holds: its id goes into
// the cookie, which the browser keeps no longer than the session lives
// (Max-Age and Expires: Config.SessionLifetime); who signed in stays with the
// session, for the audit events and for what they may see. A session the
// browser held before ends.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	now := c.now()
	id, right := c.identify(r.PostForm.Get("token"), r.PostForm.Get("operator"))
	if !right {
		if retry := c.gate.wrong(r.RemoteAddr, now); retry > 0 {
			setRetryAfter(w, retry)
			d := c.loginData()
			d.Wait = retrySeconds(retry)
			c.render(w, http.StatusTooManyRequests, "login.html", d)
			return
		}
		http.Redirect(w, r, "/login?failed", http.StatusSeeOther)
		return
	}
	if ck, err := r.Cookie(sessionCookie); err == nil {
		c.sessions.end(ck.Value)
	}
	life := c.cfg.SessionLifetime
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: c.sessions.create(id, now), Path: "/",
		MaxAge: max(1, int(life/time.Second)), Expires: now.Add(life),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	c.log.Info("console: signed in", "operator", id.Name, "verified", id.Verified, "admin", id.Admin, "remote", r.RemoteAddr)
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

// heartbeat keeps idle event streams open through proxies.
const heartbeat = 20 * time.Second

// stream serves the feed as Server-Sent Events: the kept items after
// ?after= (or the Last-Event-ID a reconnecting browser sends), then each new
// one, of the tenants the caller sees, until the client goes away or, for a browser, its session ends (signed
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
		if !who.id.Sees(it.Tenant) {
			return true // another tenant's: not this operator's to see
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

// FormatAge renders a duration for people, as the console and the emitter show
// ages: 42s, 3m12s, 5h03m, 2d04h.
func FormatAge(d time.Duration) string {
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
