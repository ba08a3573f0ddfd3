// Package promnames pulls the metric names out of PromQL expressions, so that
// tests can hold dashboards and alert rules to the metrics a program exports.
// It is a tokenizer, not a PromQL parser: it knows what may stand where a
// name cannot (keywords, functions and aggregations, label lists, matchers,
// strings, numbers, durations) and takes every other identifier for a metric
// name. Grafana's variables ($var, ${var}, [[var]]) are skipped.
package promnames

import (
	"fmt"
	"slices"
	"strings"
)

// keywords are the identifiers that are never metric names where they stand
// alone.
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"inf": true, "nan": true, "atan2": true, "start": true, "end": true,
}

// listKeywords are followed by a parenthesised list of label names.
var listKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// Names returns the distinct metric names expr selects, sorted. A selector
// that names its metric by matcher ({__name__="x"}) counts. It returns an
// error for an unterminated string or unbalanced brackets.
func Names(expr string) ([]string, error) {
	t := &tokenizer{s: expr}
	seen := map[string]bool{}
	depth := 0
	for t.skipSpace(); t.i < len(t.s); t.skipSpace() {
		c := t.s[t.i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			if _, err := t.str(); err != nil {
				return nil, err
			}
		case c == '{':
			name, err := t.matchers()
			if err != nil {
				return nil, err
			}
			if name != "" {
				seen[name] = true
			}
		case c == '[':
			if t.i+1 < len(t.s) && t.s[t.i+1] == '[' { // Grafana's [[var]]
				end := strings.Index(t.s[t.i:], "]]")
				if end < 0 {
					return nil, fmt.Errorf("promnames: unterminated [[ at %d", t.i)
				}
				t.i += end + 2
				continue
			}
			end := strings.IndexByte(t.s[t.i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("promnames: unterminated [ at %d", t.i)
			}
			t.i += end + 1
		case c == '$':
			t.variable()
		case c == '(':
			depth++
			t.i++
		case c == ')':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("promnames: unbalanced ) at %d", t.i)
			}
			t.i++
		case c == '}' || c == ']':
			return nil, fmt.Errorf("promnames: unbalanced %c at %d", c, t.i)
		case isDigit(c) || (c == '.' && t.i+1 < len(t.s) && isDigit(t.s[t.i+1])):
			t.number()
		case isNameStart(c):
			id := t.ident()
			t.skipSpace()
			next := byte(0)
			if t.i < len(t.s) {
				next = t.s[t.i]
			}
			lower := strings.ToLower(id)
			switch {
			case listKeywords[lower]:
				if next == '(' {
					if err := t.skipParens(); err != nil {
						return nil, err
					}
				}
			case keywords[lower]:
			case next == '(':
				// a function or an aggregation: its arguments follow
			case t.aggregationModifierFollows():
				// sum by (x) (...), sum without (x) (...)
			default:
				seen[id] = true
			}
		default:
			t.i++ // operators, commas, @
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("promnames: %d unclosed (", depth)
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

type tokenizer struct {
	s string
	i int
}

func isDigit(c byte) bool     { return c >= '0' && c <= '9' }
func isNameStart(c byte) bool { return c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isNameChar(c byte) bool  { return isNameStart(c) || isDigit(c) }

func (t *tokenizer) skipSpace() {
	for t.i < len(t.s) {
		switch c := t.s[t.i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			t.i++
		case c == '#': // a comment, to the end of the line
			for t.i < len(t.s) && t.s[t.i] != '\n' {
				t.i++
			}
		default:
			return
		}
	}
}

func (t *tokenizer) ident() string {
	start := t.i
	for t.i < len(t.s) && isNameChar(t.s[t.i]) {
		t.i++
	}
	return t.s[start:t.i]
}

// number skips a number or a duration (5m, 1h30m, 0x1f, 1e-3).
func (t *tokenizer) number() {
	for t.i < len(t.s) && (isNameChar(t.s[t.i]) || t.s[t.i] == '.' ||
		((t.s[t.i] == '-' || t.s[t.i] == '+') && (t.s[t.i-1] == 'e' || t.s[t.i-1] == 'E'))) {
		t.i++
	}
}

// variable skips a Grafana variable: $name or ${name...}.
func (t *tokenizer) variable() {
	t.i++
	if t.i < len(t.s) && t.s[t.i] == '{' {
		if end := strings.IndexByte(t.s[t.i:], '}'); end >= 0 {
			t.i += end + 1
			return
		}
		t.i = len(t.s)
		return
	}
	t.ident()
}

// str skips a quoted string and returns its raw contents.
func (t *tokenizer) str() (string, error) {
	q := t.s[t.i]
	start := t.i
	t.i++
	for t.i < len(t.s) {
		c := t.s[t.i]
		switch {
		case c == '\\' && q != '`':
			t.i += 2
		case c == q:
			t.i++
			return t.s[start+1 : t.i-1], nil
		default:
			t.i++
		}
	}
	return "", fmt.Errorf("promnames: unterminated string at %d", start)
}

// matchers skips {…} and returns the metric name a __name__="x" matcher sets.
func (t *tokenizer) matchers() (string, error) {
	start := t.i
	t.i++
	name := ""
	for t.skipSpace(); t.i < len(t.s); t.skipSpace() {
		c := t.s[t.i]
		switch {
		case c == '}':
			t.i++
			return name, nil
		case c == '"' || c == '\'' || c == '`':
			if _, err := t.str(); err != nil {
				return "", err
			}
		case c == '$':
			t.variable()
		case isNameStart(c):
			label := t.ident()
			t.skipSpace()
			if label == "__name__" && strings.HasPrefix(t.s[t.i:], "=") && !strings.HasPrefix(t.s[t.i:], "=~") {
				t.i++
				t.skipSpace()
				if t.i < len(t.s) && strings.ContainsRune(`"'`+"`", rune(t.s[t.i])) {
					v, err := t.str()
					if err != nil {
						return "", err
					}
					name = v
				}
			}
		default:
			t.i++
		}
	}
	return "", fmt.Errorf("promnames: unterminated { at %d", start)
}

// skipParens skips a parenthesised list at t.i.
func (t *tokenizer) skipParens() error {
	start := t.i
	end := strings.IndexByte(t.s[t.i:], ')')
	if end < 0 {
		return fmt.Errorf("promnames: unterminated ( at %d", start)
	}
	t.i += end + 1
	return nil
}

// aggregationModifierFollows reports whether by or without comes next, as
// after an aggregation's name.
func (t *tokenizer) aggregationModifierFollows() bool {
	rest := t.s[t.i:]
	for _, kw := range []string{"by", "without"} {
		if len(rest) > len(kw) && strings.EqualFold(rest[:len(kw)], kw) && !isNameChar(rest[len(kw)]) {
			r := strings.TrimLeft(rest[len(kw):], " \t\r\n")
			return strings.HasPrefix(r, "(")
		}
	}
	return false
}
