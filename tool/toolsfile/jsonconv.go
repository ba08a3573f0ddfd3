package toolsfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Limits on converting YAML to JSON, against alias bombs and runaway nesting.
const (
	maxDepth = 100     // nesting of mappings and sequences
	maxNodes = 100_000 // nodes emitted per file, aliases counted each time used
)

// jsonNumber matches a number literal JSON accepts as it is.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// convError is a conversion problem at a line.
type convError struct {
	line int
	msg  string
}

func (e *convError) Error() string { return e.msg }

// converter turns a YAML node tree into JSON text.
type converter struct {
	buf    bytes.Buffer
	budget int                 // nodes left to emit
	inside map[*yaml.Node]bool // alias targets being converted, to refuse cycles
}

// toJSON converts n. Mapping keys become strings; scalars keep their YAML type:
// null, booleans, numbers (decimal literals copied exactly, other spellings such
// as 0x1F converted), and strings (timestamps included, as written).
func (c *converter) toJSON(n *yaml.Node, depth int) error {
	if c.budget--; c.budget < 0 {
		return &convError{n.Line, fmt.Sprintf("is too large (more than %d nodes, aliases counted each time they are used)", maxNodes)}
	}
	if depth > maxDepth {
		return &convError{n.Line, fmt.Sprintf("nests deeper than %d levels", maxDepth)}
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return &convError{n.Line, "holds an alias to nothing"}
		}
		if c.inside[n.Alias] {
			return &convError{n.Line, "holds an alias to a node that contains it"}
		}
		if c.inside == nil {
			c.inside = map[*yaml.Node]bool{}
		}
		c.inside[n.Alias] = true
		defer delete(c.inside, n.Alias)
		return c.toJSON(n.Alias, depth+1)
	case yaml.MappingNode:
		c.buf.WriteByte('{')
		seen := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := resolve(n.Content[i])
			if k == nil || k.Kind != yaml.ScalarNode {
				return &convError{n.Content[i].Line, "has a mapping key that is not a scalar"}
			}
			if k.ShortTag() == "!!merge" {
				return &convError{k.Line, "uses a merge key (<<), which is not supported"}
			}
			if k.ShortTag() == "!!null" {
				return &convError{k.Line, "has a null mapping key"}
			}
			if first, dup := seen[k.Value]; dup {
				return &convError{k.Line, fmt.Sprintf("has the key %q twice (first at line %d)", k.Value, first)}
			}
			seen[k.Value] = k.Line
			if i > 0 {
				c.buf.WriteByte(',')
			}
			writeString(&c.buf, k.Value)
			c.buf.WriteByte(':')
			if err := c.toJSON(n.Content[i+1], depth+1); err != nil {
				return err
			}
		}
		c.buf.WriteByte('}')
	case yaml.SequenceNode:
		c.buf.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				c.buf.WriteByte(',')
			}
			if err := c.toJSON(e, depth+1); err != nil {
				return err
			}
		}
		c.buf.WriteByte(']')
	case yaml.ScalarNode:
		return c.scalar(n)
	default:
		return &convError{n.Line, "holds a YAML node of an unexpected kind"}
	}
	return nil
}

func (c *converter) scalar(n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		c.buf.WriteString("null")
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return &convError{n.Line, fmt.Sprintf("%q is not a boolean", n.Value)}
		}
		c.buf.WriteString(strconv.FormatBool(b))
	case "!!int", "!!float":
		if jsonNumber.MatchString(n.Value) {
			c.buf.WriteString(n.Value)
			return nil
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return &convError{n.Line, fmt.Sprintf("%q is not a number", n.Value)}
		}
		switch v := v.(type) {
		case int:
			c.buf.WriteString(strconv.Itoa(v))
		case int64:
			c.buf.WriteString(strconv.FormatInt(v, 10))
		case uint64:
			c.buf.WriteString(strconv.FormatUint(v, 10))
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return &convError{n.Line, fmt.Sprintf("%q has no JSON equivalent", n.Value)}
			}
			c.buf.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
		default:
			return &convError{n.Line, fmt.Sprintf("%q is not a number", n.Value)}
		}
	case "!!str", "!!timestamp", "!!binary":
		writeString(&c.buf, n.Value)
	default:
		return &convError{n.Line, fmt.Sprintf("uses the YAML tag %s, which has no JSON equivalent", n.ShortTag())}
	}
	return nil
}

// writeString writes s as a JSON string, leaving <, > and & as they are.
func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a string always encodes
	buf.Truncate(buf.Len() - 1) // the encoder's newline
}
