package mcptest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure the test server.
type Options struct {
	// EffectsFile is where "effect" and "hang" append a line per run:
	// "<pid> <tool> <arguments as JSON>". Empty: they append nothing.
	EffectsFile string
	// PageSize is the most tools one tools/list page holds; 0 means 3, so
	// that listing all of them takes several pages.
	PageSize int
	// BadName adds a tool whose name, "bad.name", is not a toolexec name.
	BadName bool
	// FailFile, when set and a file exists there at start, makes a child
	// started by Command exit with status 3 before it answers anything, like a
	// server that cannot start.
	FailFile string
	// ExitAfter, when not zero, makes a child started by Command exit with
	// status 0 this long after it starts serving, like a server that
	// crashes soon after each start.
	ExitAfter time.Duration
	// Release, when closed, ends the runs of "hang" in process, as the end of
	// its process does for a child (a Streamable HTTP server does not cancel
	// a handler whose client went away, and closing the server waits for
	// every handler). Nil: only cancellation ends them.
	Release <-chan struct{}
	// Legacy makes the server speak only the 2025-11-25 protocol, so that
	// clients fall back from server/discover to the initialize handshake, as
	// they do with most servers deployed today.
	Legacy bool
}

// Environment variables that pass Options to a child started by Command.
const (
	envServe   = "TOOLEXEC_MCPTEST_SERVE"
	envEffects = "TOOLEXEC_MCPTEST_EFFECTS"
	envPage    = "TOOLEXEC_MCPTEST_PAGE"
	envBadName = "TOOLEXEC_MCPTEST_BADNAME"
	envLegacy  = "TOOLEXEC_MCPTEST_LEGACY"
	envFail    = "TOOLEXEC_MCPTEST_FAILFILE"
	envExit    = "TOOLEXEC_MCPTEST_EXITAFTER"
)

// Main runs the stdio server when the process was started by [Command], and
// the package's tests otherwise. Call it from TestMain.
func Main(m *testing.M) {
	if os.Getenv(envServe) == "" {
		os.Exit(m.Run())
	}
	if f := os.Getenv(envFail); f != "" {
		if _, err := os.Stat(f); err == nil {
			fmt.Fprintln(os.Stderr, "mcptest: exiting before serving, as", f, "asks")
			os.Exit(3)
		}
	}
	page, _ := strconv.Atoi(os.Getenv(envPage))
	o := Options{EffectsFile: os.Getenv(envEffects), PageSize: page, BadName: os.Getenv(envBadName) != "", Legacy: os.Getenv(envLegacy) != ""}
	fmt.Fprintf(os.Stderr, "mcptest: serving on stdio, pid %d\n", os.Getpid())
	if d, err := time.ParseDuration(os.Getenv(envExit)); err == nil && d > 0 {
		time.AfterFunc(d, func() {
			fmt.Fprintln(os.Stderr, "mcptest: exiting after", d, "as asked")
			os.Exit(0)
		})
	}
	err := NewServer(o).Run(context.Background(), &mcp.StdioTransport{})
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
	}
	os.Exit(0)
}

// Command returns the argv and the environment additions that start this test
// binary as a stdio server with o (the test package's TestMain must call
// [Main]).
func Command(o Options) ([]string, map[string]string) {
	env := map[string]string{envServe: "1", envPage: strconv.Itoa(o.PageSize)}
	if o.EffectsFile != "" {
		env[envEffects] = o.EffectsFile
	}
	if o.BadName {
		env[envBadName] = "1"
	}
	if o.Legacy {
		env[envLegacy] = "1"
	}
	if o.FailFile != "" {
		env[envFail] = o.FailFile
	}
	if o.ExitAfter > 0 {
		env[envExit] = o.ExitAfter.String()
	}
	return []string{os.Args[0]}, env
}

// The timing of the "reconnect" tool: the retry it asks of the client when it
// closes its stream, and how long after that it answers.
const (
	ReconnectRetry = 50 * time.Millisecond
	ReconnectDelay = 300 * time.Millisecond
)

// Echo is the structured content of the "meta" tool: what its request carried.
type Echo struct {
	// Meta is the request's _meta.
	Meta map[string]any `json:"meta"`
	// Arguments are the request's arguments.
	Arguments json.RawMessage `json:"arguments"`
	// IdempotencyKey is the request's Idempotency-Key header; HasKey says
	// whether it had one (never over stdio).
	IdempotencyKey string `json:"idempotency_key"`
	HasKey         bool   `json:"has_key"`
	// Headers are the request's HTTP headers, nil over stdio.
	Headers map[string][]string `json:"headers"`
}

// Annotated names the tools that carry annotations, for import tests, with
// the kind each gets when the annotations are trusted.
var Annotated = map[string]string{
	"ro":               "read_only",  // readOnlyHint
	"ro_destructive":   "read_only",  // readOnlyHint, destructiveHint true: read-only wins
	"idem":             "idempotent", // idempotentHint, destructiveHint false
	"idem_destructive": "effectful",  // idempotentHint, destructiveHint true
	"idem_unsaid":      "effectful",  // idempotentHint, destructiveHint absent (default true)
	"not_destructive":  "effectful",  // destructiveHint false only
	"bare":             "effectful",  // annotations with no hints
	"plain":            "effectful",  // no annotations at all
}

// Tools lists the names of the server's tools, without the optional bad one.
func Tools() []string {
	names := []string{"meta", "text", "single", "empty", "image", "structured", "big", "fail", "invalid_params",
		"internal_error", "needs_input", "confirm", "chatty", "effect", "hang", "reconnect"}
	return append(names, slices.Sorted(maps.Keys(Annotated))...)
}

var effectsMu sync.Mutex // serialises appends to an effects file within a process

// appendEffect appends one line for a run of tool.
func appendEffect(path, tool string, args json.RawMessage) error {
	if path == "" {
		return nil
	}
	effectsMu.Lock()
	defer effectsMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	compact, err := json.Marshal(args) // a RawMessage is written compacted
	if err != nil {
		f.Close()
		return err
	}
	if _, err := fmt.Fprintf(f, "%d %s %s\n", os.Getpid(), tool, compact); err != nil {
		f.Close()
		return err
	}
	// Synced, so that a test that kills the process right after sees the line.
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Effect is one line of an effects file.
type Effect struct {
	PID       int
	Tool      string
	Arguments string
}

// Effects reads the lines of an effects file; none when it does not exist.
func Effects(t testing.TB, path string) []Effect {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Effect
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), " ", 3)
		if len(parts) != 3 {
			t.Fatalf("effects file %s: bad line %q", path, sc.Text())
		}
		pid, err := strconv.Atoi(parts[0])
		if err != nil {
			t.Fatalf("effects file %s: bad line %q", path, sc.Text())
		}
		out = append(out, Effect{PID: pid, Tool: parts[1], Arguments: parts[2]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// WaitEffects waits, up to d, until the effects file holds at least n lines,
// and returns them.
func WaitEffects(t testing.TB, path string, n int, d time.Duration) []Effect {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if got := Effects(t, path); len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("effects file %s: fewer than %d lines after %s: %v", path, n, d, Effects(t, path))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func textResult(texts ...string) *mcp.CallToolResult {
	r := &mcp.CallToolResult{Content: []mcp.Content{}}
	for _, s := range texts {
		r.Content = append(r.Content, &mcp.TextContent{Text: s})
	}
	return r
}

var objectSchema = json.RawMessage(`{"type":"object"}`)

// NewServer returns the test server. Its tools:
//
//	meta            structured content: an [Echo] of the request
//	text            two text items, "hello" and "world"
//	single          one text item, "just this"
//	empty           no content at all
//	image           an image and a text item
//	structured      structured content {"b":2,"a":[1,"x"]} and its text
//	big             structured content {"n":9007199254740993}
//	fail            isError with the text "the flight is full"
//	invalid_params  a JSON-RPC error -32602
//	internal_error  a JSON-RPC error -32603
//	needs_input     an input-required result asking for an elicitation
//	confirm         asks its client to confirm (elicitation/create with
//	                Legacy, an input-required result otherwise) and answers
//	                the action
//	chatty          sends a progress notification (when asked for) and a log
//	                message, and answers "done"
//	effect          appends a line to the effects file, answers "done"
//	hang            appends a line, then waits until cancelled or released
//	reconnect       appends a line, closes the response stream of its request
//	                over Streamable HTTP (SEP-1699: the client is to resume it
//	                with Last-Event-ID after [ReconnectRetry]), waits
//	                [ReconnectDelay], and answers "resumed"
//
// and the tools of [Annotated], each answering "ok". effect and hang take
// {"entity": string, "note": string}; the others take any object.
func NewServer(o Options) *mcp.Server {
	page := o.PageSize
	if page == 0 {
		page = 3
	}
	opts := &mcp.ServerOptions{PageSize: page,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Logging: &mcp.LoggingCapabilities{}}}
	if o.Legacy {
		opts.SupportedProtocolVersions = []string{"2025-11-25"}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1"}, opts)
	add := func(name string, ann *mcp.ToolAnnotations, h mcp.ToolHandler) {
		s.AddTool(&mcp.Tool{Name: name, Description: "the test server's " + name, InputSchema: objectSchema, Annotations: ann}, h)
	}
	add("meta", nil, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		e := Echo{Meta: req.Params.Meta, Arguments: req.Params.Arguments}
		if req.Extra != nil && req.Extra.Header != nil {
			e.Headers = req.Extra.Header
			if v := req.Extra.Header.Values("Idempotency-Key"); len(v) > 0 {
				e.IdempotencyKey, e.HasKey = v[0], true
			}
		}
		b, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		r := textResult(string(b))
		r.StructuredContent = json.RawMessage(b)
		return r, nil
	})
	add("text", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return textResult("hello", "world"), nil
	})
	add("single", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return textResult("just this"), nil
	})
	add("empty", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return textResult(), nil
	})
	add("image", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r := textResult("a picture")
		r.Content = append([]mcp.Content{&mcp.ImageContent{Data: []byte("PNG"), MIMEType: "image/png"}}, r.Content...)
		return r, nil
	})
	add("structured", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r := textResult(`{"b":2,"a":[1,"x"]}`)
		r.StructuredContent = json.RawMessage(`{ "b": 2, "a": [1, "x"] }`)
		return r, nil
	})
	add("big", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r := textResult(`{"n":9007199254740993}`)
		r.StructuredContent = json.RawMessage(`{"n":9007199254740993}`)
		return r, nil
	})
	add("fail", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r := textResult("the flight is full")
		r.IsError = true
		return r, nil
	})
	add("invalid_params", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "flight is not a flight"}
	})
	add("internal_error", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the database went away mid-write"}
	})
	add("needs_input", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
			"confirm": &mcp.ElicitParams{Message: "Really book?", RequestedSchema: map[string]any{"type": "object"}},
		}}, nil
	})
	add("confirm", nil, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ask := &mcp.ElicitParams{Message: "Really book?", RequestedSchema: map[string]any{"type": "object"}}
		if r, ok := req.Params.InputResponses["confirm"].(*mcp.ElicitResult); ok {
			return textResult(r.Action), nil
		}
		if !o.Legacy {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": ask}}, nil
		}
		r, err := req.Session.Elicit(ctx, ask)
		if err != nil {
			res := textResult("elicitation failed: " + err.Error())
			res.IsError = true
			return res, nil
		}
		return textResult(r.Action), nil
	})
	add("chatty", nil, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if token := req.Params.GetProgressToken(); token != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: 1, Total: 2})
		}
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "half way"})
		return textResult("done"), nil
	})
	effectSchema := json.RawMessage(
		`{"type":"object","properties":{"entity":{"type":"string"},"note":{"type":"string"}},"required":["entity"]}`)
	s.AddTool(&mcp.Tool{Name: "effect", Description: "Writes a line.", InputSchema: effectSchema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := appendEffect(o.EffectsFile, "effect", req.Params.Arguments); err != nil {
				return nil, err
			}
			return textResult("done"), nil
		})
	s.AddTool(&mcp.Tool{Name: "hang", Description: "Writes a line, then waits.", InputSchema: effectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := appendEffect(o.EffectsFile, "hang", req.Params.Arguments); err != nil {
				return nil, err
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-o.Release:
				return nil, errors.New("released")
			}
		})
	s.AddTool(&mcp.Tool{Name: "reconnect", Description: "Writes a line, closes its stream, answers later.", InputSchema: effectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := appendEffect(o.EffectsFile, "reconnect", req.Params.Arguments); err != nil {
				return nil, err
			}
			if req.Extra != nil && req.Extra.CloseSSEStream != nil {
				req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: ReconnectRetry})
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(ReconnectDelay):
			}
			return textResult("resumed"), nil
		})
	yes, no := true, false
	for name, ann := range map[string]*mcp.ToolAnnotations{
		"ro":               {ReadOnlyHint: true},
		"ro_destructive":   {ReadOnlyHint: true, DestructiveHint: &yes},
		"idem":             {IdempotentHint: true, DestructiveHint: &no},
		"idem_destructive": {IdempotentHint: true, DestructiveHint: &yes},
		"idem_unsaid":      {IdempotentHint: true},
		"not_destructive":  {DestructiveHint: &no},
		"bare":             {},
		"plain":            nil,
	} {
		add(name, ann, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult("ok"), nil
		})
	}
	if o.BadName {
		add("bad.name", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult("ok"), nil
		})
	}
	return s
}
