package nodetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ClientScript is the TypeScript SDK client, relative to the harness.
const ClientScript = "client.mjs"

// TSClient runs the harness's TypeScript SDK client on the machine's node.
type TSClient struct {
	node   string
	dir    string
	script string
}

// Client returns the TypeScript SDK client after checking that node, the
// harness, client.mjs and the SDK at its pinned version are there; see the
// package documentation for what happens when one is not.
func Client(t testing.TB) *TSClient {
	t.Helper()
	node := Node(t)
	Package(t, SDKPackage)
	dir := Dir(t)
	script := filepath.Join(dir, ClientScript)
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("nodetest: %v", err) // a file of the repository, not an install step
	}
	return &TSClient{node: node, dir: dir, script: script}
}

// Target is the server the client connects to: over Streamable HTTP when URL
// is set, sending Token (when set) as Authorization: Bearer; otherwise over
// stdio, spawning Command with Env added to the SDK's default environment
// (which is not the whole environment of this process).
type Target struct {
	URL   string
	Token string

	Command []string
	Env     map[string]string
}

// Call is one tools/call the client makes. Meta becomes the request's _meta;
// with Progress, the client adds the progress token "progress-<n>" to it (n is
// the call's index) and records the notifications that carry that token.
type Call struct {
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Meta      map[string]any `json:"_meta,omitempty"`
	Progress  bool           `json:"progress,omitempty"`
}

// Options change how the client behaves beyond its defaults.
type Options struct {
	// Concurrent makes the calls all at once instead of one after another.
	Concurrent bool
	// Elicit, when not empty, makes the client declare the elicitation
	// capability and answer each elicitation/create request with the first
	// rule that matches it (a rule with an empty Contains matches every
	// request); a request no rule matches is cancelled. Empty: the client
	// declares no elicitation capability.
	Elicit []ElicitRule
	// LogLevel, when set, is sent in logging/setLevel after connecting, so
	// that the server sends log messages from that level on.
	LogLevel string
}

// ElicitRule answers the elicitation requests whose message contains
// Contains with Action ("accept", "decline" or "cancel") and, for accept,
// Content.
type ElicitRule struct {
	Contains string         `json:"contains,omitempty"`
	Action   string         `json:"action"`
	Content  map[string]any `json:"content,omitempty"`
}

// Report is what the client saw: the server's identity, every tool it
// listed, one result per call, in the order of the calls, the elicitation
// requests and log messages the server sent, in the order they came, and the
// errors the SDK reported on the side while they ran (through the client's
// onerror: a notification it could not handle, for one).
type Report struct {
	Server       *Implementation `json:"server"`
	Tools        []ListedTool    `json:"tools"`
	Results      []CallResult    `json:"results"`
	Elicitations []Elicitation   `json:"elicitations"`
	Logs         []LogMessage    `json:"logs"`
	Errors       []string        `json:"errors"`
}

// Elicitation is one elicitation/create request the client received.
type Elicitation struct {
	Mode            string          `json:"mode"` // "" when the request named none (form)
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema"`
}

// LogMessage is one notifications/message the client received.
type LogMessage struct {
	Level  string          `json:"level"`
	Logger string          `json:"logger"`
	Data   json.RawMessage `json:"data"`
}

// Implementation is the server's name and version from its initialize answer.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// ListedTool is one tool from tools/list. Annotations holds the annotations
// object as sent (nil when the server sent none), so that a test can tell an
// absent hint from a false one.
type ListedTool struct {
	Name        string         `json:"name"`
	Annotations map[string]any `json:"annotations"`
}

// Tool returns the listed tool called name, or false.
func (r *Report) Tool(name string) (ListedTool, bool) {
	for _, tl := range r.Tools {
		if tl.Name == name {
			return tl, true
		}
	}
	return ListedTool{}, false
}

// CallResult is the answer to one call: a CallToolResult, or, when the server
// answered with a JSON-RPC error, Error.
type CallResult struct {
	Tool              string          `json:"tool"`
	IsError           bool            `json:"isError"`
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"` // "null" when absent
	Meta              map[string]any  `json:"_meta"`
	Progress          []Progress      `json:"progress"` // only for calls with Progress
	Error             *RPCError       `json:"error"`
}

// Text joins the text of every text content item, one per line.
func (r CallResult) Text() string {
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Content is one content item of a result. Raw holds the whole item.
type Content struct {
	Type string
	Text string
	Raw  json.RawMessage
}

// UnmarshalJSON keeps the item whole in Raw besides its type and text.
func (c *Content) UnmarshalJSON(b []byte) error {
	var v struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	c.Type, c.Text, c.Raw = v.Type, v.Text, append(json.RawMessage(nil), b...)
	return nil
}

// Progress is one progress notification the client received for a call.
type Progress struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total"`
	Message  string  `json:"message"`
}

// RPCError is a JSON-RPC error the server answered a call with.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// Run connects to target, lists its tools and makes calls in order. An error
// other than a JSON-RPC error answering a call (which lands in that call's
// result) ends the run: Run returns a [*RunError] carrying the client's
// standard error.
func (c *TSClient) Run(ctx context.Context, target Target, calls ...Call) (*Report, error) {
	return c.RunOptions(ctx, target, Options{}, calls...)
}

// RunConcurrent is Run with the calls made all at once instead of one after
// another; the results are still in the order of the calls.
func (c *TSClient) RunConcurrent(ctx context.Context, target Target, calls ...Call) (*Report, error) {
	return c.RunOptions(ctx, target, Options{Concurrent: true}, calls...)
}

// RunOptions is Run with the client behaving as o says.
func (c *TSClient) RunOptions(ctx context.Context, target Target, o Options, calls ...Call) (*Report, error) {
	req := struct {
		URL         string            `json:"url,omitempty"`
		Token       string            `json:"token,omitempty"`
		Command     []string          `json:"command,omitempty"`
		Env         map[string]string `json:"env,omitempty"`
		Calls       []Call            `json:"calls"`
		Concurrent  bool              `json:"concurrent,omitempty"`
		Elicitation []ElicitRule      `json:"elicitation,omitempty"`
		LogLevel    string            `json:"logLevel,omitempty"`
	}{target.URL, target.Token, target.Command, target.Env, calls, o.Concurrent, o.Elicit, o.LogLevel}
	if req.Calls == nil {
		req.Calls = []Call{}
	}
	in, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("nodetest: client request: %w", err)
	}
	out, err := run(ctx, ClientScript, c.node, c.dir, in, c.script)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(out, &rep); err != nil {
		return nil, fmt.Errorf("nodetest: client output %q: %w", tail(string(out), 2000), err)
	}
	if len(rep.Results) != len(calls) {
		return nil, fmt.Errorf("nodetest: client answered %d of %d calls", len(rep.Results), len(calls))
	}
	return &rep, nil
}
