package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/tesserix/toolexec/internal/app/demo"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/toolsfile"
)

// The placeholders an --args template of emitter bench may hold.
const (
	phKey    = "{{key}}"    // the key number: shared by a call and its duplicates
	phFlight = "{{flight}}" // a flight number made from the key number
	phCall   = "{{call}}"   // the call number: different for every call
	phPad    = "{{pad}}"    // filler that brings the arguments to --arg-bytes
)

// demoTemplates are the arguments bench sends to the demo airline's tools when
// --args is not given. book and lookup_fare are keyed by the flight, so the key
// number becomes a flight; book's request_id changes on every call, as a retry's
// would.
var demoTemplates = map[string]string{
	"book":           `{"flight":"` + phFlight + `","seats":1,"request_id":"r` + phCall + `"}`,
	"lookup_fare":    `{"flight":"` + phFlight + `"}`,
	"update_profile": `{"passenger":"p` + phKey + `","seat":"window"}`,
}

// flightAlphabet and flightNumbers shape the flight numbers {{flight}} makes:
// two characters of the alphabet and up to four digits, as the demo tools'
// schemas require.
const (
	flightAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	flightNumbers  = 10000
	maxFlightKeys  = len(flightAlphabet) * len(flightAlphabet) * flightNumbers
)

// flightOf returns the flight number standing for key number k, one of
// maxFlightKeys.
func flightOf(k int) string {
	p, n := k/flightNumbers, k%flightNumbers
	a := len(flightAlphabet)
	return string([]byte{flightAlphabet[p/a%a], flightAlphabet[p%a]}) + strconv.Itoa(n)
}

// argsTemplate renders the arguments of each call from a template: the literal
// text between placeholders, and the placeholders themselves.
type argsTemplate struct {
	parts    []string // literal text and placeholders, in order
	size     int      // --arg-bytes: the size {{pad}} fills the arguments to; 0 for none
	hasPad   bool
	hasKey   bool // the template holds {{key}} or {{flight}}
	hasFlt   bool
	template string
}

// parseArgsTemplate splits s into literal text and placeholders. An unknown
// {{...}} is an error, and so is --arg-bytes without {{pad}} to fill.
func parseArgsTemplate(s string, size int) (*argsTemplate, error) {
	t := &argsTemplate{size: size, template: s}
	rest := s
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			t.parts = append(t.parts, rest)
			break
		}
		j := strings.Index(rest[i:], "}}")
		if j < 0 {
			return nil, fmt.Errorf("--args: %q opens a placeholder it does not close", rest[i:])
		}
		ph := rest[i : i+j+2]
		switch ph {
		case phKey:
			t.hasKey = true
		case phFlight:
			t.hasKey, t.hasFlt = true, true
		case phCall:
		case phPad:
			t.hasPad = true
		default:
			return nil, fmt.Errorf("--args: unknown placeholder %s (want %s, %s, %s or %s)", ph, phKey, phFlight, phCall, phPad)
		}
		t.parts = append(t.parts, rest[:i], ph)
		rest = rest[i+j+2:]
	}
	if size > 0 && !t.hasPad {
		return nil, errors.New("--arg-bytes needs a " + phPad + " placeholder in --args to fill (the demo tools accept no extra arguments)")
	}
	return t, nil
}

// render returns the arguments of call number call, whose key number is key.
func (t *argsTemplate) render(key, call int) []byte {
	b := make([]byte, 0, max(t.size, len(t.template)+16))
	pad := -1
	for _, p := range t.parts {
		switch p {
		case phKey:
			b = strconv.AppendInt(b, int64(key), 10)
		case phFlight:
			b = append(b, flightOf(key)...)
		case phCall:
			b = strconv.AppendInt(b, int64(call), 10)
		case phPad:
			pad = len(b) // filled below, once the rest's length is known
		default:
			b = append(b, p...)
		}
	}
	if pad < 0 {
		return b
	}
	n := max(0, t.size-len(b))
	out := make([]byte, 0, len(b)+n)
	out = append(out, b[:pad]...)
	for range n {
		out = append(out, 'x')
	}
	return append(out, b[pad:]...)
}

// benchTool finds the declaration of the tool bench calls: in the tools file
// when one is given, else among the demo airline's tools. It returns nil when
// the tool is declared in neither: bench then cannot know its kind or derive
// its keys, and judges the check from the answers alone. A tools file's nats
// tools count as declared there. A tools file with MCP
// servers has them started to learn their tools, then stopped again.
func benchTool(name, toolsFile string) (*tool.Tool, error) {
	if toolsFile != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ts, err := toolsfile.Load(ctx, toolsFile, toolsfile.Options{})
		if err != nil {
			return nil, fmt.Errorf("--tools-file: %w", err)
		}
		defer ts.Close() // the declarations stay usable; their bodies are not called
		for _, t := range ts.Tools() {
			if t.Name() == name {
				return t, nil
			}
		}
		// A nats tool's body is a worker's; bench needs its declaration only,
		// so it gets a body that is never called.
		for _, p := range ts.NATSTools() {
			if p.Spec.Name == name {
				return tool.New(p.Spec, func(context.Context, tool.Context, json.RawMessage) (string, error) {
					return "", errors.New("bench: a declaration's body is not called")
				})
			}
		}
		return nil, fmt.Errorf("--tools-file %s declares no tool %q", toolsFile, name)
	}
	for _, t := range demo.New().Tools() {
		if t.Name() == name {
			return t, nil
		}
	}
	return nil, nil
}

// describeTool says what bench knows of t: its kind and key arguments.
func describeTool(t *tool.Tool) string {
	if t == nil {
		return "declaration unknown"
	}
	p := t.Policy()
	switch {
	case p == nil:
		return "no idempotency policy"
	case !p.Kind.Deduplicated():
		return string(p.Kind)
	case p.KeyArguments == nil:
		return string(p.Kind) + ", key: every argument"
	default:
		return fmt.Sprintf("%s, key [%s]", p.Kind, strings.Join(p.KeyArguments, ","))
	}
}

// planKeys returns the key number of each of n calls: distinct keys numbered
// 0..distinct-1, each once, and n-distinct duplicates each repeating one of
// them, all in random order. distinct is n less the duplicate share, and at
// least one.
func planKeys(n int, duplicates float64, seed uint64) (plan []int, distinct int) {
	if n <= 0 {
		return nil, 0
	}
	distinct = max(1, n-int(float64(n)*duplicates+0.5))
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	plan = make([]int, n)
	for i := range plan {
		if i < distinct {
			plan[i] = i
		} else {
			plan[i] = r.IntN(distinct)
		}
	}
	r.Shuffle(n, func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	return plan, distinct
}
