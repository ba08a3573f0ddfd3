package workerset

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/tesserix/toolexec/idemkey/canonical"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/natstool"
)

// fieldNames are the parts of a declaration that must agree, in the order
// messages name them.
var fieldNames = [...]string{"description", "parameters", "kind", "key_arguments", "check_arguments", "timeout_ms", "subject"}

// declaration is what one declarer says of a tool, each part rendered so that
// equal meanings are equal strings.
type declaration struct {
	spec    tool.Spec
	subject string
	fields  [len(fieldNames)]string
}

// declare renders spec, whose requests go to subject. A spec without a
// timeout has natstool's default.
func declare(spec tool.Spec, subject string) *declaration {
	if spec.Timeout == 0 {
		spec.Timeout = natstool.DefaultTimeout
	}
	d := &declaration{spec: spec, subject: subject}
	d.fields[0] = spec.Description
	d.fields[1] = canonicalSchema(spec.Parameters)
	if p := spec.Idempotency; p != nil {
		d.fields[2] = string(p.Kind)
		d.fields[3] = "every argument"
		if p.KeyArguments != nil {
			d.fields[3] = nameList(p.KeyArguments)
		}
		d.fields[4] = nameList(p.CheckArguments)
	}
	d.fields[5] = strconv.FormatInt(spec.Timeout.Milliseconds(), 10)
	d.fields[6] = subject
	return d
}

// canonicalSchema renders a parameters schema canonically (RFC 8785, as keys
// are), so that spacing and member order do not count as a difference.
func canonicalSchema(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	if c, err := canonical.Canonicalize(raw); err == nil {
		return string(c)
	}
	return string(raw)
}

// nameList renders a list of argument names as a set.
func nameList(names []string) string {
	s := slices.Clone(names)
	slices.Sort(s)
	return "[" + strings.Join(slices.Compact(s), ",") + "]"
}

// key identifies the declaration's meaning: declarations with equal keys are
// alike.
func (d *declaration) key() string { return strings.Join(d.fields[:], "\x00") }

// differ returns the names of the parts in which any of ds differs from the
// first, in fieldNames' order.
func differ(ds []*declaration) []string {
	var out []string
	for i, name := range fieldNames {
		for _, d := range ds[1:] {
			if d.fields[i] != ds[0].fields[i] {
				out = append(out, name)
				break
			}
		}
	}
	return out
}
