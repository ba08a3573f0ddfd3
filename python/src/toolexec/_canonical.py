"""The canonical JSON form that idempotency keys hash (docs/PROTOCOL.md §6).

Two readers produce it: one of JSON text, which follows the rules of the Go
side's encoder (package ``idemkey/canonical``) byte for byte and refuses what it
refuses with the same code, in the same order (the first problem met in one
pass over the text); and one of Python values (mappings, lists, tuples, str,
int, float, Decimal, bool, None).

The rules, in short: strings (member names too) in Unicode NFC, escaped as
RFC 8785 escapes them; members sorted by the UTF-16 code units of their names;
a number whose exact value is an integer below 10**21 in magnitude written as
that integer, every other one through an IEEE-754 double in ECMAScript's
shortest form; no whitespace.
"""

from __future__ import annotations

import decimal
import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NoReturn

from .errors import (
    ArgumentsNotObjectError,
    InvalidArgumentsError,
    KeyErrorCode,
    UnsupportedValueError,
)

#: How deeply containers may nest in a document, the outermost counting as one.
MAX_DEPTH = 128


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what a document may expand to (0 is no bound, except depth,
    which is at most MAX_DEPTH)."""

    depth: int = MAX_DEPTH
    members: int = 0
    elements: int = 0
    values: int = 0


# --- strings --------------------------------------------------------------------

_ESCAPES = {i: f"\\u{i:04x}" for i in range(0x20)}
_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"})
_ESCAPES.update({0x22: '\\"', 0x5C: "\\\\"})
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def quote(s: str) -> str:
    """s as a JSON string: quotation mark, backslash and the controls below
    U+0020 escaped (\\b \\t \\n \\f \\r short, the others \\u00xx in lower case),
    everything else as it is. s must be valid (no lone surrogates)."""
    if _NEEDS_ESCAPE.search(s) is None:
        return '"' + s + '"'
    return '"' + s.translate(_ESCAPES) + '"'


# The code points that Unicode 15.0 gave a canonical combining class, which
# the tables of Python 3.11 (Unicode 14.0) do not know: the Go side (x/text,
# Unicode 15.0) reorders and composes around them. None of them decomposes or
# composes; only their class differs (a comparison of every code point's NFC,
# NFD and class under both found these ten and nothing else). A Python whose
# tables are newer than 15.0 (3.14 has 16.0) knows characters the Go side
# does not yet, and may normalise strings holding them differently.
_NEW_IN_15 = {
    0x10EFD: 220,
    0x10EFE: 220,
    0x10EFF: 220,
    0x11F41: 9,
    0x11F42: 9,
    0x1E08F: 230,
    0x1E4EC: 232,
    0x1E4ED: 232,
    0x1E4EE: 220,
    0x1E4EF: 230,
}
_UNICODE_MAJOR = int(unicodedata.unidata_version.split(".")[0])
_CCC_PATCH: dict[int, int] = _NEW_IN_15 if _UNICODE_MAJOR < 15 else {}
_PATCHED = (
    re.compile("[" + "".join(chr(c) for c in sorted(_CCC_PATCH)) + "]") if _CCC_PATCH else None
)


def nfc(s: str) -> str:
    """s in Unicode NFC, as the Go side normalises it. s must be valid."""
    if s.isascii():
        return s
    if _PATCHED is not None and _PATCHED.search(s) is not None:
        return _nfc_patched(s)
    if unicodedata.is_normalized("NFC", s):
        return s
    return unicodedata.normalize("NFC", s)


def _ccc(c: str) -> int:
    return _CCC_PATCH.get(ord(c), 0) or unicodedata.combining(c)


def _nfc_patched(s: str) -> str:
    # NFC by its definition (decompose, order the marks, compose) with the
    # combining classes patched; the decompositions and the composition pairs
    # are Python's own, which Unicode 15.0 did not change.
    chars = list(unicodedata.normalize("NFD", s))
    # Canonical ordering: a stable sort of each run of non-starters by class.
    i = 0
    while i < len(chars):
        if _ccc(chars[i]) == 0:
            i += 1
            continue
        j = i
        while j < len(chars) and _ccc(chars[j]) != 0:
            j += 1
        chars[i:j] = sorted(chars[i:j], key=_ccc)
        i = j
    # Canonical composition.
    out: list[str] = []
    starter = -1
    last_class = 0
    for c in chars:
        cc = _ccc(c)
        if starter >= 0:
            adjacent = starter == len(out) - 1
            if adjacent or (last_class != 0 and last_class < cc):
                pair = unicodedata.normalize("NFC", out[starter] + c)
                if len(pair) == 1:
                    out[starter] = pair
                    continue
        if cc == 0:
            starter = len(out)
        last_class = cc
        out.append(c)
    return "".join(out)


def utf16_key(name: str) -> bytes:
    """The sort key of a member name: its UTF-16 code units, big-endian, so
    that comparing the bytes compares the units."""
    return name.encode("utf-16-be")


# --- numbers --------------------------------------------------------------------

_EXACT_DIGITS = 21
_EXACT_BOUND = 10**_EXACT_DIGITS


def format_double(f: float) -> str:
    """The finite double f as ECMAScript's Number::toString writes it: the
    shortest digits that round-trip, plain when the decimal exponent lies in
    [-6, 21), in exponent form (1e+21, 1.5e-7) otherwise."""
    if f == 0:
        return "0"
    sign = "-" if f < 0 else ""
    mantissa, _, exp = repr(abs(f)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    point = len(whole) + (int(exp) if exp else 0)
    kept = digits.lstrip("0")
    point -= len(digits) - len(kept)
    d = kept.rstrip("0")
    k, n = len(d), point  # the value is 0.d × 10**n
    if k <= n <= 21:
        return sign + d + "0" * (n - k)
    if 0 < n <= 21:
        return sign + d[:n] + "." + d[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + d
    e = n - 1
    fraction = "." + d[1:] if k > 1 else ""
    return f"{sign}{d[0]}{fraction}e{'+' if e >= 0 else '-'}{abs(e)}"


def format_int(n: int) -> str | None:
    """An integer's canonical text, or None when it is beyond the doubles."""
    if -_EXACT_BOUND < n < _EXACT_BOUND:
        return str(n)
    try:
        return format_double(float(n))
    except OverflowError:
        return None


# --- JSON text --------------------------------------------------------------------

_SPACE = frozenset(b" \t\n\r")
_DIGITS = re.compile(rb"[0-9]*")
_PLAIN = re.compile(rb'[^"\\\x00-\x1f]*')
_SHORT_ESCAPES = {
    ord('"'): '"',
    ord("\\"): "\\",
    ord("/"): "/",
    ord("b"): "\b",
    ord("f"): "\f",
    ord("n"): "\n",
    ord("r"): "\r",
    ord("t"): "\t",
}
_HEX = re.compile(rb"[0-9a-fA-F]{4}")
# Beyond this many exponent digits every non-zero value is out of range; the
# Go side stops counting at 2**40 for the same reason.
_EXP_DIGITS_CAP = 15


def _describe(c: int) -> str:
    if 0x20 <= c < 0x7F:
        return f"character {chr(c)!r}"
    return f"byte {c:#04x}"


class Member:
    """One member of a canonical object: its NFC name, the name as the text
    spelled it (unescaped, before NFC), and the canonical ``"name":value``."""

    __slots__ = ("name", "offset", "spelled", "text")

    def __init__(self, name: str, spelled: str, text: str, offset: int) -> None:
        self.name = name
        self.spelled = spelled
        self.text = text
        self.offset = offset


def order_members(members: list[Member]) -> list[Member]:
    """members in canonical order; raises for two whose NFC names are equal:
    duplicate_member when two are spelled alike, nfc_collision otherwise (for
    the first such name in canonical order, as the Go side reports it)."""
    members = sorted(members, key=lambda m: utf16_key(m.name))
    for i in range(1, len(members)):
        if members[i].name != members[i - 1].name:
            continue
        start = i - 1
        end = i + 1
        while end < len(members) and members[end].name == members[start].name:
            end += 1
        group = members[start:end]
        for a in range(len(group)):
            for b in range(a + 1, len(group)):
                if group[a].spelled == group[b].spelled:
                    raise _DuplicateError(group[a], group[b])
        raise _CollisionError(group[0], group[1])
    return members


class _DuplicateError(Exception):
    def __init__(self, a: Member, b: Member) -> None:
        self.a, self.b = a, b


class _CollisionError(Exception):
    def __init__(self, a: Member, b: Member) -> None:
        self.a, self.b = a, b


class TextReader:
    """Canonicalises one JSON document in one pass, as the Go side does."""

    def __init__(self, raw: bytes, limits: Limits) -> None:
        self.raw = raw
        self.pos = 0
        self.depth = 0
        self.max_depth = min(max(limits.depth, 1), MAX_DEPTH)
        self.limits = limits
        self.values = 0
        self.top: list[Member] | None = None

    # errors

    def fail(self, code: KeyErrorCode, offset: int, reason: str) -> NoReturn:
        raise InvalidArgumentsError(code, reason, offset=offset)

    def syntax(self, offset: int, reason: str) -> NoReturn:
        self.fail(KeyErrorCode.INVALID_JSON, offset, reason)

    # the document

    def document(self) -> str:
        if self.raw.startswith(b"\xef\xbb\xbf"):
            self.syntax(0, "a byte order mark is not allowed")
        self.skip_space()
        text = self.value(top=True)
        self.skip_space()
        if self.pos != len(self.raw):
            self.syntax(self.pos, f"unexpected {_describe(self.raw[self.pos])} after the value")
        return text

    def skip_space(self) -> None:
        raw, pos = self.raw, self.pos
        while pos < len(raw) and raw[pos] in _SPACE:
            pos += 1
        self.pos = pos

    def value(self, top: bool = False) -> str:
        raw = self.raw
        if self.pos >= len(raw):
            self.syntax(self.pos, "unexpected end of input, want a value")
        self.values += 1
        if self.limits.values > 0 and self.values > self.limits.values:
            self.fail(
                KeyErrorCode.TOO_MANY_VALUES,
                self.pos,
                f"the document holds more than {self.limits.values} values",
            )
        c = raw[self.pos]
        if c == 0x7B:  # {
            members = self.object()
            if top:
                self.top = members
            return "{" + ",".join(m.text for m in members) + "}"
        if c == 0x5B:  # [
            return self.array()
        if c == 0x22:  # "
            return quote(self.string()[0])
        if c == 0x74:
            return self.literal("true")
        if c == 0x66:
            return self.literal("false")
        if c == 0x6E:
            return self.literal("null")
        if c == 0x2D or 0x30 <= c <= 0x39:
            return self.number()
        self.syntax(self.pos, f"unexpected {_describe(c)}, want a value")

    def literal(self, word: str) -> str:
        if not self.raw.startswith(word.encode(), self.pos):
            self.syntax(self.pos, f"invalid literal, want {word}")
        self.pos += len(word)
        return word

    def enter(self) -> None:
        self.depth += 1
        if self.depth > self.max_depth:
            self.fail(
                KeyErrorCode.TOO_DEEP, self.pos, f"containers nest deeper than {self.max_depth}"
            )

    def array(self) -> str:
        self.enter()
        raw = self.raw
        opened = self.pos
        self.pos += 1
        self.skip_space()
        if self.pos < len(raw) and raw[self.pos] == 0x5D:
            self.pos += 1
            self.depth -= 1
            return "[]"
        parts: list[str] = []
        limit = self.limits.elements
        while True:
            self.skip_space()
            if limit > 0 and len(parts) >= limit:
                self.fail(
                    KeyErrorCode.TOO_MANY_VALUES,
                    self.pos,
                    f"an array holds more than {limit} elements",
                )
            parts.append(self.value())
            self.skip_space()
            if self.pos >= len(raw):
                self.syntax(opened, "unterminated array")
            c = raw[self.pos]
            if c == 0x2C:
                self.pos += 1
                continue
            if c == 0x5D:
                self.pos += 1
                self.depth -= 1
                return "[" + ",".join(parts) + "]"
            self.syntax(self.pos, f"unexpected {_describe(c)} in array, want , or ]")

    def object(self) -> list[Member]:
        self.enter()
        raw = self.raw
        opened = self.pos
        self.pos += 1
        self.skip_space()
        if self.pos < len(raw) and raw[self.pos] == 0x7D:
            self.pos += 1
            self.depth -= 1
            return []
        members: list[Member] = []
        limit = self.limits.members
        while True:
            self.skip_space()
            if self.pos >= len(raw):
                self.syntax(opened, "unterminated object")
            c = raw[self.pos]
            if c != 0x22:
                self.syntax(self.pos, f"unexpected {_describe(c)} in object, want a member name")
            if limit > 0 and len(members) >= limit:
                self.fail(
                    KeyErrorCode.TOO_MANY_VALUES,
                    self.pos,
                    f"an object holds more than {limit} members",
                )
            offset = self.pos
            name, spelled = self.string()
            self.skip_space()
            if self.pos >= len(raw):
                self.syntax(opened, "unterminated object")
            c = raw[self.pos]
            if c != 0x3A:
                self.syntax(self.pos, f"unexpected {_describe(c)} after a member name, want :")
            self.pos += 1
            self.skip_space()
            value = self.value()
            members.append(Member(name, spelled, quote(name) + ":" + value, offset))
            self.skip_space()
            if self.pos >= len(raw):
                self.syntax(opened, "unterminated object")
            c = raw[self.pos]
            if c == 0x2C:
                self.pos += 1
                continue
            if c != 0x7D:
                self.syntax(self.pos, f"unexpected {_describe(c)} in object, want , or }}")
            self.pos += 1
            break
        try:
            ordered = order_members(members)
        except _DuplicateError as e:
            self.fail(
                KeyErrorCode.DUPLICATE_MEMBER,
                max(e.a.offset, e.b.offset),
                f"duplicate member name {e.a.spelled!r}",
            )
        except _CollisionError as e:
            self.fail(
                KeyErrorCode.NFC_COLLISION,
                max(e.a.offset, e.b.offset),
                f"member names {e.a.spelled!a} and {e.b.spelled!a} are equal after NFC",
            )
        self.depth -= 1
        return ordered

    def string(self) -> tuple[str, str]:
        """The string at the quote at pos: its content in NFC, and as spelled."""
        raw = self.raw
        opened = self.pos
        i = opened + 1
        parts: list[str] = []
        while True:
            m = _PLAIN.match(raw, i)
            assert m is not None  # the pattern matches the empty string
            j = m.end()
            if j > i:
                chunk = raw[i:j]
                if chunk.isascii():
                    parts.append(chunk.decode("ascii"))
                else:
                    try:
                        parts.append(chunk.decode("utf-8"))
                    except UnicodeDecodeError as e:
                        bad = i + e.start
                        self.fail(
                            KeyErrorCode.INVALID_UNICODE,
                            bad,
                            f"invalid UTF-8 byte {raw[bad]:#04x} in a string",
                        )
                i = j
            if i >= len(raw):
                self.syntax(opened, "unterminated string")
            c = raw[i]
            if c == 0x22:
                self.pos = i + 1
                break
            if c == 0x5C:
                ch, i = self.escape(i)
                parts.append(ch)
                continue
            self.syntax(i, f"control character {c:#04x} must be escaped in a string")
        spelled = "".join(parts)
        return nfc(spelled), spelled

    def escape(self, i: int) -> tuple[str, int]:
        raw = self.raw
        if i + 1 >= len(raw):
            self.syntax(i, "unterminated escape sequence")
        c = raw[i + 1]
        short = _SHORT_ESCAPES.get(c)
        if short is not None:
            return short, i + 2
        if c != 0x75:  # u
            self.syntax(i, f"invalid escape sequence \\{chr(c) if c < 0x80 else _describe(c)}")
        r = self.hex4(i)
        if 0xDC00 <= r <= 0xDFFF:
            self.fail(KeyErrorCode.INVALID_UNICODE, i, f"lone low surrogate \\u{r:04x}")
        if 0xD800 <= r <= 0xDBFF:
            j = i + 6
            if j + 1 < len(raw) and raw[j] == 0x5C and raw[j + 1] == 0x75:
                lo = self.hex4(j)
                if 0xDC00 <= lo <= 0xDFFF:
                    return chr(0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00)), j + 6
            self.fail(
                KeyErrorCode.INVALID_UNICODE,
                i,
                f"high surrogate \\u{r:04x} without a low surrogate after it",
            )
        return chr(r), i + 6

    def hex4(self, i: int) -> int:
        if i + 6 > len(self.raw):
            self.syntax(i, "truncated \\u escape")
        if _HEX.fullmatch(self.raw, i + 2, i + 6) is None:
            self.syntax(i, "invalid \\u escape, want four hex digits")
        return int(self.raw[i + 2 : i + 6], 16)

    def number(self) -> str:
        raw = self.raw
        start = i = self.pos
        negative = raw[i] == 0x2D
        if negative:
            i += 1
        int_start = i
        if i >= len(raw) or not 0x30 <= raw[i] <= 0x39:
            self.syntax(i, "want a digit in the number")
        if raw[i] == 0x30:
            i += 1
            if i < len(raw) and 0x30 <= raw[i] <= 0x39:
                self.syntax(int_start, "leading zeros are not allowed in a number")
        else:
            i = self.digits(i)
        int_end = i
        frac_start = frac_end = i
        if i < len(raw) and raw[i] == 0x2E:
            i += 1
            frac_start = i
            i = self.digits(i)
            if i == frac_start:
                self.syntax(i, "want a digit after the decimal point")
            frac_end = i
        exp = 0
        if i < len(raw) and raw[i] in b"eE":
            i += 1
            exp_negative = False
            if i < len(raw) and raw[i] in b"+-":
                exp_negative = raw[i] == 0x2D
                i += 1
            exp_start = i
            i = self.digits(i)
            if i == exp_start:
                self.syntax(i, "want a digit in the exponent")
            exp_digits = raw[exp_start:i].lstrip(b"0")
            if len(exp_digits) > _EXP_DIGITS_CAP:
                exp = 10**_EXP_DIGITS_CAP
            elif exp_digits:
                exp = int(exp_digits)
            if exp_negative:
                exp = -exp
        self.pos = i

        # value = ±D × 10**scale, D the significant digits (no leading or
        # trailing zeros) across the decimal point.
        digits = raw[int_start:int_end] + raw[frac_start:frac_end]
        significant = digits.lstrip(b"0")
        if not significant:
            return "0"  # every zero: -0, 0.000, 0e999999999
        core = significant.rstrip(b"0")
        scale = exp - (frac_end - frac_start) + (len(significant) - len(core))
        magnitude = len(core) + scale  # the value lies in [10**(magnitude-1), 10**magnitude)
        if scale >= 0 and magnitude <= _EXACT_DIGITS:
            return ("-" if negative else "") + core.decode("ascii") + "0" * scale
        # Beyond 10**309 no double is near; below 10**-324 every value rounds to zero.
        if magnitude - 1 > 309 or magnitude < -324:
            self.out_of_range(start)
        f = float(raw[start:i])
        if math.isinf(f) or f == 0:
            self.out_of_range(start)
        return format_double(f)

    def digits(self, i: int) -> int:
        m = _DIGITS.match(self.raw, i)
        assert m is not None  # the pattern matches the empty string
        return m.end()

    def out_of_range(self, start: int) -> NoReturn:
        text = self.raw[start : self.pos].decode("ascii")
        shown = f"{text[:32]}… ({len(text)} bytes)" if len(text) > 40 else text
        self.fail(
            KeyErrorCode.NUMBER_OUT_OF_RANGE,
            start,
            f"number {shown} does not fit a finite non-zero double",
        )


def read_text(raw: bytes, limits: Limits) -> list[Member]:
    """The canonical members of the object raw holds; the whole document is
    checked first, so an object that is no object is refused last."""
    reader = TextReader(raw, limits)
    reader.document()
    if reader.top is None:
        raise ArgumentsNotObjectError(f"the arguments are {_kind_of(raw)}, not a JSON object")
    return reader.top


def _kind_of(raw: bytes) -> str:
    text = raw.lstrip(b" \t\n\r")[:1]
    return {
        b"[": "an array",
        b'"': "a string",
        b"t": "a boolean",
        b"f": "a boolean",
        b"n": "null",
    }.get(text, "a number")


# --- Python values ---------------------------------------------------------------


def _index_path(path: str, key: object) -> str:
    return f"{path}[{key!r}]"


class ValueReader:
    """Canonicalises Python values (the same limits, checked in iteration
    order)."""

    def __init__(self, limits: Limits, root: str = "arguments") -> None:
        self.limits = limits
        self.max_depth = min(max(limits.depth, 1), MAX_DEPTH)
        self.depth = 0
        self.values = 0
        self.root = root

    def fail(self, code: KeyErrorCode, path: str, reason: str) -> NoReturn:
        raise InvalidArgumentsError(code, reason, path=path)

    def top(self, value: object) -> list[Member]:
        if not isinstance(value, Mapping):
            raise ArgumentsNotObjectError(
                f"the arguments are {_python_kind(value)}, not a mapping (or the JSON text of an "
                "object)"
            )
        self.count(self.root)
        return self.mapping(value, self.root)

    def count(self, path: str) -> None:
        self.values += 1
        if self.limits.values > 0 and self.values > self.limits.values:
            self.fail(
                KeyErrorCode.TOO_MANY_VALUES,
                path,
                f"the arguments hold more than {self.limits.values} values",
            )

    def enter(self, path: str) -> None:
        self.depth += 1
        if self.depth > self.max_depth:
            self.fail(
                KeyErrorCode.TOO_DEEP,
                path,
                f"containers nest deeper than {self.max_depth} (a container that holds itself?)",
            )

    def value(self, v: object, path: str) -> str:
        self.count(path)
        if v is None:
            return "null"
        if v is True:
            return "true"
        if v is False:
            return "false"
        if isinstance(v, bool):  # a bool subclass cannot exist, but be explicit
            return "true" if v else "false"
        if isinstance(v, int):
            text = format_int(int(v))
            if text is None:
                self.fail(
                    KeyErrorCode.NUMBER_OUT_OF_RANGE,
                    path,
                    "integer does not fit a finite double",
                )
            return text
        if isinstance(v, float):
            f = float(v)
            if math.isnan(f) or math.isinf(f):
                self.fail(
                    KeyErrorCode.NUMBER_OUT_OF_RANGE,
                    path,
                    f"{f!r} is not a finite number, and JSON has no other",
                )
            return format_double(f)
        if isinstance(v, decimal.Decimal):
            return self.decimal(v, path)
        if isinstance(v, str):
            return quote(self.string(v, path))
        if isinstance(v, Mapping):
            members = self.mapping(v, path)
            return "{" + ",".join(m.text for m in members) + "}"
        if isinstance(v, (list, tuple)):
            return self.sequence(v, path)
        raise UnsupportedValueError(
            KeyErrorCode.INVALID_JSON,
            f"a value of type {type(v).__qualname__} has no JSON form (allowed: dict and other "
            "mappings with str keys, list, tuple, str, int, float, Decimal, bool, None)",
            path=path,
        )

    def decimal(self, d: decimal.Decimal, path: str) -> str:
        # A Decimal is exact, like the number a JSON text spells: its text
        # takes the text's rule (an integer below 10**21 exactly, any other
        # number through a double).
        if not d.is_finite():
            self.fail(KeyErrorCode.NUMBER_OUT_OF_RANGE, path, f"{d} is not a finite number")
        reader = TextReader(str(d).encode("ascii"), self.limits)
        try:
            return reader.number()
        except InvalidArgumentsError as e:
            self.fail(e.code, path, e.reason)

    def string(self, s: str, path: str) -> str:
        plain = str.__str__(s)  # the text of a str subclass (a StrEnum member) itself
        if not plain.isascii():
            try:
                plain.encode("utf-8")
            except UnicodeEncodeError as e:
                self.fail(
                    KeyErrorCode.INVALID_UNICODE,
                    path,
                    f"lone surrogate U+{ord(plain[e.start]):04X} at index {e.start} of a string",
                )
        return nfc(plain)

    def mapping(self, m: Mapping[object, object], path: str) -> list[Member]:
        self.enter(path)
        limit = self.limits.members
        members: list[Member] = []
        for key, item in m.items():
            if not isinstance(key, str):
                raise UnsupportedValueError(
                    KeyErrorCode.INVALID_JSON,
                    f"member name {key!r} is of type {type(key).__qualname__}, not str",
                    path=path,
                )
            if limit > 0 and len(members) >= limit:
                self.fail(
                    KeyErrorCode.TOO_MANY_VALUES,
                    path,
                    f"a mapping holds more than {limit} members",
                )
            where = _index_path(path, key)
            name = self.string(key, where)
            text = self.value(item, where)
            members.append(Member(name, str.__str__(key), quote(name) + ":" + text, len(members)))
        try:
            ordered = order_members(members)
        except _DuplicateError as e:  # two keys spelled alike: only a strange mapping has them
            self.fail(KeyErrorCode.DUPLICATE_MEMBER, path, f"duplicate member name {e.a.spelled!r}")
        except _CollisionError as e:
            self.fail(
                KeyErrorCode.NFC_COLLISION,
                path,
                f"member names {e.a.spelled!a} and {e.b.spelled!a} are equal after NFC",
            )
        self.depth -= 1
        return ordered

    def sequence(self, items: list[object] | tuple[object, ...], path: str) -> str:
        self.enter(path)
        limit = self.limits.elements
        parts: list[str] = []
        for i, item in enumerate(items):
            if limit > 0 and i >= limit:
                self.fail(
                    KeyErrorCode.TOO_MANY_VALUES,
                    path,
                    f"a sequence holds more than {limit} elements",
                )
            parts.append(self.value(item, f"{path}[{i}]"))
        self.depth -= 1
        return "[" + ",".join(parts) + "]"


def _python_kind(v: object) -> str:
    if v is None:
        return "None"
    return f"a {type(v).__qualname__}"
