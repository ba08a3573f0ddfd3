package idemkey

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/tesserix/toolexec/idemkey/canonical"
)

// MaxDepth is how deeply the arguments object may nest, the object itself counting
// as one. It leaves room for the envelope within [canonical.MaxDepth].
const MaxDepth = canonical.MaxDepth - 1

// Default bounds of [Limits]: far beyond the arguments of any tool call a model
// or a program writes, and well below what a megabyte of JSON can hold (about half
// a million values).
const (
	DefaultMaxMembers  = 1_000
	DefaultMaxElements = 10_000
	DefaultMaxValues   = 20_000
)

// Limits bound what a call's arguments may expand to once parsed: the most
// members of one object, elements of one array, and values in the whole
// arguments object (every member's value and element, containers included). A
// zero field takes its default (DefaultMaxMembers, DefaultMaxElements,
// DefaultMaxValues). Arguments over a bound are refused with a
// [*canonical.Error] of code too_many_values, found as the parser meets the
// excess, before anything is built from the rest. The depth is bounded by
// [MaxDepth] whatever the limits.
type Limits struct {
	Members  int
	Elements int
	Values   int
}

// canonical returns l with its defaults, as canonical's limits.
func (l Limits) canonical() canonical.Limits {
	c := canonical.Limits{Depth: MaxDepth, Members: l.Members, Elements: l.Elements, Values: l.Values}
	if c.Members <= 0 {
		c.Members = DefaultMaxMembers
	}
	if c.Elements <= 0 {
		c.Elements = DefaultMaxElements
	}
	if c.Values <= 0 {
		c.Values = DefaultMaxValues
	}
	return c
}

// Key is a derived idempotency key.
type Key struct {
	// Hex is the key: the lowercase hex SHA-256 of Canonical, 64 characters.
	Hex string
	// Canonical is the canonical envelope that was hashed. It holds the key
	// arguments' values: log or store Hex, never Canonical.
	Canonical []byte
}

var _ fmt.Stringer = Key{}

// String returns the key in hex (Hex).
func (k Key) String() string { return k.Hex }

// Arguments are a call's arguments, validated and canonicalised once. An Arguments is
// immutable and safe for concurrent use.
type Arguments struct {
	obj *canonical.Object
}

// Parse validates raw, a call's arguments, which must be a JSON object with a
// canonical form within the default [Limits]. It checks the whole object, not only
// the members a key will use. Errors: a [*canonical.Error] (wrapped) for text with
// no canonical form, including nesting deeper than [MaxDepth], and for arguments
// over a limit; [ErrNotObject] for well-formed JSON that is not an object. [Code]
// names either.
func Parse(raw []byte) (*Arguments, error) {
	obj, err := parseObject(raw)
	if err != nil {
		return nil, err
	}
	return &Arguments{obj: obj}, nil
}

// ParseValue is [Parse] that also returns the arguments decoded, from the same one
// pass over raw, as a JSON Schema validator reads them: see
// [canonical.ParseObjectValue]. It returns Parse's errors.
func ParseValue(raw []byte) (*Arguments, map[string]any, error) {
	return Limits{}.ParseValue(raw)
}

// ParseValue is the package's [ParseValue] within l.
func (l Limits) ParseValue(raw []byte) (*Arguments, map[string]any, error) {
	obj, value, err := canonical.ParseObjectValue(raw, l.canonical())
	if err != nil {
		return nil, nil, wrapParse(err)
	}
	return &Arguments{obj: obj}, value, nil
}

func parseObject(raw []byte) (*canonical.Object, error) {
	obj, err := canonical.ParseObject(raw, Limits{}.canonical())
	if err != nil {
		return nil, wrapParse(err)
	}
	return obj, nil
}

func wrapParse(err error) error {
	if errors.Is(err, canonical.ErrNotObject) {
		return fmt.Errorf("%w (%w)", ErrNotObject, err)
	}
	return fmt.Errorf("idemkey: arguments: %w", err)
}

// Derive parses args and derives the key for one call: Parse, then
// [Arguments.Key]. It returns the errors of both.
func Derive(tenant, runID, tool string, args []byte, keyArguments []string) (Key, error) {
	obj := objects.Get().(*canonical.Object)
	defer objects.Put(obj)
	if err := obj.Parse(args, Limits{}.canonical()); err != nil {
		return Key{}, wrapParse(err)
	}
	return derive(obj, tenant, runID, tool, keyArguments)
}

// objects recycles the parsed arguments of Derive, which never outlive the call:
// the key's canonical bytes are copied out of them.
var objects = sync.Pool{New: func() any { return new(canonical.Object) }}

// Key derives the idempotency key of a call with these arguments. keyArguments nil
// means every argument; empty and non-nil means none; otherwise the named arguments,
// in any order. It returns an error wrapping [ErrUnderivable], naming the argument,
// if a key argument is absent from the call (an argument sent as null is present),
// and a [*canonical.Error] with code invalid_unicode (wrapped) if tenant, runID or
// tool is not valid UTF-8. Those strings are normalised to NFC like every other.
func (a *Arguments) Key(tenant, runID, tool string, keyArguments []string) (Key, error) {
	return derive(a.obj, tenant, runID, tool, keyArguments)
}

// Has reports whether the call sent an argument with this name (compared after NFC),
// whatever its value, null included.
func (a *Arguments) Has(name string) bool { return a.obj.Index(name) >= 0 }

// Names returns the names of the call's arguments, in NFC and in canonical order.
func (a *Arguments) Names() []string {
	names := make([]string, a.obj.Len())
	for i := range names {
		names[i] = a.obj.Name(i)
	}
	return names
}

// Canonical returns the canonical form of the whole arguments object. The slice must
// not be modified.
func (a *Arguments) Canonical() []byte { return a.obj.Bytes() }

// CheckDigest returns the lowercase hex SHA-256 of the canonical object made of the
// named arguments the call sent (absent ones are left out; duplicates count once).
// It returns "" when names is empty: there is nothing to check.
func (a *Arguments) CheckDigest(names []string) string {
	if len(names) == 0 {
		return ""
	}
	var stack [16]int
	idx, _, _ := pick(a.obj, names, stack[:0])
	size := 2 + membersLen(a.obj, idx)
	buf := make([]byte, 0, size)
	buf = append(buf, '{')
	buf = appendMembers(buf, a.obj, idx)
	buf = append(buf, '}')
	return hexSum(buf)
}

// pick returns the indexes, in canonical order and without repeats, of the named
// members that are present. It also returns the first name that is absent, and
// whether there was one.
func pick(obj *canonical.Object, names []string, idx []int) ([]int, string, bool) {
	missing, absent := "", false
	for _, name := range names {
		i := obj.Index(name)
		if i < 0 {
			if !absent {
				missing, absent = name, true
			}
			continue
		}
		idx = append(idx, i)
	}
	slices.Sort(idx)
	return slices.Compact(idx), missing, absent
}

// membersLen returns the length of the selected members joined by commas; idx nil
// selects them all.
func membersLen(obj *canonical.Object, idx []int) int {
	if idx == nil {
		return len(obj.Bytes()) - 2
	}
	n := max(len(idx)-1, 0)
	for _, i := range idx {
		n += len(obj.Member(i))
	}
	return n
}

// appendMembers appends the selected members joined by commas; idx nil selects them
// all.
func appendMembers(buf []byte, obj *canonical.Object, idx []int) []byte {
	if idx == nil {
		b := obj.Bytes()
		return append(buf, b[1:len(b)-1]...)
	}
	for k, i := range idx {
		if k > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, obj.Member(i)...)
	}
	return buf
}

// The envelope's members in canonical order: arguments, run_id, tenant, tool.
const (
	envArguments = `{"arguments":{`
	envRunID     = `},"run_id":`
	envTenant    = `,"tenant":`
	envTool      = `,"tool":`
)

func derive(obj *canonical.Object, tenant, runID, tool string, keyArguments []string) (Key, error) {
	var stack [16]int
	var idx []int // nil: every argument
	if keyArguments != nil {
		var missing string
		var absent bool
		idx, missing, absent = pick(obj, keyArguments, stack[:0])
		if absent {
			return Key{}, fmt.Errorf("%w: key argument %q is absent from the call", ErrUnderivable, missing)
		}
	}
	// Room for the fixed text, the members, and the three strings with their quotes;
	// strings that need escaping or NFC grow the buffer.
	size := len(envArguments) + len(envRunID) + len(envTenant) + len(envTool) + 1 +
		membersLen(obj, idx) + len(runID) + len(tenant) + len(tool) + 6
	buf := make([]byte, 0, size)
	buf = append(buf, envArguments...)
	buf = appendMembers(buf, obj, idx)
	buf = append(buf, envRunID...)
	var err error
	if buf, err = canonical.AppendString(buf, runID); err != nil {
		return Key{}, fmt.Errorf("idemkey: run id: %w", err)
	}
	buf = append(buf, envTenant...)
	if buf, err = canonical.AppendString(buf, tenant); err != nil {
		return Key{}, fmt.Errorf("idemkey: tenant: %w", err)
	}
	buf = append(buf, envTool...)
	if buf, err = canonical.AppendString(buf, tool); err != nil {
		return Key{}, fmt.Errorf("idemkey: tool: %w", err)
	}
	buf = append(buf, '}')
	return Key{Hex: hexSum(buf), Canonical: buf}, nil
}

func hexSum(b []byte) string {
	sum := sha256.Sum256(b)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}
