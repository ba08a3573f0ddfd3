package httptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tesserix/toolexec/tool"
)

// DefaultMaxResponseBytes is the default bound on a response body: 512 KiB, the
// dispatcher's default bound on an outcome.
const DefaultMaxResponseBytes = 512 << 10

// The headers an HTTP tool sets on every request (Idempotency-Key and traceparent
// only when there is a value to send).
const (
	HeaderIdempotencyKey = tool.HeaderIdempotencyKey
	HeaderTenant         = tool.HeaderTenant
	HeaderRunID          = tool.HeaderRunID
	HeaderCallID         = tool.HeaderCallID
	HeaderTool           = tool.HeaderTool
	HeaderAttempt        = tool.HeaderAttempt
	HeaderTraceParent    = tool.HeaderTraceParent
)

// Endpoint says where and how an HTTP tool sends its request.
type Endpoint struct {
	// URL is the absolute http or https URL the arguments are sent to.
	URL string
	// Method is POST (the default when empty), PUT or PATCH.
	Method string
	// Headers are sent with every request, e.g. Authorization. They may not set
	// the headers the tool sets itself (see the package documentation).
	Headers map[string]string
	// Client sends the requests. Nil means a client that does not follow
	// redirects and has no timeout of its own (the tool's timeout bounds each
	// request through its context), on http.DefaultTransport's pooled connections,
	// or for Effectful tools on a connection per request.
	Client *http.Client
	// MaxResponseBytes bounds the response body read as the outcome; zero means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
}

// noRedirects hands redirects back to be classified instead of following them.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// defaultClient is used when an Endpoint of a tool that is not Effectful has no
// Client: pooled connections of http.DefaultTransport.
var defaultClient = &http.Client{CheckRedirect: noRedirects}

// effectfulClient is used when an Endpoint of an Effectful tool has no Client:
// every request on a connection of its own, so that a keep-alive connection the
// server closed at the wrong moment cannot make an outcome indeterminate.
var effectfulClient = sync.OnceValue(func() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	return &http.Client{Transport: tr, CheckRedirect: noRedirects}
})

// reserved lists the header names an endpoint may not set, canonicalised.
var reserved = map[string]bool{
	"Content-Type":      true,
	"Content-Length":    true,
	"Transfer-Encoding": true,
	"Connection":        true,
	"Idempotency-Key":   true,
	"Traceparent":       true,
}

// New checks the endpoint and returns a tool declared by spec whose body sends
// each call to it. It returns an error matching [tool.ErrInvalidSpec] when the
// declaration is refused by [tool.New], or when the endpoint is: a *tool.SpecError
// whose Field is "http.url" (not an absolute http or https URL), "http.method"
// (not POST, PUT or PATCH), "http.headers" (a bad or reserved name, a value with
// a control character) or "http.max_response_bytes" (negative).
func New(spec tool.Spec, ep Endpoint) (*tool.Tool, error) {
	effectful := spec.Idempotency != nil && spec.Idempotency.Kind == tool.Effectful
	c, err := compile(spec.Name, ep, effectful)
	if err != nil {
		return nil, err
	}
	return tool.New(spec, c.call)
}

// compiled is a checked endpoint, ready to send.
type compiled struct {
	url     string      // the request URL
	safe    string      // the URL without user information or query, for messages
	method  string      // POST, PUT or PATCH
	host    string      // an explicit Host header, or ""
	headers http.Header // the endpoint's own headers, canonicalised
	client  *http.Client
	max     int64
	// noReplay keeps the transport from re-sending the request by itself
	// (Effectful tools).
	noReplay bool
}

func compile(name string, ep Endpoint, effectful bool) (*compiled, error) {
	bad := func(field, msg string) error { return &tool.SpecError{Tool: name, Field: field, Msg: msg} }
	u, err := url.Parse(ep.URL)
	switch {
	case ep.URL == "":
		return nil, bad("http.url", "is required")
	case err != nil:
		return nil, bad("http.url", "is not a URL: "+redactParseError(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, bad("http.url", fmt.Sprintf("must be an http or https URL (scheme is %q)", u.Scheme))
	case u.Host == "" || u.Hostname() == "":
		return nil, bad("http.url", "has no host")
	}
	c := &compiled{url: ep.URL, safe: safeURL(u), method: strings.ToUpper(ep.Method), headers: http.Header{},
		client: ep.Client, max: ep.MaxResponseBytes, noReplay: effectful}
	switch c.method {
	case "":
		c.method = http.MethodPost
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return nil, bad("http.method", fmt.Sprintf("must be POST, PUT or PATCH (got %q): the arguments travel in the body", ep.Method))
	}
	for k, v := range ep.Headers {
		ck := http.CanonicalHeaderKey(k)
		switch {
		case !validHeaderName(k):
			return nil, bad("http.headers", fmt.Sprintf("%q is not a valid header name", k))
		case reserved[ck] || strings.HasPrefix(ck, "Toolexec-"):
			return nil, bad("http.headers", fmt.Sprintf("%q is set by the tool itself", k))
		case !validHeaderValue(v):
			return nil, bad("http.headers", fmt.Sprintf("the value of %q holds a control character", k))
		case c.headers.Get(ck) != "" || ck == "Host" && c.host != "":
			return nil, bad("http.headers", fmt.Sprintf("%q is given twice", k))
		case ck == "Host":
			c.host = v
		default:
			c.headers.Set(ck, v)
		}
	}
	switch {
	case c.client != nil:
	case effectful:
		c.client = effectfulClient()
	default:
		c.client = defaultClient
	}
	switch {
	case c.max == 0:
		c.max = DefaultMaxResponseBytes
	case c.max < 0:
		return nil, bad("http.max_response_bytes", "is negative")
	}
	return c, nil
}

// redactParseError describes a URL parse failure without repeating the URL, which
// may hold a secret expanded from the environment.
func redactParseError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return "malformed"
}

// safeURL renders u for error messages: scheme, host and path only.
func safeURL(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
}

// validHeaderName reports whether s is an HTTP token (RFC 9110 §5.6.2).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s holds no control characters other than tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// call is the tool's body: one request, classified.
func (c *compiled) call(ctx context.Context, tc tool.Context, args json.RawMessage) (string, error) {
	var began atomic.Bool // the transport started writing the request (any attempt)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { began.Store(true) },
	})
	req, err := http.NewRequestWithContext(ctx, c.method, c.url, bytes.NewReader(args))
	if err != nil {
		return "", tool.NoEffect(fmt.Errorf("%w: %s %s: %w", ErrNotSent, c.method, c.safe, redactURLError(err)))
	}
	if c.noReplay {
		// net/http re-sends a request carrying Idempotency-Key when a reused
		// connection fails, even after the request was written. Without GetBody
		// it cannot: repeating an Effectful call is the dispatcher's decision.
		req.GetBody = nil
	}
	for k, vs := range c.headers {
		req.Header[k] = vs
	}
	if c.host != "" {
		req.Host = c.host
	}
	req.Header.Set("Content-Type", "application/json")
	for _, kv := range tc.Headers() {
		// Set directly: the names are canonical already but the W3C one, lower
		// case, which Header.Set would canonicalise (HTTP/1 readers do not
		// care; keep it as specified).
		req.Header[kv[0]] = []string{kv[1]}
	}

	resp, err := c.client.Do(req)
	if err != nil {
		err = fmt.Errorf("%s %s: %w", c.method, c.safe, redactURLError(err))
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w (%w)", err, cerr)
		}
		if !began.Load() {
			return "", tool.NoEffect(fmt.Errorf("%w: %w", ErrNotSent, err))
		}
		return "", err
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
		serr := fmt.Errorf("%s %s: %w", c.method, c.safe, newStatusError(resp.StatusCode, resp.Status, snippet))
		if RefusedStatus(resp.StatusCode) {
			return "", tool.NoEffect(serr)
		}
		return "", serr
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.max+1))
	if err != nil {
		err = fmt.Errorf("%s %s: reading the %s response: %w", c.method, c.safe, resp.Status, err)
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w (%w)", err, cerr)
		}
		return "", err
	}
	if int64(len(body)) > c.max {
		return "", fmt.Errorf("%w: %s %s answered %s with more than %d bytes", ErrResponseTooLarge, c.method, c.safe, resp.Status, c.max)
	}
	return string(body), nil
}

// redactURLError strips the *url.Error wrapper net/http puts around transport
// errors, whose message repeats the full URL (query included).
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
