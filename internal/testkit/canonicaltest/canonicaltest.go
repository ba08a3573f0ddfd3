package canonicaltest

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/text/unicode/norm"
	"pgregory.net/rapid"
)

// Kind is the kind of a JSON [Value].
type Kind int

// The kinds of JSON values.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

// Value is a JSON value, as a model independent of any spelling.
type Value struct {
	Kind    Kind
	Bool    bool     // Bool
	Num     Num      // Number
	Str     string   // String
	Elems   []Value  // Array
	Members []Member // Object; names distinct after NFC
}

// Member is an object member.
type Member struct {
	Name  string
	Value Value
}

// Num is the exact decimal value ±Digits × 10^Exp. Digits has no leading or trailing
// zeros, except that zero is Digits "0" (Neg and Exp then do not matter).
type Num struct {
	Neg    bool
	Digits string
	Exp    int
}

// runes are characters that exercise escaping, NFC and UTF-16 ordering.
var runes = []rune{
	'a', 'b', 'z', 'A', 'Z', '0', '9', ' ', '_', '-', '"', '\\', '/',
	'\b', '\f', '\n', '\r', '\t', 0x00, 0x01, 0x0b, 0x1f, 0x7f, 0x80,
	0xe9, 'e', 0x301, // é, e + combining acute
	0xc5, 0x212b, 0x30a, // Å, Ångström sign, combining ring above
	0x1100, 0x1161, 0xac00, // Hangul jamo that compose, and a syllable
	0x0958, 0xfb33, // composition exclusions: NFC decomposes them
	0x20ac, 0x2028, 0x2029, 0xd7ff, 0xe000, 0xfffd, 0xffff,
	0x10000, 0x1d11e, 0x1f600, 0x10ffff,
}

// Strings generates strings rich in the characters that matter to canonical JSON,
// mixed with arbitrary valid UTF-8.
func Strings() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.StringOfN(rapid.SampledFrom(runes), 0, 8, -1),
		rapid.StringN(0, 6, -1),
		rapid.SampledFrom([]string{"", "a", "flight", "seats", "é", "e\u0301", "\U0001F600"}),
	)
}

// Nums generates numbers, integers and fractions, small and large, all within the
// range of finite non-zero doubles (or zero).
func Nums() *rapid.Generator[Num] {
	return rapid.Custom(func(t *rapid.T) Num {
		neg := rapid.Bool().Draw(t, "neg")
		var digits string
		switch rapid.IntRange(0, 3).Draw(t, "shape") {
		case 0:
			digits = strconv.Itoa(rapid.IntRange(0, 1000).Draw(t, "small"))
		case 1:
			digits = strconv.FormatUint(rapid.Uint64().Draw(t, "u64"), 10)
		default:
			digits = rapid.StringMatching(`[1-9][0-9]{0,24}`).Draw(t, "digits")
		}
		exp := 0
		if rapid.Bool().Draw(t, "scaled") {
			exp = rapid.IntRange(-30, 30).Draw(t, "exp")
			if rapid.IntRange(0, 9).Draw(t, "far") == 0 {
				exp = rapid.IntRange(-300, 280).Draw(t, "farExp")
			}
		}
		return MakeNum(neg, digits, exp)
	})
}

// MakeNum returns ±digits × 10^exp in the normal form of [Num]. digits must be
// decimal digits.
func MakeNum(neg bool, digits string, exp int) Num {
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return Num{Digits: "0"}
	}
	trimmed := strings.TrimRight(digits, "0")
	return Num{Neg: neg, Digits: trimmed, Exp: exp + len(digits) - len(trimmed)}
}

// Values generates JSON values nesting at most depth containers deep.
func Values(depth int) *rapid.Generator[Value] {
	return rapid.Custom(func(t *rapid.T) Value { return drawValue(t, depth, "") })
}

// Objects generates JSON objects nesting at most depth containers deep (the object
// itself counting as one).
func Objects(depth int) *rapid.Generator[Value] {
	return rapid.Custom(func(t *rapid.T) Value { return drawObject(t, depth, "") })
}

func drawValue(t *rapid.T, depth int, label string) Value {
	kinds := int(String) // at the depth limit, scalars only
	if depth > 0 {
		kinds = int(Object)
	}
	switch k := Kind(rapid.IntRange(0, kinds).Draw(t, label+"kind")); k {
	case Null:
		return Value{Kind: Null}
	case Bool:
		return Value{Kind: Bool, Bool: rapid.Bool().Draw(t, label+"bool")}
	case Number:
		return Value{Kind: Number, Num: Nums().Draw(t, label+"num")}
	case String:
		return Value{Kind: String, Str: Strings().Draw(t, label+"str")}
	case Array:
		n := rapid.IntRange(0, 4).Draw(t, label+"len")
		v := Value{Kind: Array, Elems: make([]Value, n)}
		for i := range v.Elems {
			v.Elems[i] = drawValue(t, depth-1, label+"e")
		}
		return v
	default:
		return drawObject(t, depth, label)
	}
}

func drawObject(t *rapid.T, depth int, label string) Value {
	names := rapid.SliceOfNDistinct(Strings(), 0, 5, norm.NFC.String).Draw(t, label+"names")
	v := Value{Kind: Object, Members: make([]Member, len(names))}
	for i, name := range names {
		v.Members[i] = Member{Name: name, Value: drawValue(t, depth-1, label+"m")}
	}
	return v
}

// Plain spells v in the most direct way: members in their model order, no
// whitespace, strings as they are with only the escapes JSON requires, numbers as
// digits and an exponent.
func Plain(v Value) string {
	var b strings.Builder
	plain(&b, v)
	return b.String()
}

func plain(b *strings.Builder, v Value) {
	switch v.Kind {
	case Null:
		b.WriteString("null")
	case Bool:
		b.WriteString(strconv.FormatBool(v.Bool))
	case Number:
		if v.Num.Neg && v.Num.Digits != "0" {
			b.WriteByte('-')
		}
		b.WriteString(v.Num.Digits)
		if v.Num.Exp != 0 && v.Num.Digits != "0" {
			b.WriteString("e" + strconv.Itoa(v.Num.Exp))
		}
	case String:
		quote(b, v.Str)
	case Array:
		b.WriteByte('[')
		for i, e := range v.Elems {
			if i > 0 {
				b.WriteByte(',')
			}
			plain(b, e)
		}
		b.WriteByte(']')
	case Object:
		b.WriteByte('{')
		for i, m := range v.Members {
			if i > 0 {
				b.WriteByte(',')
			}
			quote(b, m.Name)
			b.WriteByte(':')
			plain(b, m.Value)
		}
		b.WriteByte('}')
	}
}

func quote(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// Spell draws a random spelling of v: members shuffled, whitespace between tokens,
// strings in NFC, NFD or as they are with random escapes, numbers in random
// notation. Every spelling of v has the same canonical form.
func Spell(t *rapid.T, v Value) string {
	var b strings.Builder
	space(t, &b)
	spell(t, &b, v)
	space(t, &b)
	return b.String()
}

func space(t *rapid.T, b *strings.Builder) {
	b.WriteString(rapid.SampledFrom([]string{"", "", "", " ", "\n", "\t", "\r\n  "}).Draw(t, "ws"))
}

func spell(t *rapid.T, b *strings.Builder, v Value) {
	switch v.Kind {
	case Null:
		b.WriteString("null")
	case Bool:
		b.WriteString(strconv.FormatBool(v.Bool))
	case Number:
		b.WriteString(SpellNum(t, v.Num))
	case String:
		SpellString(t, b, v.Str)
	case Array:
		b.WriteByte('[')
		space(t, b)
		for i, e := range v.Elems {
			if i > 0 {
				b.WriteByte(',')
				space(t, b)
			}
			spell(t, b, e)
			space(t, b)
		}
		b.WriteByte(']')
	case Object:
		b.WriteByte('{')
		space(t, b)
		for i, m := range rapid.Permutation(v.Members).Draw(t, "order") {
			if i > 0 {
				b.WriteByte(',')
				space(t, b)
			}
			SpellString(t, b, m.Name)
			space(t, b)
			b.WriteByte(':')
			space(t, b)
			spell(t, b, m.Value)
			space(t, b)
		}
		b.WriteByte('}')
	}
}

// SpellNum draws a random JSON spelling of n: 2 may come out as 2, 2.0, 20e-1,
// 0.2e1, 2E0 or 200E-2, zero as 0, -0, 0.0 or 0e7.
func SpellNum(t *rapid.T, n Num) string {
	var b strings.Builder
	if n.Digits == "0" {
		if rapid.Bool().Draw(t, "negZero") {
			b.WriteByte('-')
		}
		b.WriteByte('0')
		if rapid.Bool().Draw(t, "zeroFrac") {
			b.WriteString("." + strings.Repeat("0", rapid.IntRange(1, 3).Draw(t, "zeros")))
		}
		if rapid.Bool().Draw(t, "zeroExp") {
			b.WriteString("e" + strconv.Itoa(rapid.IntRange(-400, 400).Draw(t, "anyExp")))
		}
		return b.String()
	}
	if n.Neg {
		b.WriteByte('-')
	}
	s := n.Digits + strings.Repeat("0", rapid.IntRange(0, 3).Draw(t, "padding"))
	exp := n.Exp - (len(s) - len(n.Digits)) // value = s × 10^exp
	if rapid.IntRange(0, 3).Draw(t, "leadingZero") == 0 {
		// 0.000s × 10^x
		q := rapid.IntRange(0, 3).Draw(t, "fracZeros")
		b.WriteString("0." + strings.Repeat("0", q) + s)
		exp += q + len(s)
	} else {
		p := rapid.IntRange(1, len(s)).Draw(t, "point")
		b.WriteString(s[:p])
		if p < len(s) {
			b.WriteString("." + s[p:])
		}
		exp += len(s) - p
	}
	if exp != 0 || rapid.IntRange(0, 3).Draw(t, "zeroExp") == 0 {
		b.WriteString(rapid.SampledFrom([]string{"e", "E"}).Draw(t, "e"))
		if exp >= 0 && rapid.Bool().Draw(t, "plus") {
			b.WriteByte('+')
		}
		b.WriteString(strconv.Itoa(exp))
	}
	return b.String()
}

// SpellString writes a random JSON spelling of s: in NFC, NFD or as it is, each
// character literal or escaped (short escapes, \u with either case of hex digits,
// surrogate pairs for characters beyond the BMP).
func SpellString(t *rapid.T, b *strings.Builder, s string) {
	switch rapid.IntRange(0, 2).Draw(t, "form") {
	case 1:
		s = norm.NFD.String(s)
	case 2:
		s = norm.NFC.String(s)
	}
	b.WriteByte('"')
	for _, r := range s {
		mustEscape := r == '"' || r == '\\' || r < 0x20
		mode := rapid.IntRange(0, 5).Draw(t, "escape")
		switch {
		case mustEscape && mode < 3:
			if short, ok := shortEscapes[r]; ok {
				b.WriteString(short)
				continue
			}
			fallthrough
		case mode == 0 || mustEscape:
			hexFmt := `\u%04x`
			if rapid.Bool().Draw(t, "upper") {
				hexFmt = `\u%04X`
			}
			if r >= 0x10000 {
				r1, r2 := surrogates(r)
				fmt.Fprintf(b, hexFmt+hexFmt, r1, r2)
			} else {
				fmt.Fprintf(b, hexFmt, r)
			}
		case r == '/' && mode == 1:
			b.WriteString(`\/`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

var shortEscapes = map[rune]string{
	'"': `\"`, '\\': `\\`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`,
}

func surrogates(r rune) (rune, rune) {
	r -= 0x10000
	return 0xD800 + (r>>10)&0x3FF, 0xDC00 + r&0x3FF
}
