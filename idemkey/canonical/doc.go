// Package canonical turns JSON text into the canonical form that toolexec hashes
// into idempotency keys: RFC 8785 (the JSON Canonicalization Scheme) with the two
// amendments of the toolexec contract.
//
// The output of [Canonicalize] is RFC 8785 text, with these rules:
//
//   - Every string, member names included, is normalised to Unicode NFC. Invalid
//     UTF-8 and lone surrogate escapes (\ud800 without a low surrogate after it, or a
//     low surrogate alone) are refused with [ErrInvalidUnicode].
//   - Members of an object are sorted by the UTF-16 code units of their NFC names.
//     Two members with the same name in the raw text are refused with
//     [ErrDuplicateMember]; two different spellings that become equal under NFC are
//     refused with [ErrNFCCollision].
//   - Strings are escaped as ECMAScript's JSON.stringify escapes them: `"`, `\` and
//     the controls below U+0020 only (\b \t \n \f \r, the others as \u00xx in
//     lowercase hex). Everything else, `/` and U+2028 included, is literal UTF-8.
//   - A number whose exact decimal value is an integer with absolute value below
//     10^21 is written as that integer's digits: 2, 2.0, 2e0 and 20e-1 all become 2,
//     -0 becomes 0, and 9007199254740993 is kept exactly. Every other number is
//     rounded to the nearest IEEE-754 double and written as ECMAScript's
//     Number::toString writes it (1e21 becomes 1e+21, 1e-7 stays 1e-7, 0.000001
//     stays 0.000001). A number beyond the largest finite double, or a non-zero
//     number so small that it rounds to zero (1e-400), is refused with
//     [ErrNumberOutOfRange]. Exponents are never expanded: 1e999999999 is refused
//     as fast as 1e400, and 0e999999999 is simply 0.
//   - No whitespace between tokens; true, false and null as they are. Booleans and
//     numbers never collapse into each other.
//
// The input must be one JSON value as RFC 8259 defines it: whitespace is space, tab,
// line feed and carriage return only; a leading byte order mark, trailing data,
// comments, NaN or Infinity, single quotes, leading zeros and trailing commas are
// refused with [ErrSyntax]. Containers nest at most [MaxDepth] deep ([ErrTooDeep]).
// [ParseObject] takes [Limits] as well: a shallower depth, and the most members an
// object, elements an array and values the document may hold ([ErrTooManyValues]),
// checked as the encoder meets them, so that a document over a bound costs no more
// than the bytes read up to it.
//
// The encoder is a single pass over the raw bytes: it never builds a tree of values
// and never goes through encoding/json, which could neither see duplicate members nor
// keep a number's exact text. Every error is an [*Error] carrying one of the Code
// constants and the byte offset of the problem; match it with errors.Is against the
// sentinels in this package, or with errors.As to read the code and offset.
//
// [ParseObject] canonicalises a document that must be an object and keeps its
// top-level members apart, so that a caller (package idemkey) can pick some of them
// without parsing the text again.
package canonical
